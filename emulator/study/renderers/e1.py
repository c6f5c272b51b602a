"""E1's tables and figures beside the thesis, from the output of `emulator study
scenarios/studies/e1.toml` (docs/e1.json) or an earlier `emulator e1` results file (e1results.py).

Every figure is reported as mean ± sd over the seeds, beside the pooled-cluster bound of the same
run. Gap closed: (packing - no packing) / (no-packing bound - no packing) per resource, for the
same seed and preemption setting. User move: the largest |dominant share / no-packing dominant
share - 1| over the users (pools) of one run. The fairness bound is one-sided (issue 33): no user
may *lose* more than 10% of its no-packing dominant share (seed means); a user packing raises is
not held against it.
"""

from __future__ import annotations

import statistics
from typing import Any

from emulator.results.compare import REFERENCES
from emulator.scenario.loader import load_scenario
from emulator.study.renderers.e1results import NAMED, e1_results

# Table column labels (README headline).
LABELS = {"none": "no packing", "thesis": "thesis packing", "fit": "`fit` packing (ours)",
          "fit-fair": "`fit-fair` packing (ours)"}
PREEMPTION = (False, True)
# The fairness bound, one-sided: no user loses more than this share of its no-packing dominant share.
LOSS_BOUND = 0.10


def _present(data: dict[str, Any]) -> list[str]:
    """The policies a results file has runs of, in POLICIES order (older files lack `fit-fair`),
    then its variants."""
    have = {r["policy"] for r in data["runs"]}
    return [p for p in NAMED if p in have] + [v for v in data.get("variants", {}) if v in have]


class NoBaseline(ValueError):
    """A packing run without the no-packing run of its seed and preemption setting."""


