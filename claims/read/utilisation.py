"""Is the GPU being used? A claim's utilisation, from Prometheus or the dcgm-exporters.

`claim_usage(claim)` reads the series dcgm-exporter labels with the claim
(`dra_claim_namespace`, `dra_claim_name`, KUBERNETES_ENABLE_DRA): activity
(DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0-1, per GPU then averaged), framebuffer used and power
summed over its GPUs, and with Prometheus the activity over the claim's life (at most
MAX_POINTS points, each the highest activity of its step, so no burst falls between) and how
long it has been idle. Without PROMETHEUS_URL it reads DCGM_EXPORTER_URLS: current values
only. Whatever fails comes back as `Usage.no_data`, the reason, never as an error: the page
renders without numbers. `utilisation_check()` is the preflight line.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from claims.kube import gpu_metrics
from claims.kube.gpu_metrics import NoMetrics, Sample
from claims.read import claim_devices, metrics_cache, metrics_scope

MAX_POINTS = 240
MIN_STEP_SECONDS = 15.0
CLAIM_METRICS = (*gpu_metrics.ACTIVITIES, gpu_metrics.MEMORY_USED, gpu_metrics.POWER)


@dataclass
class Usage:
    """What the claim's GPUs do now, and (with Prometheus) since it was made."""

    source: str = ""  # "prometheus", "exporters", or "" when there is none
    activity: float | None = None  # 0-1, averaged over the claim's GPUs
    memory_used_mib: float | None = None
    power_watts: float | None = None
    gpus: int = 0
    points: list[tuple[datetime, float]] = field(default_factory=list)
    memory_points: list[tuple[datetime, float]] = field(default_factory=list)  # MiB
    idle_since: datetime | None = None
    no_data: str = ""
    # The range the points cover, and their step (seconds): for idle_since_below.
    start: float = 0.0
    end: float = 0.0
    step: float = 0.0

    @property
    def has_history(self) -> bool:
        return bool(self.points)

    @property
    def average_activity(self) -> float | None:
        if not self.points:
            return None
        return sum(value for _, value in self.points) / len(self.points)

    def idle_since_below(self, threshold: float) -> datetime | None:
        """As idle_since, at another threshold (a team's idle reclaim policy)."""
        if not self.step:
            return None
        raw = [(at.timestamp(), value) for at, value in self.points]
        return _idle_since(raw, self.step, self.start, self.end, threshold)

    def peak_since(self, moment: datetime) -> float | None:
        values = [value for at, value in self.points if at >= moment]
        return max(values) if values else None


def _source(scope: metrics_scope.Scope) -> gpu_metrics.Prometheus | gpu_metrics.Exporters | None:
    """The cluster's Prometheus, else the exporters (DCGM_EXPORTER_URLS: one cluster's)."""
    timeout = settings.UTILISATION_TIMEOUT
    if scope.url:
        return gpu_metrics.Prometheus(scope.url, timeout)
    if settings.DCGM_EXPORTER_URLS:
        return gpu_metrics.Exporters(list(settings.DCGM_EXPORTER_URLS), timeout)
    return None


