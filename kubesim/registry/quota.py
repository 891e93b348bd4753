"""ResourceQuota on ResourceClaims: the quota admission and the quota controller's status.

As upstream: the evaluator (pkg/quota/v1/evaluator/core/resource_claims.go) charges a claim
`count/resourceclaims.resource.k8s.io` 1 and `<class>.deviceclass.resource.k8s.io/devices`
its devices per request: ExactCount its count, All the most one claim can get
(AllocationResultsMaxSize, 32), firstAvailable the largest subrequest per class. The
admission (apiserver admission/plugin/resourcequota) checks a create against each quota's
`status.hard` and `status.used` and refuses with 403 "exceeded quota: <name>, requested: ...,
used: ..., limited: ..." (or "status unknown for quota" before the controller filled the
status). kubesim's controller writes the status as soon as a quota or claim changes, and
the check and the create happen under one lock, so parallel creates cannot all pass.
Not simulated: quotas on other resources (pods, cpu, ...), scopes, the DRAExtendedResource
alpha keys (`requests.deviceclass.resource.kubernetes.io/<class>`).
"""

from __future__ import annotations

import contextlib
import copy
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubesim.base import errors
from kubesim.base.cel_env import parse_quantity
from kubesim.registry.kinds import kind_for
from kubesim.registry.ownership import CONTROLLER_MANAGER, record_write

CLAIMS_COUNT = "count/resourceclaims.resource.k8s.io"
PER_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
ALLOCATION_RESULTS_MAX_SIZE = 32
GROUP = "resource.k8s.io"

# One lock for every kubesim in the process: a claim's quota check and its create are one step.
_admission = threading.RLock()


def _is_claim_resource(name: str) -> bool:
    return name == CLAIMS_COUNT or name.endswith(PER_CLASS_SUFFIX)


def _devices(request: dict[str, Any]) -> int:
    mode = request.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        return int(request.get("count") or 1)
    return ALLOCATION_RESULTS_MAX_SIZE if mode == "All" else 0


def _class_key(device_class: str) -> str:
    return f"{device_class}{PER_CLASS_SUFFIX}"


def claim_usage(claim: dict[str, Any]) -> dict[str, int]:
    """What one claim (storage form: v1's shape) charges."""
    usage = {CLAIMS_COUNT: 1}
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for request in requests:
        charged: dict[str, int] = {}
        if request.get("firstAvailable"):
            for sub in request["firstAvailable"]:
                key = _class_key(sub.get("deviceClassName", ""))
                charged[key] = max(charged.get(key, 0), _devices(sub))
        elif request.get("exactly"):
            exactly = request["exactly"]
            charged[_class_key(exactly.get("deviceClassName", ""))] = _devices(exactly)
        for key, devices in charged.items():
            usage[key] = usage.get(key, 0) + devices
    return {key: value for key, value in usage.items() if value}


def _quantity(text: Any) -> int:
    return math.ceil(parse_quantity(str(text)))


def namespace_usage(claims: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for claim in claims:
        for key, value in claim_usage(claim).items():
            total[key] = total.get(key, 0) + value
    return total


def _pretty(values: dict[str, Any]) -> str:
    return ",".join(f"{key}={values[key]}" for key in sorted(values))


def _check(quota: dict[str, Any], name: str, delta: dict[str, int]) -> None:
    status = quota.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    restricted = sorted(key for key in hard if _is_claim_resource(key))
    quota_name = quota["metadata"]["name"]
    if any(key not in used for key in restricted):
        message = f"status unknown for quota: {quota_name}, resources: {','.join(restricted)}"
        raise errors.forbidden(GROUP, "resourceclaims", name, message)
    requested = {key: value for key, value in delta.items() if key in hard}
    over = {
        key
        for key, value in requested.items()
        if _quantity(used[key]) + value > _quantity(hard[key])
    }
    exceeded = sorted(over)
    if exceeded:
        message = (
            f"exceeded quota: {quota_name}, "
            f"requested: {_pretty({key: requested[key] for key in exceeded})}, "
            f"used: {_pretty({key: used[key] for key in exceeded})}, "
            f"limited: {_pretty({key: hard[key] for key in exceeded})}"
        )
        raise errors.forbidden(GROUP, "resourceclaims", name, message)


@contextlib.contextmanager
def admitting(store: Any, kind: Any, obj: dict[str, Any]) -> Iterator[None]:
    """Around a create: a ResourceClaim over a quota of its namespace raises 403, and the
    check and the create are one step for parallel creates."""
    if kind.plural != "resourceclaims" or kind.group != GROUP:
        yield
        return
    with _admission:
        delta = claim_usage(obj)
        namespace = obj["metadata"].get("namespace") or ""
        for quota in store.list(kind_for("", "resourcequotas"), namespace)[0]:
            _check(quota, obj["metadata"].get("name") or "", delta)
        yield


class QuotaController:
    """Keeps each ResourceQuota's status (hard, and used for claim resources) current, and
    admits ResourceClaim creates against it."""

    def __init__(self, store: Any, kinds: dict) -> None:
        self.store = store
        self.quotas = kinds[("", "resourcequotas")]
        self.claims = kinds[(GROUP, "resourceclaims")]
        store.subscribe(self._on_event)

    def admitting(self, kind: Any, obj: dict[str, Any]) -> contextlib.AbstractContextManager:
        return admitting(self.store, kind, obj)

    def _on_event(self, event: str, ref: Any, obj: dict[str, Any]) -> None:
        namespace = obj.get("metadata", {}).get("namespace")
        if not namespace:
            return
        quota_changed = ref.plural == "resourcequotas" and event != "DELETED"
        claim_came_or_went = ref.plural == "resourceclaims" and event in ("ADDED", "DELETED")
        if quota_changed or claim_came_or_went:
            self.refresh(namespace)

    def refresh(self, namespace: str) -> None:
        """The quota controller's sync of one namespace's quotas."""
        with _admission:
            claims = self.store.list(self.claims, namespace)[0]
            usage = namespace_usage(claims)
            for quota in self.store.list(self.quotas, namespace)[0]:
                self._write_status(quota, usage)

    def _write_status(self, quota: dict[str, Any], usage: dict[str, int]) -> None:
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        used = {key: str(usage.get(key, 0)) for key in hard if _is_claim_resource(key)}
        status = {"hard": hard, "used": used}
        if quota.get("status") == status:
            return
        before = copy.deepcopy(quota)
        quota["status"] = status
        record_write(self.quotas, before, quota, CONTROLLER_MANAGER, "status")
        with contextlib.suppress(errors.ApiError):  # changed or deleted meanwhile: synced again
            self.store.update(self.quotas, quota)


def guarded_create(controller: QuotaController | None) -> Callable[[Any, dict], Any]:
    """The admission context for a create (a no-op without a controller, e.g. unit tests)."""
    if controller is None:
        return lambda kind, obj: contextlib.nullcontext()
    return controller.admitting
