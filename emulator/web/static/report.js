/* Charts of a run report (report.html inlines this file, uPlot and REPORT_DATA). */
"use strict";
(function () {
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"];
  const CHARTS = [
    { title: "Utilisation (%)", scale: 100, keys: [["cpu_utilization", "CPU"], ["ram_utilization", "RAM"],
      ["fair_cpu_bound", "CPU bound (pooled)", true], ["fair_ram_bound", "RAM bound (pooled)", true]] },
    { title: "Heartbeats per emulated second", keys: [["sent_per_s", "sent"], ["responses_per_s", "processed"],
      ["updates_per_s", "scheduler updates"]] },
    { title: "Per-interval efficiency (h1ᵢ = mᵢ/nᵢ, h2ᵢ = sᵢ/nᵢ)", keys: [["h1_i", "mᵢ/nᵢ"], ["h2_i", "sᵢ/nᵢ"]] },
    { title: "RM queue depth", keys: [["rm_queue_depth", "inbound"], ["scheduler_queue_depth", "scheduler"]] },
    { title: "Tasks", keys: [["running_tasks", "running"], ["pending_tasks", "pending"]] },
    { title: "Scheduler: refusals, fallback allocations, preemptions (cumulative)", keys: [["refusals", "refusals"],
      ["fallback_allocations", "fallbacks"], ["preemptions", "preemptions"]] },
    { title: "Nodes and removals per interval", keys: [["nodes", "registered nodes"], ["removals", "removals"]] },
  ];
  const runs = REPORT_DATA;
  const host = document.getElementById("charts");
  const multi = runs.length > 1;
  for (const spec of CHARTS) {
    const tables = [];
    const series = [{ label: "t (s)" }];
    runs.forEach((run, ri) => {
      const s = run.series;
      const cols = [s.t_s];
      spec.keys.forEach(([key, label, boundOnly], ki) => {
        if (!s[key] || (boundOnly && multi)) return;
        cols.push(spec.scale ? s[key].map((v) => (v == null ? null : v * spec.scale)) : s[key]);
        const color = multi ? PALETTE[ri % PALETTE.length] : PALETTE[ki % PALETTE.length];
        series.push({
          label: multi ? `${run.label}: ${label}` : label, stroke: color, width: 1.5,
          dash: multi && ki > 0 ? [6, 3 * ki] : (boundOnly ? [3, 3] : undefined), spanGaps: true,
          value: (u, v) => (v == null ? "—" : (+v).toFixed(Math.abs(v) < 10 ? 3 : 1)),
        });
      });
      tables.push(cols);
    });
    if (series.length < 2) continue;
    const data = tables.length > 1 ? uPlot.join(tables) : tables[0];
    const box = document.createElement("div");
    box.className = "chart";
    const h = document.createElement("h3");
    h.textContent = spec.title;
    box.appendChild(h);
    host.appendChild(box);
    const width = Math.max(320, Math.min(host.clientWidth, 1100));
    new uPlot({ width, height: 260, series, scales: { x: { time: false } },
      axes: [{ label: "emulated time (s)" }, {}], legend: { live: true } }, data, box);
  }
})();