def _derived(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per run: gap closed and largest user move against the no-packing run of the same seed and
    preemption setting."""
    base = {(r["preemption"], r["seed"]): r for r in data["runs"] if r["policy"] == "none"}
    out = []
    for r in data["runs"]:
        b = base.get((r["preemption"], r["seed"]))
        if b is None:
            raise NoBaseline(f"no no-packing run for preemption {'on' if r['preemption'] else 'off'}, "
                             f"seed {r['seed']}: gains are measured against it (run --policies none "
                             "too, or --merge into a file that has it)")
        d = dict(r)
        for res, key, bound in (("cpu", "cpu_utilization", "fair_cpu_bound"),
                                ("ram", "ram_utilization", "fair_ram_bound")):
            gap = b[bound] - b[key]
            d[f"gain_{res}"] = r[key] - b[key]
            d[f"gap_closed_{res}"] = (r[key] - b[key]) / gap if gap > 0 else None
        moves = [abs(ds / b["pools"][n] - 1) for n, ds in r["pools"].items()
                 if ds is not None and b["pools"].get(n)]
        d["user_move_max"] = max(moves) if moves else None
        out.append(d)
    return out


def _ms(values: list[float | None], scale: float = 100.0, digits: int = 1) -> str:
    xs = [v * scale for v in values if v is not None]
    if not xs:
        return "–"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):.{digits}f} ± {sd:.{digits}f}"


ROWS: tuple[tuple[str, str, float, int], ...] = (
    ("cpu_utilization", "CPU %", 100.0, 2),
    ("ram_utilization", "RAM %", 100.0, 2),
    ("cpu_utilization_excl_preempted", "CPU excl. preempted %", 100.0, 2),
    ("preempted_pct", "preempted (lost CPU) %", 100.0, 2),
    ("fair_cpu_bound", "pooled bound CPU %", 100.0, 2),
    ("fair_ram_bound", "pooled bound RAM %", 100.0, 2),
    ("gain_cpu", "CPU gain pp", 100.0, 2),
    ("gain_ram", "RAM gain pp", 100.0, 2),
    ("gap_closed_cpu", "CPU gap closed %", 100.0, 0),
    ("gap_closed_ram", "RAM gap closed %", 100.0, 0),
    ("user_move_max", "max user dominant-share move %", 100.0, 1),
    ("preemptions", "preemptions", 1.0, 0),
    ("fallback_allocations", "all-refused fallbacks", 1.0, 0),
)


def _thesis(key: str) -> str:
    ref = REFERENCES["thesis-e1"]
    if key.startswith("gain_"):
        used = "cpu_utilization" if key == "gain_cpu" else "ram_utilization"
        return f"{100 * (ref['thesis with packing'][used] - ref['thesis without packing'][used]):+.1f}"
    if key == "preempted_pct":
        lost = thesis_lost_work()
        return f"{lost['without packing']:.1f} → {lost['with packing']:.1f}"
    a, b = ref["thesis without packing"].get(key), ref["thesis with packing"].get(key)
    if a is None or b is None:
        return ""
    return f"{100 * a:.1f} → {100 * b:.1f} ({100 * (b - a):+.1f} pp)"


def thesis_lost_work() -> dict[str, float]:
    """The thesis's lost work (Table 4.3), pp of CPU: utilisation minus utilisation excluding
    preempted tasks, without and with packing (1.6 and 2.8)."""
    ref = REFERENCES["thesis-e1"]
    return {k: round(100 * (ref[f"thesis {k}"]["cpu_utilization"]
                            - ref[f"thesis {k}"]["cpu_utilization_excl_preempted"]), 2)
            for k in ("without packing", "with packing")}


def largest_loss(runs: list[dict[str, Any]], policy: str, pre: bool) -> float | None:
    """The fairness bound's measure (one-sided): the largest fall of a user's dominant share below
    its no-packing one, seed means against seed means (0 when nobody loses); None without runs."""
    signed = _changes(_pools(runs, policy, pre), _pools(runs, "none", pre))
    return max(0.0, -min(signed)) if signed else None


def meets_loss_bound(loss: float | None, bound: float = LOSS_BOUND) -> bool | None:
    """Whether no user loses more than ``bound`` of its no-packing dominant share."""
    return None if loss is None else loss <= bound


def _loss_cell(loss: float | None) -> str:
    ok = meets_loss_bound(loss)
    return "–" if loss is None else f"{100 * loss:.1f} ({'within' if ok else 'over'} {100 * LOSS_BOUND:.0f}%)"


def _pools(runs: list[dict[str, Any]], policy: str, pre: bool) -> list[dict[str, float]]:
    return [r["pools"] for r in runs if r["policy"] == policy and r["preemption"] == pre]


def _changes(mine: list[dict[str, float]], base: list[dict[str, float]], net: bool = False) -> list[float]:
    """Per user, signed: mean dominant share in ``mine`` / mean in ``base`` - 1, means over the
    runs (seed noise averages out), for the users every base run has. ``net``: each user's ratio
    divided by the ratio of the summed shares, i.e. net of the rise every user shares (a policy
    that raises every share by 4% moves nobody)."""
    if not mine or not base:
        return []
    names = [n for n in base[0] if all(b.get(n) for b in base)]
    m = {n: statistics.mean(x[n] for x in mine) for n in names}
    b = {n: statistics.mean(x[n] for x in base) for n in names}
    rise = sum(m.values()) / sum(b.values()) if net else 1.0
    return [m[n] / b[n] / rise - 1 for n in names]


def _moves(mine: list[dict[str, float]], base: list[dict[str, float]], net: bool = False) -> list[float]:
    """Per user, sorted: how far the user moved either way (see ``_changes``)."""
    return sorted(abs(c) for c in _changes(mine, base, net))


def _mean_move(runs: list[dict[str, Any]], policy: str, pre: bool) -> float | None:
    """The largest user move of the seed means against no packing."""
    moves = _moves(_pools(runs, policy, pre), _pools(runs, "none", pre))
    return moves[-1] if moves else None


def _noise(runs: list[dict[str, Any]], pre: bool) -> float | None:
    """The same move between two no-packing runs of different seeds: the metric's noise floor."""
    base = _pools(runs, "none", pre)
    moves = [abs(a[n] / b[n] - 1) for a in base for b in base if a is not b for n in a if b.get(n)]
    return max(moves) if moves else None


def markdown_table(data: dict[str, Any]) -> str:
    data = e1_results(data)
    runs = _derived(data)
    lines = []
    for pre in PREEMPTION:
        cols = _present(data)
        n = len(data["seeds"])
        lines.append(f"**Preemption {'on' if pre else 'off'}** ({n} seeds {data['seeds']}, mean ± sd)")
        lines.append("")
        lines.append("| metric | " + " | ".join(f"{c} packing" if c != "none" else "no packing" for c in cols)
                     + " | thesis without → with (Table 4.3, preemption on) |")
        lines.append("|---|" + "---|" * (len(cols) + 1))
        for key, label, scale, digits in ROWS:
            cells = []
            for c in cols:
                vals = [r.get(key) for r in runs if r["policy"] == c and r["preemption"] == pre]
                cells.append("–" if c == "none" and key.startswith(("gain", "gap", "user")) else
                             _ms(vals, scale, digits))
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {_thesis(key) if pre else ''} |")
        means = [_mean_move(data["runs"], c, pre) for c in cols[1:]]
        lines.append("| max user move of the seed means % | – | "
                     + " | ".join("–" if m is None else f"{100 * m:.1f}" for m in means) + " | |")
        losses = [largest_loss(data["runs"], c, pre) for c in cols[1:]]
        lines.append(f"| largest user loss of the seed means % (bound: {100 * LOSS_BOUND:.0f}%) | – | "
                     + " | ".join(_loss_cell(x) for x in losses) + " | |")
        noise = _noise(data["runs"], pre)
        lines.append("| no packing, seed vs seed: max user move % (noise) | "
                     + ("–" if noise is None else f"{100 * noise:.1f}") + " |" + " |" * len(cols))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def headline_table(data: dict[str, Any]) -> str:
    """The README's short E1 table: preemption on (as the thesis ran), mean ± sd over the seeds."""
    data = e1_results(data)
    runs = [r for r in _derived(data) if r["preemption"]]
    ref = REFERENCES["thesis-e1"]
    rows = [("CPU %", "cpu_utilization", 2), ("RAM %", "ram_utilization", 2),
            ("pooled bound CPU / RAM %", "", 1), ("gain over no packing CPU / RAM pp", "gain", 2),
            ("gap to the bound closed CPU / RAM %", "gap_closed", 0),
            ("lost work (CPU of preempted tasks) pp", "preempted_pct", 2),
            (f"largest user loss % (bound: {100 * LOSS_BOUND:.0f}%)", "loss", 1)]
    seeds = ", ".join(map(str, data["seeds"]))
    cols = _present(data)
    head = f"| preemption on, seeds {seeds} | " + " | ".join(LABELS.get(c, c) for c in cols) \
        + " | the thesis, without → with |"
    lines = [head, "|---|" + "---|" * (len(cols) + 1)]
    for label, key, digits in rows:
        cells = []
        for policy in cols:
            mine = [r for r in runs if r["policy"] == policy]
            if key in ("cpu_utilization", "ram_utilization", "preempted_pct"):
                cells.append(_ms([r[key] for r in mine], 100.0, digits))
            elif key == "loss":
                loss = largest_loss(data["runs"], policy, True)
                cells.append("–" if policy == "none" else _loss_cell(loss))
            elif key == "":
                cells.append(" / ".join(_ms([r[b] for r in mine], 100.0, digits)
                                        for b in ("fair_cpu_bound", "fair_ram_bound")))
            elif policy == "none":
                cells.append("–")
            else:
                cells.append(" / ".join(_ms([r[f"{key}_{res}"] for r in mine], 100.0, digits)
                                        for res in ("cpu", "ram")))
        without, with_ = ref["thesis without packing"], ref["thesis with packing"]
        pair = {k: f"{100 * without[k]:.1f} → {100 * with_[k]:.1f}"
                for k in ("cpu_utilization", "ram_utilization")}
        thesis = {**pair, "gain": _thesis("gain_cpu") + " / " + _thesis("gain_ram"),
                  "preempted_pct": _thesis("preempted_pct")}.get(key, "")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {thesis} |")
    return "\n".join(lines) + "\n"


def fairness_table(data: dict[str, Any]) -> str:
    """How far packing moves users from their no-packing dominant share, on the seed means, beside
    the same measure between two halves of the no-packing seeds (what noise alone gives)."""
    data = e1_results(data)
    runs, seeds = data["runs"], list(data["seeds"])
    half = set(seeds[: len(seeds) // 2])
    lines = ["| preemption | policy | users | max move | users moved > 10% | median move | "
             "noise: max move between two halves of the no-packing seeds | largest loss (the bound: "
             "no user loses > 10%) |", "|---|---|---|---|---|---|---|---|"]
    for pre in PREEMPTION:
        plain = [r for r in runs if r["policy"] == "none" and r["preemption"] == pre]
        halves = _moves([r["pools"] for r in plain if r["seed"] in half],
                        [r["pools"] for r in plain if r["seed"] not in half])
        noise = f"{100 * halves[-1]:.1f}%" if halves else "–"
        for policy in [p for p in _present(data) if p != "none"]:
            moves = _moves(_pools(runs, policy, pre), _pools(runs, "none", pre))
            if not moves:
                continue
            lines.append(
                f"| {'on' if pre else 'off'} | {policy} | {len(moves)} | {100 * moves[-1]:.1f}% | "
                f"{sum(v > 0.10 for v in moves)} | {100 * statistics.median(moves):.1f}% | {noise} | "
                f"{_loss_cell(largest_loss(runs, policy, pre))} |")
    return "\n".join(lines) + "\n"


def variants_table(data: dict[str, Any]) -> str:
    """One row per packing policy and preemption setting: gains, gap closed and how far users move
    (on the seed means; raw, net of the rise all users share, and the largest fall: the one-sided
    reading, "no user loses more than 10%"), against the thesis's gains."""
    data = e1_results(data)
    runs, derived = data["runs"], _derived(data)
    lines = ["| preemption | policy | CPU / RAM gain pp | CPU / RAM gap closed % | max user move % "
             "| users moved > 10% | max move net of the common rise % | users > 10% net "
             "| largest user loss % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for pre in PREEMPTION:
        for policy in [p for p in _present(data) if p != "none"]:
            mine = [r for r in derived if r["policy"] == policy and r["preemption"] == pre]
            if not mine:
                continue
            signed = _changes(_pools(runs, policy, pre), _pools(runs, "none", pre))
            if not signed:
                continue
            raw = sorted(map(abs, signed))
            net = _moves(_pools(runs, policy, pre), _pools(runs, "none", pre), net=True)
            loss = max(0.0, -min(signed))
            gains = " / ".join(_ms([r[f"gain_{x}"] for r in mine], 100.0, 2) for x in ("cpu", "ram"))
            gaps = " / ".join(_ms([r[f"gap_closed_{x}"] for r in mine], 100.0, 0) for x in ("cpu", "ram"))
            lines.append(
                f"| {'on' if pre else 'off'} | {policy} | {gains} | {gaps} | {100 * raw[-1]:.1f} | "
                f"{sum(v > 0.10 for v in raw)} | {100 * net[-1]:.1f} | {sum(v > 0.10 for v in net)} | "
                f"{100 * loss:.1f} |")
    thesis = f"{_thesis('gain_cpu')} / {_thesis('gain_ram')}"
    lines.append(f"| on | the thesis (Table 4.3) | {thesis} | | | | | | |")
    return "\n".join(lines) + "\n"


def fair_share_table(data: dict[str, Any]) -> str:
    """How far each policy leaves users from DRF's own fair share (progressive filling on the pooled
    cluster, with each user's demand, in the same run): per user the seed mean of the dominant share
    over the seed mean of the fair share, minus 1. Unlike the move against no packing, this needs no
    second run, and no packing is measured the same way. Policies whose runs lack fair shares (older
    results files) are left out."""
    data = e1_results(data)
    lines = ["| preemption | policy | max distance from fair share % | users > 10% above | "
             "users > 10% below | mean distance % |", "|---|---|---|---|---|---|"]
    for pre in PREEMPTION:
        for policy in _present(data):
            mine = [r for r in data["runs"] if r["policy"] == policy and r["preemption"] == pre]
            if not mine or not all(r.get("fair") for r in mine):
                continue
            names = [n for n in mine[0]["fair"] if all(r["fair"].get(n) for r in mine)]
            dev = [statistics.mean(r["pools"][n] for r in mine)
                   / statistics.mean(r["fair"][n] for r in mine) - 1 for n in names]
            if not dev:
                continue
            lines.append(
                f"| {'on' if pre else 'off'} | {policy} | {100 * max(map(abs, dev)):.1f} | "
                f"{sum(d > 0.10 for d in dev)} | {sum(d < -0.10 for d in dev)} | "
                f"{100 * statistics.mean(map(abs, dev)):.1f} |")
    return "\n".join(lines) + "\n"


def dominant_resources(scenario: str) -> dict[str, str]:
    """Per pool of an E1 scenario with fixed node and task sizes: "ram" when its operations ask more
    GiB per core than the cluster holds (RAM is its dominant resource), else "cpu"."""
    sc = load_scenario(scenario)

    def fixed(value: object) -> float:
        if not isinstance(value, int | float):
            raise ValueError(f"{scenario}: dominant resources need fixed node and task sizes")
        return float(value)

    cores = sum(g.count * fixed(g.cpu) for g in sc.cluster.nodes)
    per_core = sum(g.count * fixed(g.ram_gib) for g in sc.cluster.nodes) / cores
    return {o.pool: "ram" if fixed(o.ram_gib) / fixed(o.cpu) > per_core else "cpu"
            for o in sc.workload.operations}


def _jain(shares: dict[str, float]) -> float:
    x = list(shares.values())
    return sum(x) ** 2 / (len(x) * sum(v * v for v in x))


def by_resource_table(data: dict[str, Any]) -> str:
    """Where packing's gain goes: per policy, the rise of CPU and RAM use and the mean move of the
    users whose dominant resource is RAM and of those whose is CPU (seed means, against no
    packing); and Jain's index of the users' dominant shares (per run, mean over seeds)."""
    data = e1_results(data)
    kind = dominant_resources(data["scenario"])
    runs = data["runs"]
    lines = ["| preemption | policy | CPU use rise % | RAM use rise % | mean move, RAM-dominant users % "
             "| mean move, CPU-dominant users % | max user move % | Jain's index of dominant shares |",
             "|---|---|---|---|---|---|---|---|"]
    for pre in PREEMPTION:
        base = [r for r in runs if r["policy"] == "none" and r["preemption"] == pre]
        if not base:
            continue
        b = {n: statistics.mean(r["pools"][n] for r in base) for n in base[0]["pools"]}
        b_cpu = statistics.mean(r["cpu_utilization"] for r in base)
        b_ram = statistics.mean(r["ram_utilization"] for r in base)
        for policy in _present(data):
            mine = [r for r in runs if r["policy"] == policy and r["preemption"] == pre]
            if not mine:
                continue
            jain = statistics.mean(_jain(r["pools"]) for r in mine)
            if policy == "none":
                lines.append(f"| {'on' if pre else 'off'} | none | | | | | | {jain:.3f} |")
                continue
            m = {n: statistics.mean(r["pools"][n] for r in mine) for n in b}
            move = {n: m[n] / b[n] - 1 for n in b if b[n]}
            group = {k: [v for n, v in move.items() if kind.get(n) == k] for k in ("ram", "cpu")}
            cpu = statistics.mean(r["cpu_utilization"] for r in mine) / b_cpu - 1
            ram = statistics.mean(r["ram_utilization"] for r in mine) / b_ram - 1
            lines.append(
                f"| {'on' if pre else 'off'} | {policy} | {100 * cpu:+.1f} | {100 * ram:+.1f} | "
                f"{100 * statistics.mean(group['ram']):+.1f} | {100 * statistics.mean(group['cpu']):+.1f} | "
                f"{100 * max(abs(v) for v in move.values()):.1f} | {jain:.3f} |")
    return "\n".join(lines) + "\n"
