"""Open pages cost little: what 200 idle live pages cost the web processes, and whether one
user's many long-polls delay another user's login.

Run: `python -m bench.open_pages_bench [--users 20] [--idle 60] [--logins 30] [--hog 50]
[--browser]`. Starts the whole product as bench/flow_bench.py does (bench/flow_product.py:
gunicorn `-w 2 --threads 128`, worker, beat, follower, kubesim), as shipped, on a database
(`portal_open_pages`) and Redis DB (14) of its own, so it may run beside a flow bench. kubesim
runs at speed 0.001: a verification run's Pod stays in its image pull (`pending`) for half an
hour, so its page is live and idle. Then:

- each of `--users` data scientists (one team) gets a namespace, a claim and a run pending
  through the API, and logs in as a browser does; each opens 10 tabs: 4 dashboards, 3 of their
  claim's page, 3 of their run's page (200 pages for 20 users). Every tab is simulated as htmx
  drives it (bench/open_pages.py: the URL and trigger read from the served HTML, its headers,
  its timers, its answers), on a connection of its own (as behind an HTTP/2 ingress: a browser
  on HTTP/1.1 would hold at most 6 per host);
- after a warm-up longer than a long-poll's wait, the web processes' CPU seconds (gunicorn's
  master and workers, from /proc) over `--idle` seconds, reported as cores (CPU seconds per
  wall second: CPU, not wall time, so that other work on the shared machine matters less);
  PostgreSQL's and Redis's too (the machine's servers: whatever else uses them is counted);
- with those pages closed, `--logins` logins of another user (GET the form, POST it, follow the
  redirect to the dashboard), one after another, timed: half before and half after the same
  number while one user holds `--hog` tabs of live pages (half claim, half run pages);
- with `--browser`, a handful of the same pages in Chromium (Playwright, /usr/bin/chromium)
  for the idle window, counting their requests per minute, beside the simulated tabs' count.

Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from bench.flow_portal import PortalClient
from bench.flow_product import POSTGRES, Product, running_product
from bench.open_pages import Counts, Tab, log_in

DATABASE = "portal_open_pages"
REDIS_URL = "redis://127.0.0.1:6379/14"
SPEED = 0.001
PASSWORD = "open-pages-bench-password"
TABS = {"dashboard": 4, "claim": 3, "run": 3}
WARM_UP_SECONDS = 35  # longer than a long-poll's wait (LIVE_WAIT_SECONDS, 25)
PASSWORDS = """
from django.contrib.auth.models import User
for user in User.objects.filter(username__startswith="bench"):
    user.set_password({password!r})
    user.save()
"""


def start_work(product: Product, users: int) -> list[dict[str, int]]:
    """A namespace, a claim and a run pending for each of the first `users` users."""
    work = []
    for index in range(users):
        client = PortalClient(product.url, product.tokens[index], product.cluster)
        claim = client.claim(f"open-{index:02d}")
        run = client.call("POST", "/runs/", json={"claim": claim}).json()
        client.wait_for(f"/runs/{run['id']}/", run["state"], ("pending", "running"), [])
        work.append({"claim": claim, "run": run["id"]})
    return work


def pages_of(work: dict[str, int], tabs: dict[str, int]) -> list[tuple[str, str]]:
    paths = {"dashboard": "/", "claim": f"/claims/{work['claim']}/", "run": f"/runs/{work['run']}/"}
    return [(kind, paths[kind]) for kind, count in tabs.items() for _ in range(count)]


def open_tabs(
    product: Product, user: int, pages: list[tuple[str, str]], counts: Counts, stop: threading.Event
) -> list[Tab]:
    cookies = log_in(product.url, f"bench{user:02d}", PASSWORD).cookies
    tabs = [Tab(product.url, path, kind, cookies, counts, stop) for kind, path in pages]
    for tab in tabs:
        tab.open()
        tab.start()
    return tabs


def web_cpu(product: Product) -> dict[str, float]:
    return {
        name: seconds
        for name, seconds in product.cpu_seconds().items()
        if name in ("web", "postgresql", "redis")
    }


def idle_cost(product: Product, tabs: list[Tab], counts: Counts, seconds: float) -> dict:
    time.sleep(WARM_UP_SECONDS)
    before, sent_before, started = web_cpu(product), counts.snapshot(), time.monotonic()
    time.sleep(seconds)
    after, sent, wall = web_cpu(product), counts.snapshot(), time.monotonic() - started
    minutes = wall / 60
    by_kind = {kind: sum(1 for tab in tabs if tab.kind == kind) for kind in TABS}
    per_minute = {
        kind: round(
            (sent["requests"].get(kind, 0) - sent_before["requests"].get(kind, 0))
            / max(by_kind[kind], 1)
            / minutes,
            2,
        )
        for kind in TABS
    }
    quick = {kind: sent["quick"].get(kind, 0) - sent_before["quick"].get(kind, 0) for kind in TABS}
    return {
        "pages": by_kind,
        "window_s": round(wall, 1),
        "web_cpu_s": round(after["web"] - before["web"], 2),
        "web_cores": round((after["web"] - before["web"]) / wall, 3),
        "postgresql_cores": round((after["postgresql"] - before["postgresql"]) / wall, 3),
        "redis_cores": round((after["redis"] - before["redis"]) / wall, 3),
        "requests_per_page_minute": per_minute,
        "answered_at_once_unchanged": quick,
        "errors": sent["errors"],
    }


def time_logins(product: Product, user: int, count: int) -> list[float]:
    """Each login's milliseconds: the form, the POST, the dashboard it leads to."""
    took = []
    for _ in range(count):
        started = time.perf_counter()
        log_in(product.url, f"bench{user:02d}", PASSWORD)
        took.append((time.perf_counter() - started) * 1000)
    return took