def claim_usage(claim: Any) -> Usage:
    """The claim's utilisation, or `no_data` saying why there is none. Its GPUs are read by
    UUID while it holds them (claim_devices), whether or not a Pod uses them; otherwise by
    the DRA labels dcgm-exporter gives the series of a GPU a Pod of the claim uses."""
    scope = metrics_scope.scope_of(claim.namespace_request.cluster)
    source = _source(scope)
    if source is None:
        return Usage(no_data=_("no metrics source is set (PROMETHEUS_URL or DCGM_EXPORTER_URLS)"))
    held = claim_devices.held(claim)
    if held.joined:
        selector = scope.selector(claim_devices.uuid_selector(held.uuids))
        figures = {"uuids": ", ".join(held.uuids), "nodes": ", ".join(held.nodes) or "?"}
        missing_ever = (
            _(
                "no series of this claim's GPUs (%(uuids)s) since it was allocated: is "
                "dcgm-exporter running and scraped on %(nodes)s?"
            )
            % figures
        )
        missing_now = (
            _(
                "no series of this claim's GPUs now: is dcgm-exporter running and scraped on "
                "%(nodes)s?"
            )
            % figures
        )
        since = held.since or claim.applied_at or claim.created
    else:
        selector = scope.selector(
            gpu_metrics.claim_selector(claim.namespace_request.name, claim.name)
        )
        missing_ever = _("Prometheus has no metrics of this claim (no Pod of it has run)")
        missing_now = _("no GPU reports metrics for this claim now (no Pod of it runs)")
        since = claim.applied_at or claim.created
    namespace, name = claim.namespace_request.name, claim.name

    def read() -> Usage:
        try:
            if isinstance(source, gpu_metrics.Prometheus):
                usage = _from_prometheus(source, selector, since, missing_ever, missing_now)
            else:
                if held.joined:
                    samples = [s for s in source.samples() if s.labels.get("UUID") in held.uuids]
                else:
                    samples = [s for s in source.samples() if _of_claim(s, namespace, name)]
                usage = _current(samples, "exporters")
        except NoMetrics as error:
            return Usage(no_data=_why(error))
        # One of its GPUs unseen: its activity is not known, so not read as idle.
        if not usage.gpus or (held.joined and usage.gpus < len(set(held.uuids))):
            usage.no_data = usage.no_data or missing_now
        return usage

    key = ("claim", *_cache_key(scope), selector, since.timestamp(), held.uuids, namespace, name)
    return metrics_cache.remembered(key, read)


def _cache_key(scope: metrics_scope.Scope) -> tuple[object, ...]:
    """What any answer depends on besides its query: the source, the settings, the language
    its reasons are in."""
    exporters = () if scope.url else tuple(settings.DCGM_EXPORTER_URLS)
    return (
        scope.url,
        scope.matchers,
        exporters,
        settings.UTILISATION_TIMEOUT,
        settings.UTILISATION_IDLE_THRESHOLD,
        get_language(),
    )


def _why(error: NoMetrics) -> str:
    return _(error.message) % error.params


def _of_claim(sample: Sample, namespace: str, name: str) -> bool:
    return (
        sample.labels.get("dra_claim_namespace") == namespace
        and sample.labels.get("dra_claim_name") == name
    )


def _from_prometheus(
    prometheus: gpu_metrics.Prometheus,
    selector: str,
    since: datetime,
    missing_ever: str,
    missing_now: str,
) -> Usage:
    names = "|".join(CLAIM_METRICS)
    usage = _current(prometheus.instant(f'{{__name__=~"{names}",{selector}}}'), "prometheus")
    end = time.time()
    start = min(since.timestamp(), end - MIN_STEP_SECONDS)
    step = max((end - start) / MAX_POINTS, MIN_STEP_SECONDS)
    # Per GPU the highest activity within each step (a device shared by two containers
    # reports once per container), then the mean over the claim's GPUs.
    query = f"avg(max by (UUID) ({gpu_metrics.activity(selector, f'{step:.0f}s')}))"
    raw = prometheus.series(query, start, end, step)
    usage.points = [(datetime.fromtimestamp(at, UTC), value) for at, value in raw]
    usage.start, usage.end, usage.step = start, end, step
    usage.idle_since = _idle_since(raw, step, start, end, settings.UTILISATION_IDLE_THRESHOLD)
    memory = (
        f"sum(max by (UUID) (max_over_time({gpu_metrics.MEMORY_USED}{{{selector}}}[{step:.0f}s])))"
    )
    usage.memory_points = [
        (datetime.fromtimestamp(at, UTC), value)
        for at, value in prometheus.series(memory, start, end, step)
    ]
    if not usage.gpus and not usage.points:
        usage.no_data = missing_ever
    elif not usage.gpus:  # its history stays, with how long it has been idle
        usage.no_data = missing_now
    return usage


