/* hbemu live status page. Data comes only from the JSON API: the push stream /api/stream
   (server-sent events, one "tick" per second) and /api/nodes for the paginated node table. */
"use strict";

const $ = (id) => document.getElementById(id);
const fmtInt = (v) => (v == null ? "—" : Math.round(v).toLocaleString("en-US"));
const fmtNum = (v, d = 2) => (v == null || Number.isNaN(v) ? "—" : (+v).toFixed(d));
const fmtPct = (v) => (v == null ? "—" : (100 * v).toFixed(1) + "%");
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

const page = {
  cluster: null,
  series: {},        // column -> array, appended per tick
  derived: { sent: [], processed: [], updates: [], h1: [], h2: [] },
  charts: {},
  ops: null,
  opsSort: { k: "dominant_share", desc: true },
  opsOpen: new Set(),
  poolsSort: { k: "name", desc: false },
  nodes: { page: 1, per_page: 20, sort: "machine_id", desc: false, q: "", state: "" },
  nodesBusy: false,
  eventsShown: [],
  faultTimes: [],    // emulated times of faults, marked on the charts
  shareNames: null,  // {pool: [...], op: [...]} once the share columns are known
};

/* ---------------- charts (uPlot) ---------------- */

function chartWidth(el) { return Math.max(280, el.clientWidth - 4); }
const M = (k) => PALETTE.metric[k];
const warmup = () => (page.cluster ? page.cluster.warmup_s || 0 : 0);
const faults = () => page.faultTimes;

function makeChart(id, title, series, opts = {}) {
  const el = $(id);
  const u = new uPlot({
    title, width: chartWidth(el), height: opts.height || 190,
    scales: { x: { time: false }, y: { range: HBCharts.fromZero(opts.floor || 1), ...(opts.y || {}) }, ...(opts.scales || {}) },
    axes: [{ size: 30, values: (u, vals) => vals.map((v) => v + "s") },
      { size: 62, ...(opts.counts ? { incrs: HBCharts.INT_INCRS } : {}) }, ...(opts.axes || [])],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
    plugins: [HBCharts.marksPlugin(warmup, faults)],
    series: [{ label: "t" }, ...series.map((s, k) => ({ spanGaps: true, points: { show: false }, ...HBCharts.layered(k), ...s }))],
  }, [[], ...series.map(() => [])], el);
  page.charts[id] = u;
  return u;
}

/* Show a chart only once one of its series has a non-zero value (an empty chart says nothing). */
function setData(id, data) {
  const u = page.charts[id];
  if (!u) return;
  const el = $(id);
  const show = HBCharts.hasData(data.slice(1));
  if (el.hidden === show) {
    el.hidden = !show;
    if (show) u.setSize({ width: chartWidth(el), height: u.height });
  }
  u.setData(data);
}

