/* Charts of a run report. report.html inlines this file with uPlot, PALETTE (palette.js),
   HBCharts (charts.js), REPORT_DATA (the runs' series) and REPORT_CHARTS (which charts to draw,
   with their series and colours: emulator/results/chartspec.py). */
"use strict";
(function () {
  const runs = REPORT_DATA;
  const host = document.getElementById("charts");
  const warmup = Math.max(0, ...runs.map((r) => r.warmup_s || 0));
  const faults = [...new Set(runs.flatMap((r) => r.faults || []))];
  const RANGE = {
    pct: () => [0, 100],
    ratio: (u, min, max) => [0, Math.max(1.05, max ?? 1.05)],
    share: HBCharts.fromZero(0.05),
    count: HBCharts.fromZero(1),
  };
  const fmt = (v) => (v == null ? "—" : (+v).toFixed(Math.abs(v) < 10 ? 3 : 1));
  for (const chart of REPORT_CHARTS) {
    const scale = chart.y === "pct" ? 100 : 1;
    const tables = runs.map((run) => [run.series.t_s]);
    const series = [{ label: "t (s)" }];
    for (const s of chart.series) {
      const values = runs[s.run].series[s.key];
      tables[s.run].push(scale === 1 ? values : values.map((v) => (v == null ? null : v * scale)));
      series.push({ label: s.label, stroke: s.color, width: s.width, dash: s.dash || undefined,
        spanGaps: true, value: (u, v) => fmt(v) });
    }
    // Runs with no series on this chart add no columns; the rest are joined on time.
    const used = tables.filter((t) => t.length > 1);
    const data = used.length > 1 ? uPlot.join(used) : used[0];
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.chart = chart.id;
    const h = document.createElement("h3");
    h.textContent = chart.title;
    box.appendChild(h);
    host.appendChild(box);
    const width = Math.max(320, Math.min(host.clientWidth, 1100));
    new uPlot({
      width, height: 260, series, scales: { x: { time: false }, y: { range: RANGE[chart.y] } },
      axes: [{ label: "emulated time (s)" }, chart.y === "count" ? { incrs: HBCharts.INT_INCRS } : {}],
      legend: { live: true },
      plugins: [HBCharts.marksPlugin(() => warmup, () => faults)],
    }, data, box);
  }
})();