def quantiles(took: list[float]) -> dict[str, Any]:
    took = sorted(took)
    return {
        "logins": len(took),
        "p50_ms": round(statistics.median(took), 1),
        "p95_ms": round(statistics.quantiles(took, n=20, method="inclusive")[18], 1),
        "max_ms": round(took[-1], 1),
    }


def logins_beside_hog(product: Product, work: dict[str, int], hog: int, count: int) -> dict:
    """Logins alone (half before, half after) and beside the held long-polls, so that the
    machine's other work weighs on both alike."""
    login_user, hog_user = len(product.tokens) - 1, len(product.tokens) - 2
    took = time_logins(product, login_user, count // 2)
    counts, stop = Counts(), threading.Event()
    pages = pages_of(work, {"claim": hog // 2, "run": hog - hog // 2})
    tabs = open_tabs(product, hog_user, pages, counts, stop)
    time.sleep(WARM_UP_SECONDS)
    before = product.cpu_seconds()["web"]
    held = quantiles(time_logins(product, login_user, count))
    web = product.cpu_seconds()["web"] - before
    stop.set()
    for tab in tabs:
        tab.join(timeout=90)
    alone = quantiles(took + time_logins(product, login_user, count - count // 2))
    return {
        "alone": alone,
        "beside_held_long_polls": held,
        "held_long_polls": hog,
        "hog_requests": counts.snapshot(),
        "web_cpu_s_during_logins": round(web, 2),
        "ratio_p50": round(held["p50_ms"] / alone["p50_ms"], 2),
        "ratio_p95": round(held["p95_ms"] / alone["p95_ms"], 2),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    users = args.users + 2  # the page users, the one with many long-polls, the one logging in
    with running_product(
        users, keep=args.keep, speed=SPEED, database=DATABASE, redis_url=REDIS_URL
    ) as (product, _):
        product.manage("shell", "-c", PASSWORDS.format(password=PASSWORD))
        work = start_work(product, args.users + 1)
        counts, stop = Counts(), threading.Event()
        tabs: list[Tab] = []
        for user in range(args.users):
            tabs += open_tabs(product, user, pages_of(work[user], TABS), counts, stop)
        report: dict[str, Any] = {"idle": idle_cost(product, tabs, counts, args.idle)}
        if args.browser:
            from bench.open_pages_browser import browser_requests

            paths = dict(pages_of(work[0], {kind: 1 for kind in TABS}))
            login = ("bench00", PASSWORD)
            report["browser_check"] = browser_requests(
                product.url, paths, login, args.idle, counts, report["idle"]["pages"]
            )
        stop.set()
        for tab in tabs:
            tab.join(timeout=60)
        report["logins"] = logins_beside_hog(product, work[args.users], args.hog, args.logins)
        report["product"] = {
            "web": "gunicorn -w 2 --threads 128 (bench/flow_product.py)",
            "database": f"{POSTGRES}/{DATABASE}",
            "redis": REDIS_URL,
            "kubesim_speed": SPEED,
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60)
    parser.add_argument("--logins", type=int, default=30)
    parser.add_argument("--hog", type=int, default=50)
    parser.add_argument("--browser", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    print(json.dumps(measure(args), indent=2))


if __name__ == "__main__":
    main()
