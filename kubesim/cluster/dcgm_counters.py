"""A topology's `dcgmCounters:`: the counters its dcgm-exporters publish, as the collectors
CSV an operator gives dcgm-exporter (`-f`, or the Helm chart's ConfigMap) chooses them.
Absent: etc/default-counters.csv's (DCGM_FI_PROF_SM_ACTIVE commented out there). A list: those
fields exactly, each one kubesim fills (kubelet/gpu_metrics.py COUNTERS), e.g. to add
DCGM_FI_PROF_SM_ACTIVE or to leave DCGM_FI_PROF_GR_ENGINE_ACTIVE out."""

from __future__ import annotations

from typing import Any

from kubesim.kubelet.gpu_metrics import COUNTERS


def dcgm_counters(value: Any, error: type[Exception]) -> tuple[str, ...]:
    if value is None:
        return ()
    known = [field for field, _, _ in COUNTERS]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise error("`dcgmCounters:` must be a non-empty list of DCGM field names")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise error(f"`dcgmCounters:` names fields kubesim does not fill: {', '.join(unknown)}")
    return tuple(value)