def _idle_since(
    points: list[tuple[float, float]], step: float, start: float, end: float, threshold: float
) -> datetime | None:
    """When activity last went to the threshold or below and stayed there; None while busy.
    Steps without a sample (no Pod ran, or none runs now) count as idle."""
    busy = [at for at, value in points if value > threshold]
    if not busy:
        return datetime.fromtimestamp(start, UTC)
    if max(busy) > end - step:  # the last step, up to now
        return None
    return datetime.fromtimestamp(max(busy) + step, UTC)


def _current(samples: Iterable[Sample], source: str) -> Usage:
    """Now: one value per GPU and metric (a GPU shared by containers reports once each)."""
    per_gpu: dict[tuple[str, str], float] = {}
    for sample in samples:
        per_gpu[(sample.name, sample.labels.get("UUID", ""))] = sample.value
    by_uuid: dict[str, float] = {}
    for metric in reversed(gpu_metrics.ACTIVITIES):  # the preferred one last: it wins
        by_uuid |= {uuid: v for (name, uuid), v in per_gpu.items() if name == metric}
    activity = list(by_uuid.values())
    usage = Usage(source=source, gpus=len(activity))
    if activity:
        usage.activity = sum(activity) / len(activity)
        usage.memory_used_mib = _total(per_gpu, gpu_metrics.MEMORY_USED)
        usage.power_watts = _total(per_gpu, gpu_metrics.POWER)
    return usage


def _total(per_gpu: dict[tuple[str, str], float], metric: str) -> float:
    return sum(value for (name, _uuid), value in per_gpu.items() if name == metric)


@dataclass
class DeviceUsage:
    """One GPU now: for the GPU map's colouring and an idle-first list."""

    activity: float = 0.0
    memory_used_mib: float = 0.0
    xid: int = 0
    claims: set[tuple[str, str]] = field(default_factory=set)  # (namespace, name) holding it
    uuid: str = ""
    measured_by: str = ""  # the metric `activity` is of (GR_ENGINE_ACTIVE, else SM_ACTIVE)


def devices_usage(cluster: Any = None) -> dict[tuple[str, str], DeviceUsage] | str:
    """(node, DRA device name) -> what the GPU does now, or the reason there is no data; of
    `cluster`'s Prometheus and series (None: PROMETHEUS_URL's, all of them).
    A GPU no claim holds has no dra_* labels: its name is the NVIDIA DRA driver's
    `gpu-<index>` of dcgm-exporter's `gpu` label on the node of its `hostname` label."""
    scope = metrics_scope.scope_of(cluster)
    return metrics_cache.remembered(("devices", *_cache_key(scope)), lambda: _devices(scope))


def _devices(scope: metrics_scope.Scope) -> dict[tuple[str, str], DeviceUsage] | str:
    source = _source(scope)
    if source is None:
        return _("no metrics source is set (PROMETHEUS_URL or DCGM_EXPORTER_URLS)")
    names = "|".join((*gpu_metrics.ACTIVITIES, gpu_metrics.MEMORY_USED, gpu_metrics.XID))
    try:
        if isinstance(source, gpu_metrics.Prometheus):
            selector = scope.selector(f"__name__=~{gpu_metrics.promql_string(names)}")
            samples = source.instant(f"{{{selector}}}")
        else:
            samples = source.samples()
    except NoMetrics as error:
        return _why(error)
    devices: dict[tuple[str, str], DeviceUsage] = {}
    for sample in samples:
        device = devices.setdefault(_device_key(sample.labels), DeviceUsage())
        device.uuid = sample.labels.get("UUID", "")
        preferred = device.measured_by == gpu_metrics.ACTIVITY
        if sample.name == gpu_metrics.ACTIVITY or (
            sample.name == gpu_metrics.SM_ACTIVITY and not preferred
        ):
            device.activity, device.measured_by = sample.value, sample.name
        elif sample.name == gpu_metrics.MEMORY_USED:
            device.memory_used_mib = sample.value
        elif sample.name == gpu_metrics.XID:
            device.xid = int(sample.value)
        if sample.labels.get("dra_claim_name"):
            device.claims.add(
                (sample.labels.get("dra_claim_namespace", ""), sample.labels["dra_claim_name"])
            )
    return devices


