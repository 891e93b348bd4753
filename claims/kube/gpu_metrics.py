"""GPU metrics as clusters keep them: a Prometheus server's HTTP API, or NVIDIA's
dcgm-exporter endpoints themselves.

Plain `requests` over the documented API (prometheus.io/docs/prometheus/latest/querying/api/:
`/api/v1/query`, `/api/v1/query_range`, JSON `{"status": "success", "data": {"resultType",
"result"}}`) and prometheus_client's parser for the exporters' text format: both already
pinned, and enough for two endpoints (prometheus-api-client would bring pandas, numpy and
matplotlib to read the same JSON). Every call has the caller's short timeout; any failure is
a `NoMetrics` with the reason in English, for a page to show instead of numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import requests
from prometheus_client.parser import text_string_to_metric_families

ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # the share of time the graphics engine is busy
# The share of cycles an SM has a warp: read where a GPU publishes no GR_ENGINE_ACTIVE (an
# exporter whose counters CSV has SM_ACTIVE on and GR_ENGINE_ACTIVE off).
SM_ACTIVITY = "DCGM_FI_PROF_SM_ACTIVE"
ACTIVITIES = (ACTIVITY, SM_ACTIVITY)  # in order of preference
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # coarse: any kernel running, in %
MEMORY_USED = "DCGM_FI_DEV_FB_USED"  # MiB
MEMORY_FREE = "DCGM_FI_DEV_FB_FREE"
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
XID = "DCGM_FI_DEV_XID_ERRORS"
CLAIM_LABELS = ("dra_claim_namespace", "dra_claim_name")


def gettext_noop(message: str) -> str:
    """Marks a message for makemessages (this layer imports no Django)."""
    return message


UNREACHABLE = gettext_noop("Prometheus is unreachable (%(error)s)")
TOO_SLOW = gettext_noop("Prometheus did not answer within %(seconds)s s")
HTTP_STATUS = gettext_noop("Prometheus answered HTTP %(status)s")
REFUSED = gettext_noop("Prometheus refused the query: %(error)s")
NO_EXPORTER = gettext_noop("no dcgm-exporter answered (%(errors)s)")
NOT_TEXT = gettext_noop("an exporter's answer is not Prometheus text: %(error)s")


class NoMetrics(Exception):
    """No numbers could be had: `message % params` says why (English; the page translates
    `message`)."""

    def __init__(self, message: str, **params: object) -> None:
        self.message, self.params = message, params
        super().__init__(message % params)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str] = field(hash=False)
    value: float


def promql_string(value: str) -> str:
    """A PromQL string literal (double-quoted, Go escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def activity(selector: str, window: str = "") -> str:
    """PromQL: each GPU's activity, GR_ENGINE_ACTIVE where it is published, else SM_ACTIVE
    (`or` keeps the left side's series and adds the right side's whose labels, the metric's
    name aside, it lacks). With `window` ("60s"), the highest value within it."""
    if not window:
        return f"({ACTIVITY}{{{selector}}} or {SM_ACTIVITY}{{{selector}}})"
    return (
        f"(max_over_time({ACTIVITY}{{{selector}}}[{window}]) or "
        f"max_over_time({SM_ACTIVITY}{{{selector}}}[{window}]))"
    )


def claim_selector(namespace: str, name: str) -> str:
    return f"dra_claim_namespace={promql_string(namespace)},dra_claim_name={promql_string(name)}"


class Prometheus:
    """One Prometheus server's query API."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout

    def _get(self, path: str, params: dict[str, str]) -> list[dict]:
        try:
            response = requests.get(self.url + path, params=params, timeout=self.timeout)
        except requests.Timeout:
            raise NoMetrics(TOO_SLOW, seconds=f"{self.timeout:g}") from None
        except requests.RequestException as error:
            raise NoMetrics(UNREACHABLE, error=type(error).__name__) from None
        try:
            body = response.json()
        except ValueError:
            raise NoMetrics(HTTP_STATUS, status=response.status_code) from None
        if body.get("status") != "success":
            raise NoMetrics(REFUSED, error=body.get("error", "?"))
        return list((body.get("data") or {}).get("result") or [])

    def instant(self, query: str, at: float | None = None) -> list[Sample]:
        params = {"query": query} if at is None else {"query": query, "time": f"{at:.3f}"}
        return [
            Sample(item["metric"].get("__name__", ""), item["metric"], _number(item["value"][1]))
            for item in self._get("/api/v1/query", params)
        ]

    def series(
        self, query: str, start: float, end: float, step: float
    ) -> list[tuple[float, float]]:
        """The first series of a range query, as (unix time, value) points."""
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        result = self._get("/api/v1/query_range", params)
        if not result:
            return []
        return [(float(at), _number(value)) for at, value in result[0].get("values") or []]


class Exporters:
    """dcgm-exporter endpoints read directly: what each GPU reports now, no history."""

    def __init__(self, urls: list[str], timeout: float) -> None:
        self.urls, self.timeout = urls, timeout

    def samples(self) -> list[Sample]:
        found: list[Sample] = []
        failures = []
        for url in self.urls:
            try:
                response = requests.get(url, timeout=self.timeout)
                response.raise_for_status()
            except requests.RequestException as error:
                failures.append(f"{url}: {type(error).__name__}")
                continue
            found += parse_exposition(response.text)
        if failures and len(failures) == len(self.urls):
            raise NoMetrics(NO_EXPORTER, errors="; ".join(failures))
        return found


def parse_exposition(text: str) -> list[Sample]:
    """The DCGM_* samples of a Prometheus text exposition."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as error:
        raise NoMetrics(NOT_TEXT, error=str(error)) from None
    return [
        Sample(sample.name, dict(sample.labels), float(sample.value))
        for family in families
        for sample in family.samples
        if sample.name.startswith("DCGM_")
    ]


def _number(text: str) -> float:
    value = float(text)
    return 0.0 if math.isnan(value) else value
