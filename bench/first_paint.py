"""The served app's first paint of Home in Chromium, as `make run` serves it: the server's CPU until its port opens and
until the page is painted, and the seconds from the server's start to the painted page (the browser asks as soon as
the port opens). Two arms, alternated, each a fresh server on an empty database: the app as it is (torch and
transformers' models imported when a page first needs them), and the same server with torch and transformers'
generation code imported before it starts, as every first paint did before.

    .venv/bin/python -m bench.first_paint [--repeats 3] [--out bench/results/first_paint.json]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT
from tests.conftest import CHROMIUM, free_port

SERVE = "import sys, runpy; sys.argv = ['serve', *sys.argv[1:]]; runpy.run_module('fwsapp.ui.serve', run_name='__main__')"
ARMS = {"as served": SERVE, "model libraries first": "import torch, transformers.generation; " + SERVE}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_paint(browser, code: str) -> dict:
    """One fresh server of this arm: its CPU at port open and at Home's paint, and the paint's seconds."""
    port, folder = free_port(), Path(tempfile.mkdtemp())
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-c", code, "--server.headless", "true", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, "FWSAPP_DB": str(folder / "paint.duckdb")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        started_cpu = cpu_seconds(server.pid)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}")
        page.get_by_role("heading", name="fwsapp", exact=True).wait_for(timeout=120_000)
        row = {"server CPU-s at port open": started_cpu, "server CPU-s at first paint": cpu_seconds(server.pid),
               "start to first paint s": time.perf_counter() - started}
        page.close()
        return row
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "first_paint.json"))
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    measured = {arm: [] for arm in ARMS}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        first_paint(browser, SERVE)  # compiles and caches what both arms import: neither pays for it
        for _ in range(args.repeats):
            for arm, code in ARMS.items():
                measured[arm].append(first_paint(browser, code))
        browser.close()
    rows = [{"arm": arm, "repeats": len(found),
             **{measure: round(statistics.median(row[measure] for row in found), 2) for measure in found[0]}}
            for arm, found in measured.items()]
    for row in rows:
        print(row)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