def _device_key(labels: dict[str, str]) -> tuple[str, str]:
    if labels.get("dra_pool_name") and labels.get("dra_device_name"):
        return labels["dra_pool_name"], labels["dra_device_name"]
    node = labels.get("hostname") or labels.get("Hostname", "")  # renamed in 2026
    return node, f"gpu-{labels.get('gpu', '')}"


@dataclass(frozen=True)
class Check:
    ok: bool
    message: str
    configured: bool = True  # False: no source is set (an optional part, not a failure)


def utilisation_check(cluster: Any = None) -> Check:
    """The preflight line: metrics with DRA labels, without them (an older dcgm-exporter, or
    KUBERNETES_ENABLE_DRA off), or none; of `cluster`'s series (None: all)."""
    scope = metrics_scope.scope_of(cluster)
    source = _source(scope)
    if source is None:
        return Check(
            False, _("not set up: set PROMETHEUS_URL (or DCGM_EXPORTER_URLS)"), configured=False
        )
    try:
        if isinstance(source, gpu_metrics.Prometheus):
            labelled_series = scope.selector('dra_claim_name!=""')
            labelled = source.instant(f"count({gpu_metrics.activity(labelled_series)})")
            every = source.instant(f"count({gpu_metrics.activity(scope.selector())})")
            with_dra = int(labelled[0].value) if labelled else 0
            total = int(every[0].value) if every else 0
        else:
            series = {
                tuple(sorted(s.labels.items()))
                for s in source.samples()
                if s.name in gpu_metrics.ACTIVITIES
            }
            with_dra = sum(1 for labels in series if dict(labels).get("dra_claim_name"))
            total = len(series)
    except NoMetrics as error:
        return Check(False, _why(error))
    return _check_of(total, with_dra)


def _check_of(total: int, with_dra: int) -> Check:
    if not total:
        return Check(False, _("no dcgm-exporter metrics found (is dcgm-exporter installed?)"))
    if with_dra:
        return Check(True, _("%(count)d GPU series, with DRA claim labels") % {"count": total})
    return Check(
        False,
        _(
            "%(count)d GPU series, none with DRA claim labels: dcgm-exporter is too old "
            "or runs without KUBERNETES_ENABLE_DRA, so no claim's use can be shown "
            "(docs/operations.md, Utilisation)"
        )
        % {"count": total},
    )


CHART_WIDTH, CHART_HEIGHT = 480, 80


@dataclass(frozen=True)
class Chart:
    """A claim's activity and memory over its life as SVG polyline points (server-drawn,
    no script), with the figures its text alternative states."""

    activity: str
    memory: str
    peak_activity: float
    average_activity: float
    peak_memory_mib: float
    start: datetime
    end: datetime
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


def chart(usage: Usage) -> Chart | None:
    """None without a history (the exporters only, or nothing ran)."""
    if not usage.points or not usage.step:
        return None
    span = max(usage.end - usage.start, 1.0)
    peak_memory = max((value for _, value in usage.memory_points), default=0.0)

    def line(points: list[tuple[datetime, float]], top: float) -> str:
        scale = top or 1.0
        return " ".join(
            f"{(at.timestamp() - usage.start) / span * CHART_WIDTH:.1f},"
            f"{CHART_HEIGHT - min(value / scale, 1.0) * CHART_HEIGHT:.1f}"
            for at, value in points
        )

    return Chart(
        activity=line(usage.points, 1.0),
        memory=line(usage.memory_points, peak_memory),
        peak_activity=max(value for _, value in usage.points),
        average_activity=usage.average_activity or 0.0,
        peak_memory_mib=peak_memory,
        start=datetime.fromtimestamp(usage.start, UTC),
        end=datetime.fromtimestamp(usage.end, UTC),
    )
