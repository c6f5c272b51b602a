"""The status page in real headless Chromium (Debian's package, driven by Playwright).

Set HBEMU_SCREENSHOTS=DIR to also save screenshots of the page (how docs/screenshots/ is made).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from emulator.scenario.loader import load_scenario
from tests.webrun import served, small_scenario

CHROMIUM = os.environ.get("HBEMU_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Playwright adds --headless and a fresh temporary --user-data-dir itself.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not Path(CHROMIUM).exists():
    # CI installs it (.ci/run); locally, say how.
    if os.environ.get("CI"):
        raise RuntimeError(f"no Chromium at {CHROMIUM}: apt-get install chromium")
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

from playwright.async_api import Page, async_playwright  # noqa: E402


async def text(page: Page, selector: str) -> str:
    return (await page.locator(selector).text_content() or "").strip()


async def number(page: Page, selector: str) -> float:
    return float((await text(page, selector)).replace(",", "").split()[0])


async def shot(page: Page, name: str) -> None:
    out = os.environ.get("HBEMU_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        await asyncio.sleep(0.6)  # let debounced searches and the next tick land
        await page.evaluate("window.scrollTo(0, 0)")
        await page.screenshot(path=str(Path(out) / name), full_page=True)


@pytest.mark.asyncio
async def test_page_live_in_chromium(tmp_path: Path) -> None:
    nodes = int(os.environ.get("HBEMU_SCREENSHOT_NODES", "40"))
    # A crashed node stays "crashed" on the ring until the RM's expiry: 20 s emulated is 2 s of
    # wall time at speed 10, four pushes. With 5 s the state lasted 0.4-0.6 s against a push
    # every 0.5 s, and a fresh-clone run once missed it.
    scenario = small_scenario(nodes=nodes, expiry_s=20.0, speed=10.0, warmup_s=5.0)
    async with served(scenario, allow_control=True, push_interval_s=0.5) as srv, async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, args=FLAGS, headless=True,
            timeout=30_000,
        )
        try:
            page = await browser.new_page(viewport={"width": 1440, "height": 1000})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            await page.goto(srv.url)
            await page.wait_for_function("Number(document.body.dataset.ticks || 0) >= 2", timeout=15_000)
            await page.wait_for_function(
                f"document.getElementById('k-alive').textContent === '{nodes}'", timeout=15_000)

            # Charts show data: uPlot drew into each chart and holds points.
            await page.wait_for_function("(page.series.t_s || []).length >= 3", timeout=15_000)
            for chart in ("c-util", "c-hb", "c-eff", "c-rm"):
                assert await page.locator(f"#{chart} canvas").count() == 1
            points = await page.evaluate("page.charts['c-util'].data[1].filter(v => v > 0).length")
            assert points >= 3
            # The stream sends the last point again once its m_i and s_i settle: replaced, not
            # repeated, and every interval's m_i/n_i and s_i/a_i at most 1.
            t_s, h1_i, h2_i = await page.evaluate("[page.series.t_s, page.derived.h1, page.derived.h2]")
            assert t_s == sorted(set(t_s)) and len(h1_i) == len(t_s) == len(h2_i)
            assert all(v is None or 0 <= v <= 1 for v in (*h1_i, *h2_i))
            # Running tasks and the per-pool / per-entry share charts, one series pair per pool.
            assert not await page.locator("#c-tasks").is_hidden()
            for chart in ("c-pool-share", "c-pool-running", "c-op-share"):
                assert await page.locator(f"#{chart} canvas").count() == 1
                assert not await page.locator(f"#{chart}").is_hidden()
            labels = await page.evaluate("page.charts['c-pool-share'].series.slice(1).map(s => s.label)")
            assert labels == ["prod dominant", "prod fair", "batch dominant", "batch fair"]
            shares = await page.evaluate("page.charts['c-pool-share'].data[1].filter(v => v > 0).length")
            assert shares >= 3
            running = await page.evaluate("page.charts['c-pool-running'].data[2].filter(v => v > 0).length")
            assert running >= 3
            # Preemption is off and DRF refuses nothing here: the scheduler chart has nothing to say.
            assert await page.locator("#c-sched").is_hidden()
            assert await page.evaluate("page.cluster.warmup_s") == 5.0

            # The speed selector shows the run's speed, also one set elsewhere (not in its list).
            assert await page.input_value("#speed-select") == "10"
            await page.select_option("#speed-select", "20")
            await page.wait_for_function("$('speed').textContent === '20'", timeout=10_000)
            assert await page.input_value("#speed-select") == "20"
            # As a script on the page would: the token first (same origin), then a JSON POST.
            await page.evaluate("""fetch('/api/control/token').then(r => r.json()).then(t =>
                fetch('/api/control/run', {method: 'POST', body: JSON.stringify({action: 'speed', speed: 12}),
                    headers: {'Content-Type': 'application/json', 'X-Control-Token': t.token}}))""")
            await page.wait_for_function("$('speed-select').value === '12'", timeout=10_000)
            await page.select_option("#speed-select", "10")
            await page.wait_for_function("$('speed').textContent === '10'", timeout=10_000)

            # Numbers change over time without a reload.
            t1 = await number(page, "#t-emu")
            hb1 = await number(page, "#k-hb")
            await page.wait_for_function(f"parseFloat($('t-emu').textContent) > {t1 + 3}", timeout=15_000)
            await page.wait_for_function(
                f"Number($('k-hb').textContent.replace(/,/g, '')) > {hb1}", timeout=15_000)
            assert await text(page, "#phase") == "running"
            # What each scheduling event costs in wall µs: "p50 / p99", both positive.
            await page.wait_for_function("/^[0-9.]+ \\/ [0-9.]+$/.test($('k-decision').textContent)",
                                         timeout=10_000)
            p50, p99 = (float(v) for v in (await text(page, "#k-decision")).split(" / "))
            assert 0 < p50 <= p99

            # Tables: sortable operations, searchable nodes.
            assert await page.locator("#ops tbody tr").count() >= 2
            await page.click("#ops th[data-k='name']")
            assert await page.get_attribute("#ops th[data-k='name']", "class") == "asc"
            names = await page.locator("#ops tbody tr td:first-child").all_text_contents()
            assert names == sorted(names)
            await page.fill("#nodes-q", "n-0-00007")
            await page.wait_for_function("document.querySelectorAll('#nodes tbody tr').length === 1",
                                         timeout=10_000)
            assert "n-0-00007" in await text(page, "#nodes tbody tr")
            await shot(page, "status-page.png")

            # Crash that node from the page: it shows in the ring and the events, then is removed.
            await page.fill("#ctl-node", "n-0-00007")
            await page.click("#f-node button[data-action='crash']")
            ring_counts = "JSON.parse($('ring').dataset.counts || '{}')"
            await page.wait_for_function(f"{ring_counts}.crashed === 1", timeout=10_000)
            events_have = ("[...document.querySelectorAll('#events li')]"
                           ".some(li => li.textContent.includes({!r}))")
            await page.wait_for_function(events_have.format("control.crash"), timeout=10_000)
            await page.wait_for_function(f"{ring_counts}.lost === 1", timeout=20_000)
            lost = page.locator("#events li", has_text="node.lost")
            assert "n-0-00007" in (await lost.first.text_content() or "")
            assert await text(page, "#k-lost") == "1"
            # The page's crash is counted as the page's; the scenario crashed nothing.
            assert await text(page, "#k-injected") == "1 / 0"
            assert await text(page, "#k-scenario") == "0 / 0"
            # ... and marked on the charts at its time.
            assert len(await page.evaluate("page.faultTimes")) == 1
            assert "node.lost" in await text(page, "#ring-changes")
            # The node table says the page crashed it and the RM has removed it since.
            await page.wait_for_function(
                "document.querySelector('#nodes tbody tr .st').textContent === 'crashed, removed'",
                timeout=10_000)
            await page.fill("#nodes-q", "")
            await shot(page, "status-page-crash.png")

            # Pause and resume the whole run from the header.
            await page.click("#btn-pause")
            await page.wait_for_function("document.getElementById('phase').textContent === 'paused'",
                                         timeout=10_000)
            frozen = await number(page, "#t-emu")
            await asyncio.sleep(1.2)
            assert await number(page, "#t-emu") == frozen
            await page.click("#btn-resume")
            await page.wait_for_function(
                f"parseFloat(document.getElementById('t-emu').textContent) > {frozen}", timeout=10_000)

            assert problems == [], problems
            await _ring_shot(page, tmp_path)
        finally:
            await browser.close()


async def _ring_shot(page: Page, _: Any) -> None:
    if os.environ.get("HBEMU_SCREENSHOTS"):
        await page.locator("#panel-ring").screenshot(
            path=str(Path(os.environ["HBEMU_SCREENSHOTS"]) / "ring-panel.png"))


@pytest.mark.asyncio
async def test_scenario_faults_apart_and_ring_in_arcs_at_many_nodes() -> None:
    """600 nodes, the scenario crashes 5% of them: counted as the scenario's (not "by you"), and
    the ring is drawn as 360 aggregate arcs with the crashed members as a fraction of the ring."""
    scenario = small_scenario(nodes=600, expiry_s=9.0, speed=3.0, interval_s=3.0,
                              faults=[{"kind": "crash", "at_s": 6.0, "fraction": 0.05}])
    async with served(scenario, push_interval_s=0.5) as srv, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True,
                                           timeout=30_000)
        try:
            page = await browser.new_page(viewport={"width": 1440, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            await page.goto(srv.url)
            await page.wait_for_function("$('k-scenario').textContent === '30 / 0'", timeout=40_000)
            assert await text(page, "#k-injected") == "0 / 0"
            ring = "JSON.parse($('ring').dataset.counts || '{}')"
            await page.wait_for_function(f"{ring}.crashed + {ring}.suspected + {ring}.lost === 30",
                                         timeout=20_000)
            assert await page.evaluate("$('ring').dataset.arcs") == "360"
            counts = await page.evaluate(ring)
            assert counts["alive"] + counts["crashed"] + counts["suspected"] + counts["lost"] == 600
            # The fault is marked on the charts when it was injected: at 6 s, late by at most the
            # run's lag allowance (10% of the 3 s interval) in paced real time.
            # Marked when applied: in real time that may be a few hundred emulated ms after 6 s.
            assert await page.evaluate("page.faultTimes") == [pytest.approx(6.0, abs=1.0)]
            if os.environ.get("HBEMU_SCREENSHOTS"):
                await page.locator("#panel-ring").screenshot(
                    path=str(Path(os.environ["HBEMU_SCREENSHOTS"]) / "ring-600-nodes.png"))
            assert problems == [], problems
        finally:
            await browser.close()


@pytest.mark.asyncio
async def test_usage_beside_allocation_and_tiers_on_the_page() -> None:
    """A run with usage models: the page charts real usage and limits beside allocation and lists
    per-tier slack and OOMs (usage-quickstart.toml, sped up)."""
    root = Path(__file__).resolve().parents[2]
    scenario = load_scenario(root / "scenarios" / "usage-quickstart.toml",
                             {"run.clock": "realtime", "run.speed": 30.0, "run.duration_s": 900.0,
                              # the production burst at 60 s, not 600 s: 2 s of wall time, not 20
                              "workload.operations[2].submit_at_s": 60.0})
    async with served(scenario, push_interval_s=0.5) as srv, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True,
                                           timeout=30_000)
        try:
            page = await browser.new_page(viewport={"width": 1440, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            await page.goto(srv.url)
            await page.wait_for_function("!$('panel-usage').hidden && !$('c-usage-cpu').hidden",
                                         timeout=20_000)
            await page.wait_for_function("$('tiers').querySelectorAll('tbody tr').length >= 2",
                                         timeout=20_000)
            tiers = await page.evaluate(
                "[...$('tiers').querySelectorAll('tbody tr')].map((r) => r.cells[0].textContent)")
            assert set(tiers) == {"batch", "production"}
            used = await page.evaluate("page.series['usage:cpu_used'].filter((v) => v > 0).length")
            assert used > 0
            assert "OOM kills" in await text(page, "#usage-sub")
            assert problems == [], problems
        finally:
            await browser.close()


@pytest.mark.asyncio
async def test_finished_page_shows_the_whole_run_figures() -> None:
    """Once the run is over the h1 / h2 card shows the run's own figures (summary.json's), and the
    cards carry the metrics registry's labels."""
    from emulator.results import registry

    scenario = small_scenario(nodes=8, duration_s=40.0, speed=20.0, warmup_s=5.0)
    # The browser starts before the run does: the run lasts 2 s of wall time, and a slow
    # browser start-up on a loaded machine would otherwise miss its running phase.
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True,
                                           timeout=30_000)
        try:
            page = await browser.new_page()
            async with served(scenario, push_interval_s=0.5) as srv:
                await page.goto(srv.url)
                await page.wait_for_function("$('phase').textContent === 'running'", timeout=15_000)
                await page.wait_for_function("$('k-h-label').textContent === 'h1 / h2, last interval'",
                                             timeout=10_000)
                await page.wait_for_function("$('phase').textContent === 'finished'", timeout=20_000)
                await page.wait_for_function("$('k-h-label').textContent === 'h1 / h2, whole run'",
                                             timeout=10_000)
                summary = srv.live.summary
                assert summary is not None
                assert await text(page, "#k-h") == f"{summary['h1']:.3f} / {summary['h2']:.3f}"
                label = page.locator("#k-lost + .l")
                assert await label.text_content() == registry.BY_NAME["nodes_lost"].label
                # Why an operation waits: its "why?" button opens the reasons in a row under it (one
                # synchronous script, so that no push re-renders the table in between).
                why = await page.evaluate("""() => {
                    const op = {id: 7, name: "big", pool: "p", state: "pending", running: 0, pending: 3,
                      completed: 0, total: 3, dominant_share: 0, fair_share: 0.5, refusals: 0, preemptions: 0,
                      pending_reasons: {nodes_insufficient_cpu: 8},
                      pending_why: ["0/8 nodes have room for a task (6 cpu, 6 GiB): 8 insufficient cpu"]};
                    page.ops = {operations: [op], pools: []};
                    renderOps();
                    const button = document.querySelector("#ops button.why");
                    const tip = button.title;
                    button.click();
                    const rows = document.querySelectorAll("#ops tr.why-row li");
                    return [tip, [...rows].map((li) => li.textContent)];
                }""")
                line = "0/8 nodes have room for a task (6 cpu, 6 GiB): 8 insufficient cpu"
                assert why == [line, [line]]
        finally:
            await browser.close()