function initCharts() {
  const pct = { value: (u, v) => (v == null ? "—" : v.toFixed(1) + "%") };
  makeChart("c-util", "CPU and RAM allocated / capacity (%)", [
    { label: "CPU", stroke: M("cpu_utilization"), ...pct },
    { label: "RAM", stroke: M("ram_utilization"), ...pct },
    { label: "CPU bound (pooled)", stroke: M("fair_cpu_bound"), ...pct },
  ], { y: { range: [0, 100] } });
  makeChart("c-tasks", "Tasks: running and pending", [
    { label: "running", stroke: M("running_tasks") },
    { label: "pending", stroke: M("pending_tasks") },
  ], { height: 160, counts: true });
  makeChart("c-sched", "Scheduler: refusals, fallback allocations, preemptions (cumulative)", [
    { label: "refusals", stroke: M("refusals") },
    { label: "fallbacks", stroke: M("fallback_allocations") },
    { label: "preemptions", stroke: M("preemptions") },
  ], { height: 150, counts: true });
  makeChart("c-hb", "Heartbeats per emulated second", [
    { label: "sent", stroke: M("sent_per_s") },
    { label: "processed", stroke: M("responses_per_s") },
    { label: "scheduler updates", stroke: M("updates_per_s") },
  ]);
  makeChart("c-eff", "Per-interval efficiency h1ᵢ = mᵢ/nᵢ, h2ᵢ = sᵢ/aᵢ", [
    { label: "mᵢ/nᵢ", stroke: M("h1_i") },
    { label: "sᵢ/aᵢ", stroke: M("h2_i") },
  ], { height: 160, y: { range: (u, min, max) => [Math.min(0.8, min ?? 0.8), Math.max(1.05, max ?? 1.05)] } });
  makeChart("c-rm", "RM busy fraction and queue depth", [
    { label: "busy fraction", stroke: M("rm_busy_fraction"), scale: "y" },
    { label: "inbound queue", stroke: M("rm_queue_depth"), scale: "q" },
    { label: "scheduler queue", stroke: M("scheduler_queue_depth"), scale: "q" },
  ], { height: 160, y: { range: [0, 1] }, scales: { q: { range: HBCharts.fromZero(1) } },
    axes: [{ scale: "q", side: 1, size: 56, grid: { show: false } }] });
  const usage = () => [
    { label: "allocated", stroke: PALETTE.series[0], width: 2.2 },
    { label: "limits", stroke: PALETTE.series[1], width: 1.5, dash: [6, 4] },
    { label: "used", stroke: PALETTE.series[2], width: 1.8 },
  ];
  makeChart("c-usage-cpu", "CPU: allocated, limits and real usage (cores)", usage(), { height: 180, counts: true });
  makeChart("c-usage-ram", "Memory: allocated, limits and real usage (GiB)", usage(), { height: 180, counts: true });
  for (const id of ["c-usage-cpu", "c-usage-ram", "c-tasks", "c-sched", "c-pool-share", "c-pool-running", "c-op-share", "c-op-pending"]) $(id).hidden = true;
  window.addEventListener("resize", () => {
    for (const [id, u] of Object.entries(page.charts)) u.setSize({ width: chartWidth($(id)), height: u.height });
  });
}

/* The per-pool and per-entry charts, made once the run's share columns are known. */
function initShareCharts(columns) {
  if (page.shareNames) return;
  const pools = HBCharts.shareNames(columns, "pool");
  const ops = HBCharts.shareNames(columns, "op");
  page.shareNames = { pool: pools, op: ops };
  const shareSeries = (names) => names.flatMap((n, i) => [
    { label: `${n} dominant`, stroke: PALETTE.series[i % PALETTE.series.length], width: 2.2 },
    { label: `${n} fair`, stroke: PALETTE.series[i % PALETTE.series.length], width: 1.3, dash: [6, 4] },
  ]);
  const countSeries = (names) => names.map((n, i) => ({ label: n, stroke: PALETTE.series[i % PALETTE.series.length], ...HBCharts.layered(i) }));
  const share = { height: 200, floor: 0.05 };
  if (pools.length) {
    makeChart("c-pool-share", "Per pool: dominant share vs fair share", shareSeries(pools), share);
    makeChart("c-pool-running", "Per pool: running tasks", countSeries(pools), { height: 200, counts: true });
  }
  if (ops.length) {
    makeChart("c-op-share", "Per workload entry: dominant share vs fair share", shareSeries(ops), share);
    makeChart("c-op-pending", "Per workload entry: pending tasks", countSeries(ops), { height: 200, counts: true });
  }
}

