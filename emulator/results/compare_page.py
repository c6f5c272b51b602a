"""The files of a comparison, all inside one output directory (``--out``): compare.html (the same
metric groups, deltas and ratios as the terminal table), compare.csv, compare.json and the PNG
plots of the runs side by side. Nothing is written anywhere else."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from emulator.results.compare import (
    CompareError,
    Comparison,
    delta_headers,
    write_csv,
    write_json,
)
from emulator.results.metrics import fmt_delta, fmt_ratio, fmt_value

PAGE = "compare.html"
FILES = (PAGE, "compare.csv", "compare.json")

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#111827;background:#f9fafb}
header{padding:16px 24px;background:#1f2937;color:#f9fafb}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#d1d5db}main{padding:16px 24px;max-width:1400px}
table{border-collapse:collapse;background:#fff;margin:8px 0 20px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #e5e7eb;padding:4px 10px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}thead th{background:#f3f4f6}
tr.group td{background:#eef2ff;font-weight:600;text-align:left}
td.better{color:#15803d}td.worse{color:#b91c1c}td.ref{color:#6b7280}
.pngs img{max-width:100%;border:1px solid #e5e7eb;background:#fff;margin:6px 0}
"""


def default_out(names: list[str], root: Path = Path("runs")) -> Path:
    """Where a comparison goes when --out is not given: one clearly named directory under runs/."""
    stem = "-vs-".join(n.replace("/", "_") for n in names)
    if len(stem) > 80:
        stem = f"{names[0]}-vs-{len(names) - 1}-more"
    return root / f"compare-{stem}"


def check_out(out: Path, dirs: list[Path]) -> None:
    """``out`` must be a directory of its own: not a file, not one of the runs compared."""
    if out.suffix.lower() in (".html", ".htm"):
        raise CompareError(f"--out {out}: give a directory (it gets {', '.join(FILES)} and the plots)")
    if out.exists() and not out.is_dir():
        raise CompareError(f"--out {out}: exists and is not a directory")
    for d in dirs:
        if d.exists() and out.resolve() == d.resolve():
            raise CompareError(f"--out {out}: is one of the runs compared (its plots would be overwritten)")


def _table(c: Comparison) -> str:
    heads = ["metric", c.names[0]]
    for name, (dh, rh) in zip(c.names[1:], delta_headers(c.names), strict=True):
        heads += [name, dh, rh]
    heads += list(c.reference)
    two_refs = len(c.reference) == 2
    if two_refs:
        heads.append("reference Δ")
    body = []
    for label, group_rows in c.groups():
        body.append(f'<tr class="group"><td colspan="{len(heads)}">{html.escape(label)}</td></tr>')
        for row in group_rows:
            unit = row.metric.unit
            cells = [f'<td title="{html.escape(row.metric.key)}">{html.escape(row.metric.label)}</td>',
                     f"<td>{html.escape(fmt_value(row.values[0], unit))}</td>"]
            for i in range(1, len(c.names)):
                verdict = row.verdict(i)
                cls = f' class="{verdict}"' if verdict else ""
                cells += [f"<td>{html.escape(fmt_value(row.values[i], unit))}</td>",
                          f"<td{cls}>{html.escape(fmt_delta(row.deltas[i - 1], unit))}</td>",
                          f"<td{cls}>{html.escape(fmt_ratio(row.ratios[i - 1]))}</td>"]
            refs = c.reference_values(row)
            cells += [f'<td class="ref">{html.escape(fmt_value(v, unit)) if v is not None else ""}</td>'
                      for v in refs]
            if two_refs:
                a, b = refs
                d = fmt_delta(b - a, unit) if a is not None and b is not None else ""
                cells.append(f'<td class="ref">{html.escape(d)}</td>')
            body.append(f"<tr>{''.join(cells)}</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    return f'<table class="compare"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _operations(c: Comparison, summaries: list[dict[str, Any]]) -> str:
    by_run = [{o["name"]: o for o in s.get("operations", []) if isinstance(o, dict)} for s in summaries]
    names = list(dict.fromkeys(n for run in by_run for n in run))
    if not names:
        return "<p>no operations</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["operation", *c.names])
    body = []
    for name in names:
        cells = [f"<td>{html.escape(str(name))}</td>"]
        for run in by_run:
            o = run.get(name) or {}
            share, dev = o.get("dominant_share"), o.get("fairness_deviation")
            text = "" if share is None else f"{share:.4f}" + (f" ({dev:+.1%})" if dev is not None else "")
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render(c: Comparison, summaries: list[dict[str, Any]], images: list[str], note: str = "") -> str:
    title = "Comparison: " + " vs ".join(c.names)
    imgs = "".join(f'<a href="{html.escape(i)}"><img src="{html.escape(i)}" alt="{html.escape(i)}"></a>'
                   for i in images)
    plots = imgs or f"<p>no plots: {html.escape(note)}</p>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>
<header><h1>{html.escape(title)}</h1>
<p>Δ and ratio against the first run ({html.escape(c.names[0])}); green: better, red: worse (where a
metric has a better direction). Hover a metric for its key in summary.json.</p></header>
<main>
<section><h2>Metrics</h2>{_table(c)}</section>
<section><h2>Operations: mean dominant share (fairness deviation)</h2>{_operations(c, summaries)}</section>
<section class="pngs"><h2>Plots</h2>{plots}</section>
</main></body></html>
"""


def write_outputs(c: Comparison, dirs: list[Path], summaries: list[dict[str, Any]], out: Path) -> Path:
    """compare.html, .csv, .json and the plots in ``out``; returns the page's path."""
    from emulator.results.report import ReportError, load_run, write_plots

    check_out(out, dirs)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(c, out / "compare.csv")
    write_json(c, out / "compare.json")
    try:
        runs = [load_run(d) for d in dirs]
    except ReportError as err:  # no usable time series: the page still has every metric
        images, note = [], str(err)
    else:
        images, note = [p.name for p in write_plots(runs, out)], ""
    page = out / PAGE
    page.write_text(render(c, summaries, images, note), encoding="utf-8")
    return page
