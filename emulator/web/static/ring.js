/* The ring panel of the live page (loaded before app.js, whose helpers $, fmtInt, fmtNum and esc
   it uses when called). */
"use strict";

/* ---------------- ring (canvas) ---------------- */

const STATE_LABELS = {
  alive: "alive", unhealthy: "unhealthy", suspected: "suspected by the RM", paused: "paused (injected)",
  crashed: "crashed, not yet removed", joining: "registered, not yet on the ring", lost: "removed, not back (nodes lost now)",
};

/* The RM's ring in its own order, as arcs (one per member on a small ring, a few hundred at
   10,000 nodes): each arc is split by the fractions of its members in each state, so 5% crashed
   paints 5% of the circle; an outer bar, as long as the arc's share of trouble, keeps a single
   bad node among thousands visible. */
function renderRing(r) {
  const cv = $("ring");
  const dpr = window.devicePixelRatio || 1;
  const size = 360;
  if (cv.width !== size * dpr) { cv.width = size * dpr; cv.height = size * dpr; }
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, size, size);
  const cx = size / 2, cy = size / 2, R = size / 2 - 34;
  const counts = r.counts || {};
  cv.dataset.counts = JSON.stringify(counts);
  cv.dataset.arcs = String(r.arcs.length);
  const n = r.size;
  if (!n) {
    g.fillStyle = "#6b7280"; g.font = "13px system-ui"; g.textAlign = "center";
    g.fillText("no nodes on the ring yet", cx, cy);
  } else {
    const states = r.arc_states;
    const per = (2 * Math.PI) / n;  // radians per member
    const gap = r.arcs.length < 120 ? Math.min(per * 0.18, 0.02) : 0;
    g.lineWidth = r.arcs.length < 120 ? 16 : 14;
    let pos = 0;  // members drawn so far
    for (const arc of r.arcs) {
      const members = arc.slice(2).reduce((a, b) => a + b, 0);
      const a0 = -Math.PI / 2 + pos * per;
      let a = a0 + gap / 2;
      const span = members * per - gap;
      let trouble = 0, worst = 0;
      states.forEach((st, i) => {
        const k = arc[2 + i];
        if (!k) return;
        const da = (span * k) / members;
        g.strokeStyle = PALETTE.state[st];
        // A hair of overlap: adjacent arcs drawn edge to edge leave anti-aliasing seams.
        g.beginPath(); g.arc(cx, cy, R, a, a + da + (gap ? 0 : 0.004)); g.stroke();
        a += da;
        if (i > 0) { trouble += k; worst = i; }
      });
      if (trouble) {
        const mid = a0 + (members * per) / 2;
        const len = 4 + 18 * (trouble / members);
        g.strokeStyle = PALETTE.state[states[worst]];
        g.lineWidth = Math.max(1.5, Math.min(4, members * per * (R + 12) * 0.8));
        g.beginPath();
        g.moveTo(cx + (R + 11) * Math.cos(mid), cy + (R + 11) * Math.sin(mid));
        g.lineTo(cx + (R + 11 + len) * Math.cos(mid), cy + (R + 11 + len) * Math.sin(mid));
        g.stroke();
        g.lineWidth = r.arcs.length < 120 ? 16 : 14;
      }
      pos += members;
    }
    g.fillStyle = "#111827"; g.textAlign = "center"; g.font = "600 26px system-ui";
    g.fillText(fmtInt(n), cx, cy - 4);
    g.font = "12px system-ui"; g.fillStyle = "#6b7280";
    g.fillText("on the ring" + (r.version != null ? ` · version ${r.version}` : ""), cx, cy + 16);
    g.fillText(n > r.arcs.length ? `${r.arcs.length} arcs of ~${Math.round(n / r.arcs.length)} nodes` : "ring order, clockwise", cx, cy + 34);
  }
  $("ring-sub").textContent = r.source ? `source: ${r.source}` : "";
  $("ring-legend").innerHTML = Object.keys(STATE_LABELS)
    .filter((st) => counts[st] || st === "alive" || st === "lost" || st === "crashed")
    .map((st) => `<li><i style="background:${PALETTE.state[st]}"></i>${STATE_LABELS[st]} <b>${fmtInt(counts[st] || 0)}</b></li>`)
    .join("");
  $("ring-changes").innerHTML = r.changes.length
    ? r.changes.map((e) => `<li><span class="muted">${fmtNum(e.t, 1)}s</span> ${esc(e.event)} ${esc(e.address || e.node || "")}${e.machine_id != null ? " #" + e.machine_id : ""}${e.reason ? " — " + esc(e.reason) : ""}</li>`).join("")
    : "<li class='muted'>none yet</li>";
}
