"""Regenerate docs/screenshots/quickstart-live.png: the quick-start served at 20x with control on,
3 nodes crashed and 3 paused for 120 s from the page's API at t = 500 s, shot at t = 780 s.

    .venv/bin/python docs/screenshots/make_quickstart_live.py   # needs Chromium (make chromium)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parents[2]
PORT = 8765
URL = f"http://127.0.0.1:{PORT}"


def _post(path: str, body: dict[str, object]) -> None:
    # Control requests carry the run's token, which the page (and we) fetch from the server.
    with urllib.request.urlopen(URL + "/api/control/token", timeout=5) as resp:
        token = json.loads(resp.read())["token"]
    req = urllib.request.Request(URL + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "X-Control-Token": token})
    urllib.request.urlopen(req, timeout=5).read()


async def main() -> None:
    out = Path(tempfile.mkdtemp(prefix="hbemu-shot-"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator", "run", str(ROOT / "scenarios" / "quickstart.toml"), "--out",
         str(out / "run"), "--serve", str(PORT), "--allow-control", "--speed", "20", "--quiet"],
        cwd=ROOT)
    try:
        async with async_playwright() as pw:
            chromium = shutil.which("chromium") or "/usr/bin/chromium"
            flags = ["--no-sandbox", "--disable-gpu"]
            browser = await pw.chromium.launch(executable_path=chromium, args=flags, headless=True)
            page = await browser.new_page(viewport={"width": 1440, "height": 1000})
            for _ in range(50):
                try:
                    await page.goto(URL, timeout=2_000)
                    break
                except Exception:  # the server is not up yet
                    await asyncio.sleep(0.2)
            t = "parseFloat(document.getElementById('t-emu').textContent)"
            await page.wait_for_function(f"{t} >= 500", timeout=60_000)
            _post("/api/control/nodes", {"action": "crash", "count": 3})
            _post("/api/control/nodes", {"action": "pause", "count": 3, "duration_s": 120})
            await page.wait_for_function(f"{t} >= 780", timeout=60_000)
            shot = ROOT / "docs" / "screenshots" / "quickstart-live.png"
            await page.screenshot(path=str(shot), full_page=True)
            await browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