function appendSeries(doc) {
  const ts = doc.series;
  if (!ts.t_s || ts.t_s.length === 0) return;
  initShareCharts(doc.columns || Object.keys(ts));
  const interval = doc.interval_s;
  // The stream sends the last point again once its m_i and s_i have settled: replace what we have from there on.
  const have = page.series.t_s || [];
  let keep = have.length;
  while (keep > 0 && have[keep - 1] >= ts.t_s[0]) keep--;
  for (const a of [...Object.values(page.series), ...Object.values(page.derived)]) a.length = Math.min(a.length, keep);
  for (const c of Object.keys(ts)) (page.series[c] = page.series[c] || []).push(...ts[c]);
  const t = page.series.t_s;
  const d = page.derived;
  for (let i = d.sent.length; i < t.length; i++) {
    // The nominal interval, not the measured gap: a sample taken late would otherwise spike.
    const dt = interval;
    // h2 per interval: of the heartbeats that arrived at the RM (a_i), those updated in time (s_i).
    const n = page.series.n_i[i], m = page.series.m_i[i], s = page.series.s_i[i], a = page.series.a_i[i];
    d.sent.push(dt > 0 ? n / dt : null);
    d.processed.push(dt > 0 ? m / dt : null);
    d.updates.push(dt > 0 ? s / dt : null);
    d.h1.push(n > 0 ? m / n : null);
    d.h2.push(a > 0 ? s / a : null);
  }
  const S = page.series;
  const pct = (a) => a.map((v) => (v == null ? null : 100 * v));
  const zeros = t.map(() => null);
  setData("c-util", [t, pct(S.cpu_utilization), pct(S.ram_utilization), pct(S.fair_cpu_bound)]);
  setData("c-tasks", [t, S.running_tasks, S.pending_tasks]);
  setData("c-sched", [t, S.refusals || zeros, S.fallback_allocations || zeros, S.preemptions || zeros]);
  setData("c-hb", [t, d.sent, d.processed, d.updates]);
  setData("c-eff", [t, d.h1, d.h2]);
  setData("c-rm", [t, S.rm_busy_fraction, S.rm_queue_depth, S.scheduler_queue_depth]);
  const col = (kind, n, metric) => S[`${kind}:${n}:${metric}`] || zeros;
  for (const [kind, shareId, countId, metric] of [["pool", "c-pool-share", "c-pool-running", "running"],
    ["op", "c-op-share", "c-op-pending", "pending"]]) {
    const names = page.shareNames[kind];
    if (!names.length) continue;
    setData(shareId, [t, ...names.flatMap((n) => [col(kind, n, "dominant_share"), col(kind, n, "fair_share")])]);
    setData(countId, [t, ...names.map((n) => col(kind, n, metric))]);
  }
  $("panel-shares").hidden = ["c-pool-share", "c-pool-running", "c-op-share", "c-op-pending"].every((id) => $(id).hidden);
  if (S["usage:cpu_used"]) {
    setData("c-usage-cpu", [t, S["usage:cpu_allocated"], S["usage:cpu_limit"], S["usage:cpu_used"]]);
    setData("c-usage-ram", [t, S["usage:ram_allocated_gib"], S["usage:ram_limit_gib"], S["usage:ram_used_gib"]]);
    $("panel-usage").hidden = false;
  }
}

/* Fault times for the chart markers: the scenario's faults and the page's crashes and pauses. */
function noteFaults(events) {
  for (const e of events) {
    if (e.event === "fault.injected" || e.event === "control.crash" || e.event === "control.node_paused") {
      const t = e.at_s != null ? e.at_s : e.t;
      if (!page.faultTimes.includes(t)) page.faultTimes.push(t);
    }
  }
}

/* ---------------- cluster header and KPIs ---------------- */

