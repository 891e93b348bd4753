"""Open live pages as a browser drives them: log in, open a page, and then ask again exactly as
htmx (templates + static/js/live.js) does, from a Python thread per tab.

Two kinds of live region (read from the served HTML, not assumed):

- the dashboard's `#dashboard-live`: `hx-get="/?seen=<fingerprint>" hx-trigger="every Ns"`.
  htmx fires a timer every N s whether or not the last request came back; a tick while one is
  in flight queues one request (hx-sync's default, "queue last"), sent as soon as it ends. 204
  (nothing changed) swaps nothing and the timer goes on; 200 replaces the element (a new URL and
  N, its own timer); 286 stops it; an error swaps nothing.
- a claim's or run's watcher `#<page>-watch`: `hx-trigger="load delay:Ds, live-retry delay:5s"`
  and `hx-swap="outerHTML"`. Its answer holds a new watcher (its load delay D is 0 after a wait
  that ended, 5 after one the server refused) and the parts that changed; a watcher without
  hx-get means the page is final. A failed request (status >= 400 or the network) makes
  live.js fire `live-retry`: the same URL again after 5 s.

Each request carries what htmx sends: HX-Request, HX-Trigger and HX-Target (the element's id),
HX-Current-URL (the page), and the body's hx-headers (X-CSRFToken).
"""

from __future__ import annotations

import html
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import requests
from requests.cookies import RequestsCookieJar

RETRY_SECONDS = 5.0  # live.js: `live-retry delay:5s`
# A page's watcher (its own id, hx-get until the page is final), else a polling region.
WATCHER = re.compile(r"<div id=\"(?P<id>[\w-]+-watch)\"(?P<attrs>[^>]*)>")
POLLER = re.compile(r"<div id=\"(?P<id>[\w-]+-live)\"(?P<attrs>[^>]*hx-trigger=\"every [^>]*)>")
ATTRIBUTE = re.compile(r"([\w-]+)=\"([^\"]*)\"")
CSRF_HEADER = re.compile(r"hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'")
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class Region:
    """The live element of a page: its id, the URL it GETs and when (None: it stopped)."""

    id: str
    url: str | None
    delay: float  # a watcher's load delay, or the dashboard's poll interval

    @classmethod
    def find(cls, body: str) -> Region | None:
        match = WATCHER.search(body) or POLLER.search(body)
        if match is None:
            return None
        attrs = {name: html.unescape(value) for name, value in ATTRIBUTE.findall(match["attrs"])}
        trigger = attrs.get("hx-trigger", "")
        timing = re.search(r"(?:every |load delay:)(\d+(?:\.\d+)?)s", trigger)
        delay = float(timing[1]) if timing else 0.0
        return cls(match["id"], attrs.get("hx-get"), delay)


@dataclass
class Counts:
    """What the tabs sent and got, by page kind; quick = answered within a second unchanged."""

    requests: Counter[str] = field(default_factory=Counter)
    quick: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, took: float, changed: bool, error: bool) -> None:
        with self.lock:
            self.requests[kind] += 1
            self.quick[kind] += int(took < 1 and not changed and not error)
            self.errors[kind] += int(error)

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self.lock:
            return {
                "requests": dict(self.requests),
                "quick": dict(self.quick),
                "errors": dict(self.errors),
            }


def log_in(url: str, username: str, password: str) -> requests.Session:
    """As a browser: GET the form (its CSRF cookie and token), POST it, follow the redirect."""
    session = requests.Session()
    form = session.get(url + "/accounts/login/", timeout=60)
    token = CSRF_INPUT.search(form.text)
    if token is None:
        raise RuntimeError("no CSRF token on the login page")
    answer = session.post(
        url + "/accounts/login/",
        data={"csrfmiddlewaretoken": token[1], "username": username, "password": password},
        headers={"Referer": url + "/accounts/login/"},
        timeout=60,
    )
    if answer.url.rstrip("/") != url or "sessionid" not in session.cookies:
        raise RuntimeError(f"login of {username} failed: {answer.status_code} {answer.url}")
    return session


class Tab(threading.Thread):
    """One open page: its own connection, the browser profile's cookies, htmx's loop."""

    def __init__(
        self,
        url: str,
        path: str,
        kind: str,
        cookies: RequestsCookieJar,
        counts: Counts,
        stop: threading.Event,
    ) -> None:
        super().__init__(daemon=True)
        self.url, self.path, self.kind = url, path, kind
        self.counts, self.stop = counts, stop
        self.session = requests.Session()
        self.session.cookies.update(cookies)
        self.headers: dict[str, str] = {}
        self.region: Region | None = None

    def open(self) -> None:
        page = self.session.get(self.url + self.path, timeout=60)
        page.raise_for_status()
        token = CSRF_HEADER.search(page.text)
        self.region = Region.find(page.text)
        if token is None or self.region is None:
            raise RuntimeError(f"{self.path}: no hx-headers or no live region")
        self.headers = {"HX-Request": "true", "HX-Current-URL": page.url, "X-CSRFToken": token[1]}

    def get(self, region: Region) -> requests.Response | None:
        """One htmx request of the region; None when the network failed (as a browser
        sees a connection the server closed under it)."""
        headers = {**self.headers, "HX-Trigger": region.id, "HX-Target": region.id}
        asked = time.monotonic()
        try:
            answer = self.session.get(self.url + str(region.url), headers=headers, timeout=90)
        except requests.ConnectionError:
            self.counts.add(self.kind, time.monotonic() - asked, False, True)
            return None
        took = time.monotonic() - asked
        # A watcher's answer that changed holds parts (hx-swap-oob); the dashboard's is a 200.
        changed = answer.status_code == 200 and (
            region.id.endswith("-live") or "hx-swap-oob" in answer.text
        )
        self.counts.add(self.kind, took, changed, not answer.ok)
        return answer

    def run(self) -> None:
        assert self.region is not None
        if self.region.id.endswith("-watch"):
            self.watch(self.region)
        else:
            self.poll(self.region)

    def watch(self, region: Region) -> None:
        delay = region.delay
        while region.url and not self.stop.wait(delay):
            answer = self.get(region)
            if answer is None or not answer.ok:
                delay = RETRY_SECONDS  # live.js: live-retry, the same URL
                continue
            found = Region.find(answer.text)
            if found is None:
                return
            region, delay = found, found.delay

    def poll(self, region: Region) -> None:
        next_tick = time.monotonic() + region.delay
        while region.url and not self.stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick += region.delay
            while not self.stop.is_set():
                answer = self.get(region)
                if answer is not None and answer.status_code in (200, 286):
                    found = Region.find(answer.text) if answer.status_code == 200 else None
                    if found is None:
                        return
                    region = found  # a new element: its own timer, the old queue dropped
                    next_tick = time.monotonic() + region.delay
                    break
                if next_tick > time.monotonic():
                    break
                while next_tick <= time.monotonic():  # ticks while in flight: one queued
                    next_tick += region.delay
