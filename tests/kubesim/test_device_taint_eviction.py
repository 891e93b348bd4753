"""The device taint eviction controller, as kube-controller-manager v1.34 runs it with
DRADeviceTaints (pkg/controller/devicetainteviction): a running Pod whose allocated device gets
a NoExecute taint it does not tolerate is marked (DisruptionTarget, DeletionByDeviceTaintManager,
an Event) and deleted, and its device freed; a Pod whose request tolerates the taint for good
stays. The eviction time (timeAdded plus the shortest NoExecute tolerationSeconds) is checked
on its own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import kubesim
from kubesim.controllers.device_taint_eviction import claim_eviction_time, no_execute_taints
from tests.fixtures.kubesim import QUIET_TOPOLOGY, create_namespace, raw_request, wait_until
from tests.kubesim.test_extended_resources import RULES, claim_pod, submit

XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(
        speed=20,
        topology=QUIET_TOPOLOGY,
        served_versions=("v1", "v1beta2", "v1beta1", "v1alpha3"),
    )
    yield handle
    handle.stop()


def running_pod(namespace: str, name: str, tolerations: list[dict] | None = None) -> dict:
    objects = claim_pod(namespace, name, tolerations)
    objects["claim"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1
    container = objects["pod"]["spec"]["containers"][0]
    container["command"] = ["sleep", "infinity"]
    return objects


def pod(cluster: kubesim.Handle, namespace: str, name: str) -> dict[str, Any] | None:
    found = raw_request(cluster, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return found.json() if found.status == 200 else None


def running(cluster: kubesim.Handle, namespace: str, name: str) -> bool:
    found = pod(cluster, namespace, name)
    return bool(found) and (found.get("status") or {}).get("phase") == "Running"


def claim(cluster: kubesim.Handle, namespace: str, name: str) -> dict[str, Any]:
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
    return cluster.admin("GET", path)


def test_a_noexecute_taint_evicts_the_pods_that_do_not_tolerate_it(
    cluster: kubesim.Handle,
) -> None:
    namespace = create_namespace(cluster, "evict")
    forever = [{"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoExecute"}]
    submit(cluster, namespace, running_pod(namespace, "doomed"))
    submit(cluster, namespace, running_pod(namespace, "tolerant", forever))
    wait_until(lambda: all(running(cluster, namespace, n) for n in ("doomed", "tolerant")), 30)
    results = claim(cluster, namespace, "tolerant")["status"]["allocation"]["devices"]["results"]
    assert results[0]["tolerations"] == forever  # the allocation keeps the request's copy

    # Every GPU of gpu-node-1 gets the taint, as an XID-watching rule would put it.
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "node-1-xid"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-node-1"},
            "taint": XID,
        },
    }
    assert raw_request(cluster, "POST", RULES, rule).status == 201
    try:

        def marked() -> dict[str, Any] | None:
            found = pod(cluster, namespace, "doomed")
            conditions = ((found or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c["type"] == "DisruptionTarget"), None)

        condition = wait_until(marked, timeout=30)
        assert condition["status"] == "True"
        assert condition["reason"] == "DeletionByDeviceTaintManager"
        assert condition["message"] == "Device Taint manager: deleting due to NoExecute taint"
        wait_until(lambda: pod(cluster, namespace, "doomed") is None, timeout=30)
        events = cluster.admin("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
        (event,) = [e for e in events if e["reason"] == "DeviceTaintManagerEviction"]
        assert event["message"] == f"Marking for deletion Pod {namespace}/doomed"
        assert event["source"]["component"] == "device-taint-eviction-controller"
        assert event["involvedObject"]["name"] == "doomed"
        # Its device is freed with it; the tolerant Pod runs on, unmarked.
        wait_until(lambda: not claim(cluster, namespace, "doomed")["status"].get("reservedFor"), 30)
        tolerant = pod(cluster, namespace, "tolerant")
        assert tolerant and not tolerant["metadata"].get("deletionTimestamp")
        assert not [
            c for c in tolerant["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"
        ]
    finally:
        cluster.admin("DELETE", f"{RULES}/node-1-xid")


def allocated_claim(*tolerations: dict) -> dict[str, Any]:
    result: dict[str, Any] = {"driver": "d", "pool": "p", "device": "gpu-0", "request": "gpu"}
    if tolerations:
        result["tolerations"] = list(tolerations)
    return {"status": {"allocation": {"devices": {"results": [result]}}}}


def test_the_eviction_time_is_the_taint_time_plus_the_shortest_noexecute_toleration() -> None:
    added = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    device = {
        "name": "gpu-0",
        "taints": [XID | {"timeAdded": "2026-12-06T12:00:00Z"}, {"key": "x", "effect": "None"}],
    }
    taints = no_execute_taints(
        [{"spec": {"driver": "d", "pool": {"name": "p"}, "devices": [device]}}]
    )
    assert list(taints) == [("d", "p", "gpu-0")] and len(taints[("d", "p", "gpu-0")]) == 1

    assert claim_eviction_time(allocated_claim(), taints) == added
    seconds = [
        {
            "key": "gpu.nvidia.com/xid",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
    ]
    assert claim_eviction_time(allocated_claim(*seconds), taints) == added + timedelta(seconds=60)
    # kubesim's speed shortens the wait as it shortens every other.
    assert claim_eviction_time(allocated_claim(*seconds), taints, speed=20) == added + timedelta(
        seconds=3
    )
    forever = {"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoExecute"}
    assert claim_eviction_time(allocated_claim(forever), taints) is None
    # Only a NoExecute toleration counts here (claimEvictionTime): one for every effect does not.
    any_effect = {"key": "gpu.nvidia.com/xid", "operator": "Exists"}
    assert claim_eviction_time(allocated_claim(any_effect), taints) == added
    other_value = {"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoExecute"}
    assert claim_eviction_time(allocated_claim(other_value), taints) == added