function renderCluster(c) {
  page.cluster = c;
  $("scenario").textContent = c.scenario || "scenario";
  const ph = $("phase");
  ph.textContent = c.phase;
  ph.className = "badge " + c.phase;
  $("t-emu").textContent = fmtNum(c.t_s, 1);
  $("t-total").textContent = fmtInt(c.duration_s);
  $("speed").textContent = fmtNum(c.speed, c.speed < 10 ? 1 : 0);
  showSpeed(c.speed);
  $("progress-bar").style.width = Math.min(100, (100 * c.t_s) / c.duration_s) + "%";
  $("cluster-sub").textContent = `${fmtInt(c.nodes_total)} nodes · ${c.heartbeat_mode} heartbeats every ${c.heartbeat_interval_s}s · ${c.policy}`;
  $("run-controls").hidden = !c.allow_control || c.phase === "finished";
  $("panel-control").hidden = !c.allow_control || c.phase === "finished";
  $("btn-pause").hidden = c.phase !== "running";
  $("btn-resume").hidden = c.phase !== "paused";
  const over = $("overload");
  if (c.lag && c.lag.overloaded) {
    over.hidden = false;
    over.textContent = `Overloaded: the emulator runs ${fmtNum(c.lag.p99_s, 2)} s behind real time (p99; ` +
      `threshold ${fmtNum(c.lag.threshold_s, 2)} s). These results are not valid: lower the speed or the cluster size.`;
  } else {
    over.hidden = true;
  }
  if (c.nodes_alive === undefined) return;
  $("k-alive").textContent = fmtInt(c.nodes_alive);
  $("k-unhealthy").textContent = fmtInt(c.nodes_unhealthy);
  $("k-lost").textContent = fmtInt(c.nodes_lost);
  $("k-injected").textContent = `${fmtInt(c.injected.crashed)} / ${fmtInt(c.injected.paused)}`;
  $("k-scenario").textContent = `${fmtInt(c.scenario_faults.crashed)} / ${fmtInt(c.scenario_faults.paused)}`;
  $("k-running").textContent = fmtInt(c.running_tasks);
  $("k-pending").textContent = fmtInt(c.pending_tasks);
  $("k-hb").textContent = fmtInt(c.heartbeats_sent);
  // Labels from the metrics registry. h1 / h2: the last interval's while the run goes on, the
  // whole run's (summary.json's) once it is over.
  for (const el of document.querySelectorAll("[data-metric]")) el.textContent = c.labels[el.dataset.metric];
  const ended = c.phase === "finished";
  const [h1, h2] = ended ? ["h1", "h2"] : ["h1_now", "h2_now"];
  $("k-h").textContent = `${fmtNum(c[h1], 3)} / ${fmtNum(c[h2], 3)}`;
  $("k-h-label").textContent = ended ? "h1 / h2, whole run" : "h1 / h2, last interval";
  $("k-h-label").title = `${c.labels[h1]} / ${c.labels[h2]}`;
  renderUsage(c.usage);
  const dec = c.scheduler_decision_us;
  $("k-decision").textContent = dec && dec.count ? `${fmtNum(dec.p50, 1)} / ${fmtNum(dec.p99, 1)}` : "–";
  const bar = (res, unit) => {
    const used = c.allocated[res], cap = c.capacity[res];
    $("m-" + (res === "cpu" ? "cpu" : "ram")).style.width = (cap > 0 ? (100 * used) / cap : 0) + "%";
    $("b-" + (res === "cpu" ? "cpu" : "ram")).textContent =
      `${fmtInt(used)} of ${fmtInt(cap)} ${unit} (${fmtPct(cap > 0 ? used / cap : 0)})`;
  };
  bar("cpu", "cores");
  bar("ram_gib", "GiB");
  if (c.results_dir) $("cluster-sub").textContent += ` · results in ${c.results_dir}/`;
}

/* Runs with usage models: OOMs, machine overflow and slack per Borg tier (ground truth). */
function renderUsage(u) {
  if (!u) return;
  $("panel-usage").hidden = false;
  $("usage-sub").textContent = `(${fmtInt(u.ooms)} OOM kills · machine overflow ${fmtPct(u.machine_overflow_fraction)} of node-time)`;
  const rows = Object.entries(u.tiers || {}).map(([tier, t]) =>
    `<tr><td>${tier}</td><td>${fmtPct(t.cpu_slack)}</td><td>${fmtPct(t.ram_slack)}</td>` +
    `<td>${fmtInt(t.ooms)}</td><td>${fmtNum(t.ooms_per_task_day, 3)}</td></tr>`);
  $("tiers").querySelector("tbody").innerHTML = rows.join("");
}

/* The selector shows the run's speed (an option is added for a speed not in the list), except
   while someone is choosing. */
