"""Check the simulated tabs (bench/open_pages.py) against Chromium: the same pages opened in a
real browser (Playwright, /usr/bin/chromium) send how many requests a minute, and with which
headers, while the simulated tabs run beside them under the same load."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from playwright.sync_api import Request, sync_playwright

from bench.live_bench import CHROMIUM, CHROMIUM_ARGS
from bench.open_pages import Counts

PAGES_PER_KIND = 2


def browser_requests(
    url: str,
    paths: dict[str, str],
    login: tuple[str, str],
    seconds: float,
    sim: Counts,
    sim_pages: dict[str, int],
) -> dict[str, Any]:
    """Requests per page a minute in Chromium, beside those of the simulated tabs of the same
    kinds in the same window (`sim` counts them), and the headers Chromium's htmx sent."""
    sent: Counter[str] = Counter()
    headers: set[str] = set()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context()
        form = context.new_page()
        form.goto(url + "/accounts/login/")
        form.fill("input[name=username]", login[0])
        form.fill("input[name=password]", login[1])
        form.press("input[name=password]", "Enter")
        form.wait_for_url(url + "/")
        form.close()
        pages = []
        for kind, path in paths.items():
            for _ in range(PAGES_PER_KIND):
                page = context.new_page()
                page.on("request", _counter(kind, sent, headers))
                page.goto(url + path)
                pages.append(page)
        # Playwright's sync API hands over the events while it is called: wait through it.
        pages[0].wait_for_timeout(5_000)  # every page loaded and asking
        sent.clear()
        before, started = sim.snapshot()["requests"], time.monotonic()
        pages[0].wait_for_timeout(seconds * 1000)
        browser_sent, after = dict(sent), sim.snapshot()["requests"]
        minutes = (time.monotonic() - started) / 60
        browser.close()
    return {
        "pages_per_kind": PAGES_PER_KIND,
        "window_s": round(minutes * 60, 1),
        "browser_requests_per_page_minute": {
            kind: round(browser_sent.get(kind, 0) / PAGES_PER_KIND / minutes, 2) for kind in paths
        },
        "simulated_requests_per_page_minute": {
            kind: round((after.get(kind, 0) - before.get(kind, 0)) / sim_pages[kind] / minutes, 2)
            for kind in paths
        },
        "browser_htmx_headers": sorted(headers),
    }


def _counter(kind: str, sent: Counter[str], headers: set[str]) -> Any:
    def count(request: Request) -> None:
        if request.resource_type in ("xhr", "fetch"):
            sent[kind] += 1
            headers.update(name for name in request.headers if name.startswith(("hx-", "x-")))

    return count
