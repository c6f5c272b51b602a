/* Chart helpers shared by the live page (app.js) and report.html (report.js): the warm-up band
   and fault markers, y ranges that start at zero, line styles that keep overlapping series
   visible, and the per-pool / per-entry share series. Colours come from PALETTE (palette.js). */
"use strict";

const HBCharts = (() => {
  /* A uPlot plugin: shade [0, warmup()] and draw a vertical line at each of faults() (emulated s). */
  function marksPlugin(warmup, faults) {
    return {
      hooks: {
        drawAxes: [(u) => {
          const w = warmup();
          if (!(w > 0)) return;
          const { left, top, width, height } = u.bbox;
          const x0 = Math.max(left, u.valToPos(u.scales.x.min, "x", true));
          const x1 = Math.min(left + width, u.valToPos(w, "x", true));
          if (x1 <= x0) return;
          u.ctx.save();
          u.ctx.fillStyle = PALETTE.warmup;
          u.ctx.fillRect(x0, top, x1 - x0, height);
          u.ctx.restore();
        }],
        draw: [(u) => {
          const { left, top, width, height } = u.bbox;
          u.ctx.save();
          u.ctx.strokeStyle = PALETTE.fault;
          u.ctx.lineWidth = 1.5 * (window.devicePixelRatio || 1);
          u.ctx.setLineDash([5, 4]);
          for (const t of faults()) {
            const x = u.valToPos(t, "x", true);
            if (x < left || x > left + width) continue;
            u.ctx.beginPath(); u.ctx.moveTo(x, top); u.ctx.lineTo(x, top + height); u.ctx.stroke();
          }
          u.ctx.restore();
        }],
      },
    };
  }

  /* y from zero (counts and shares are never negative), at least up to `floor`. */
  const fromZero = (floor = 1) => (u, min, max) => [0, max == null || max <= 0 ? floor : max * 1.08];

  /* The k-th of several series on one chart: the first drawn widest and solid, later ones
     thinner and dashed, so a series lying on another still shows. */
  function layered(k) {
    return k === 0 ? { width: 2.6 } : { width: 1.5, dash: [7, 3 + 2 * k] };
  }

  /* Per-pool / per-entry columns "kind:name:metric" of a timeseries header, by kind. */
  function shareNames(columns, kind) {
    const names = [];
    for (const c of columns) {
      const parts = c.split(":");
      if (parts.length >= 3 && parts[0] === kind && parts[parts.length - 1] === "dominant_share") {
        names.push(parts.slice(1, -1).join(":"));
      }
    }
    return names;
  }

  /* Tick steps for counts: whole numbers only (no "0.5 nodes removed"). */
  const INT_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2.5e3, 5e3, 1e4, 2e4, 2.5e4, 5e4,
    1e5, 2e5, 2.5e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9];

  const hasData = (cols) => cols.some((a) => a && a.some((v) => v != null && v !== 0));

  return { marksPlugin, fromZero, layered, shareNames, hasData, INT_INCRS };
})();