function showSpeed(speed) {
  const sel = $("speed-select");
  if (document.activeElement === sel || speed == null) return;
  const value = String(+speed);
  if (![...sel.options].some((o) => o.value === value)) {
    const opt = new Option(`${value}×`, value);
    const after = [...sel.options].find((o) => +o.value > speed);
    sel.add(opt, after || null);
  }
  sel.value = value;
}

/* ---------------- events ---------------- */

const SKIP = new Set(["t", "event", "level", "seq"]);

function renderEvents(batch) {
  if (batch.events.length) page.eventsShown.push(...batch.events);
  if (page.eventsShown.length > 1000) page.eventsShown.splice(0, page.eventsShown.length - 1000);
  drawEvents();
  $("events-sub").textContent = `${fmtInt(batch.total)} so far`;
}

function drawEvents() {
  const f = $("events-filter").value.split(",").filter(Boolean);
  const list = page.eventsShown.filter((e) => !f.length || f.some((p) => e.event.startsWith(p)));
  const items = list.slice(-300).reverse().map((e) => {
    const kv = Object.entries(e).filter(([k]) => !SKIP.has(k))
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
    const cls = e.event.startsWith("control.") || e.event.startsWith("fault.") ? "control" : e.level;
    return `<li class="${esc(cls)}"><span class="t">${fmtNum(e.t, 1)}s</span><span class="e">${esc(e.event)}</span><span class="kv">${esc(kv)}</span></li>`;
  });
  $("events").innerHTML = items.join("") || "<li class='muted'>no events</li>";
}

/* ---------------- sortable tables ---------------- */

function sortRows(rows, { k, desc }) {
  return [...rows].sort((a, b) => {
    const x = a[k], y = b[k];
    if (x == null && y == null) return 0;
    if (x == null) return 1;
    if (y == null) return -1;
    const r = typeof x === "number" ? x - y : String(x).localeCompare(String(y), "en", { numeric: true });
    return desc ? -r : r;
  });
}

function markSorted(table, sort) {
  for (const th of table.querySelectorAll("th[data-k]")) {
    th.classList.toggle("asc", th.dataset.k === sort.k && !sort.desc);
    th.classList.toggle("desc", th.dataset.k === sort.k && sort.desc);
  }
}

function wireSort(tableId, sortObj, rerender) {
  $(tableId).querySelector("thead").addEventListener("click", (ev) => {
    const th = ev.target.closest("th[data-k]");
    if (!th) return;
    if (sortObj.k === th.dataset.k) sortObj.desc = !sortObj.desc;
    else { sortObj.k = th.dataset.k; sortObj.desc = false; }
    rerender();
  });
}

const share = (v) => `${fmtNum(v, 3)}<span class="share"><i style="width:${Math.min(100, 100 * (v || 0))}%"></i></span>`;

/* Why an operation's tasks wait (the API's pending_why lines): a tooltip, and a row under it
   that a click on "why?" opens (kept open across refreshes). */
const whyButton = (o) => (o.pending_why || []).length
  ? ` <button type="button" class="why" data-op="${o.id}" title="${esc(o.pending_why.join("\n"))}">why?</button>` : "";
const whyRow = (o) => page.opsOpen.has(o.id) && (o.pending_why || []).length
  ? `<tr class="why-row"><td colspan="10"><ul>${o.pending_why.map((l) => `<li>${esc(l)}</li>`).join("")}</ul></td></tr>` : "";

function renderOps() {
  const d = page.ops;
  if (!d) return;
  const ops = sortRows(d.operations, page.opsSort);
  $("ops").querySelector("tbody").innerHTML = ops.map((o) => `<tr>
    <td>${esc(o.name)}</td><td>${esc(o.pool)}</td><td><span class="st ${esc(o.state)}">${esc(o.state)}</span></td>
    <td class="n">${fmtInt(o.running)}</td><td class="n">${fmtInt(o.pending)}${whyButton(o)}</td>
    <td class="n">${fmtInt(o.completed)} / ${fmtInt(o.total)}</td>
    <td class="n">${share(o.dominant_share)}</td><td class="n">${share(o.fair_share)}</td>
    <td class="n">${fmtInt(o.refusals)}</td><td class="n">${fmtInt(o.preemptions)}</td></tr>${whyRow(o)}`).join("")
    || `<tr><td colspan="10" class="muted">no active operations</td></tr>`;
  const pools = sortRows(d.pools, page.poolsSort);
  $("pools").querySelector("tbody").innerHTML = pools.map((p) => `<tr>
    <td>${esc(p.name)}</td><td>${esc(p.parent || "")}</td><td class="n">${fmtNum(p.weight, 1)}</td>
    <td class="n">${fmtInt(p.operations)}</td><td class="n">${fmtInt(p.running)}</td><td class="n">${fmtInt(p.pending)}</td>
    <td class="n">${share(p.dominant_share)}</td><td class="n">${share(p.fair_share)}</td></tr>`).join("");
  markSorted($("ops"), page.opsSort);
  markSorted($("pools"), page.poolsSort);
  const extra = [d.refusals != null ? `${fmtInt(d.refusals)} refusals` : null,
    d.fallback_allocations != null ? `${fmtInt(d.fallback_allocations)} fallback allocations` : null,
    d.preemptions != null ? `${fmtInt(d.preemptions)} preemptions` : "preemption off"].filter(Boolean).join(" · ");
  $("ops-sub").textContent = `${d.operations.length} active${extra ? " · " + extra : ""}`;
}

/* ---------------- nodes (server-side search, sort, pages) ---------------- */

async function loadNodes() {
  if (page.nodesBusy) return;
  page.nodesBusy = true;
  try {
    const n = page.nodes;
    const qs = new URLSearchParams({ page: n.page, per_page: n.per_page, sort: n.sort, desc: n.desc ? "1" : "0", q: n.q, state: n.state });
    const res = await fetch("/api/nodes?" + qs);
    if (!res.ok) return;
    const d = await res.json();
    n.page = d.page;
    const ctl = page.cluster && page.cluster.allow_control && page.cluster.phase !== "finished";
    $("nodes").querySelector("tbody").innerHTML = d.rows.map((r) => {
      const st = r.injected || r.state;
      // A node crashed from the page and then removed by the RM says both.
      const label = r.injected && r.state === "lost" ? `${r.injected}, removed` : st;
      const act = ctl && !r.injected && r.state !== "lost"
        ? `<button data-node="${esc(r.address)}" data-action="crash" class="danger">crash</button> <button data-node="${esc(r.address)}" data-action="pause">pause</button>` : "";
      return `<tr><td class="n">${r.machine_id ?? "—"}</td><td>${esc(r.address)}</td>
        <td class="n">${fmtNum(r.cpu, 0)}</td><td class="n">${fmtNum(r.ram_gib, 0)}</td>
        <td class="n">${fmtNum(r.free_cpu, 1)}</td><td class="n">${fmtNum(r.free_ram_gib, 1)}</td>
        <td class="n">${fmtInt(r.containers)}</td>
        <td class="n">${r.last_heartbeat_age_s == null ? "—" : fmtNum(r.last_heartbeat_age_s, 1) + " s ago"}</td>
        <td><span class="st ${esc(st)}">${esc(label)}</span></td><td class="act">${act}</td></tr>`;
    }).join("") || `<tr><td colspan="10" class="muted">no matching nodes</td></tr>`;
    $("pg-info").textContent = `${d.page} / ${d.pages}`;
    $("nodes-sub").textContent = `${fmtInt(d.total)} matching`;
    markSorted($("nodes"), { k: d.sort, desc: d.desc });
  } finally {
    page.nodesBusy = false;
  }
}

/* ---------------- control ---------------- */

// The run's control token: control requests carry it (the server refuses them otherwise).
let controlToken = null;

async function control(path, body) {
  if (controlToken === null) {
    const t = await fetch("/api/control/token");
    controlToken = t.ok ? (await t.json()).token : "";
  }
  const res = await fetch("/api/control/" + path, {
    method: "POST", headers: { "Content-Type": "application/json", "X-Control-Token": controlToken },
    body: JSON.stringify(body),
  });
  const d = await res.json();
  $("ctl-msg").textContent = res.ok
    ? (d.nodes ? `${d.action}: ${d.nodes.length} node(s) ${d.nodes.slice(0, 5).join(", ")}${d.nodes.length > 5 ? "…" : ""}` : `run ${d.phase}`)
    : `error: ${d.error}`;
  loadNodes();
  return d;
}

function wireControls() {
  $("btn-pause").onclick = () => control("run", { action: "pause" });
  $("btn-resume").onclick = () => control("run", { action: "resume" });
  $("speed-select").onchange = (e) => { control("run", { action: "speed", speed: +e.target.value }); e.target.blur(); };
  const submitter = (form, body) => form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const action = (ev.submitter && ev.submitter.dataset.action) || "crash";
    control("nodes", { action, duration_s: +$("ctl-duration").value || 30, ...body() });
  });
  submitter($("f-fraction"), () => ({ fraction: (+$("ctl-fraction").value || 0) / 100 }));
  submitter($("f-node"), () => ({ nodes: [$("ctl-node").value.trim()] }));
  $("nodes").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-node]");
    if (b) control("nodes", { action: b.dataset.action, nodes: [b.dataset.node], duration_s: +$("ctl-duration").value || 30 });
  });
}

/* ---------------- wiring ---------------- */

function onTick(doc) {
  renderCluster(doc.cluster);
  noteFaults(doc.events.events);
  appendSeries(doc.timeseries);
  page.ops = doc.operations;
  renderOps();
  renderRing(doc.ring);
  renderEvents(doc.events);
  loadNodes();
  document.body.dataset.ticks = String(doc.tick);
}

function connect() {
  const es = new EventSource("/api/stream");
  es.addEventListener("tick", (ev) => {
    $("conn").className = "conn on";
    onTick(JSON.parse(ev.data));
  });
  es.onerror = () => {
    $("conn").className = "conn off";
    // The stream restarts from scratch after a reconnect: drop what we have so nothing doubles.
    page.series = {};
    page.derived = { sent: [], processed: [], updates: [], h1: [], h2: [] };
    page.eventsShown = [];
    page.faultTimes = [];
  };
}

function main() {
  // The CPU / RAM bars in the chart colours of CPU and RAM (one palette for page and report).
  document.documentElement.style.setProperty("--accent", PALETTE.metric.cpu_utilization);
  document.documentElement.style.setProperty("--ok", PALETTE.metric.ram_utilization);
  initCharts();
  wireSort("ops", page.opsSort, renderOps);
  $("ops").querySelector("tbody").addEventListener("click", (ev) => {
    const b = ev.target.closest("button.why");
    if (!b) return;
    const id = Number(b.dataset.op);
    if (page.opsOpen.has(id)) page.opsOpen.delete(id); else page.opsOpen.add(id);
    renderOps();
  });
  wireSort("pools", page.poolsSort, renderOps);
  $("nodes").querySelector("thead").addEventListener("click", (ev) => {
    const th = ev.target.closest("th[data-k]");
    if (!th) return;
    const n = page.nodes;
    if (n.sort === th.dataset.k) n.desc = !n.desc; else { n.sort = th.dataset.k; n.desc = false; }
    loadNodes();
  });
  let timer = null;
  $("nodes-q").addEventListener("input", (e) => {
    clearTimeout(timer);
    timer = setTimeout(() => { page.nodes.q = e.target.value; page.nodes.page = 1; loadNodes(); }, 200);
  });
  $("nodes-state").onchange = (e) => { page.nodes.state = e.target.value; page.nodes.page = 1; loadNodes(); };
  $("pg-prev").onclick = () => { page.nodes.page = Math.max(1, page.nodes.page - 1); loadNodes(); };
  $("pg-next").onclick = () => { page.nodes.page += 1; loadNodes(); };
  $("events-filter").onchange = drawEvents;
  wireControls();
  connect();
}

main();
