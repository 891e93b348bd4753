"""Graceful Pod deletion and ordered namespace deletion, as in the recordings of a real
kube-apiserver 1.34 (06-deletion.json, 04-errors.json): shapes, status codes and order."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import kubesim
from tests.fixtures.kubesim import create_namespace, raw_request, wait_until

SAMPLE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
UNPULLABLE = "nvcr.io/nvidia/k8s/cuda-sample:vectorad"  # pull fails, the Pod stays Pending
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
PODS = "/api/v1/namespaces/{ns}/pods"
OK_CONDITIONS = [
    ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions"),
    ("NamespaceDeletionContentFailure", "False", "ContentDeleted"),
    ("NamespaceContentRemaining", "False", "ContentRemoved"),
    ("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=2)  # pull 1 s, a sample runs 1.5 s, grace 30 s is 15 s
    yield handle
    handle.stop()


def call(cluster: kubesim.Handle, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = raw_request(cluster, method, path, body)
    return response.status, response.json() if response.body else None


def claim(name: str, finalizers: list[str] | None = None) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    metadata: dict = {"name": name, **({"finalizers": finalizers} if finalizers else {})}
    return {"metadata": metadata, "spec": {"devices": {"requests": [request]}}}


def pod(name: str, claim_name: str = "", image: str = SAMPLE, **spec: Any) -> dict:
    container: dict = {"name": "ctr0", "image": image}
    body: dict = {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}
    if claim_name:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return body


def get(cluster: kubesim.Handle, path: str) -> Any:
    status, body = call(cluster, "GET", path)
    return body if status == 200 else None


def running(cluster: kubesim.Handle, ns: str, name: str) -> dict:
    path = f"{PODS.format(ns=ns)}/{name}"
    return wait_until(lambda: (get(cluster, path) or {}).get("status", {}).get("phase") == "Running"
                      and get(cluster, path), timeout=30)  # fmt: skip


def gone(cluster: kubesim.Handle, path: str) -> bool:
    return call(cluster, "GET", path)[0] == 404


def record(cluster: kubesim.Handle, ns: str) -> list[tuple[str, str, dict]]:
    """Every write in namespace `ns` (and to the namespace) from now on: (plural, event, obj)."""
    seen: list[tuple[str, str, dict]] = []
    lock = threading.Lock()

    def on_event(event: str, ref: Any, obj: dict) -> None:
        meta = obj.get("metadata", {})
        if meta.get("namespace") == ns or (ref.plural == "namespaces" and meta["name"] == ns):
            with lock:
                seen.append((ref.plural, event, obj))

    cluster.store.subscribe(on_event)
    return seen


def test_a_bound_pod_stays_until_its_kubelet_has_stopped_it(cluster: kubesim.Handle) -> None:
    ns = create_namespace(cluster, "grace")
    call(cluster, "POST", CLAIMS.format(ns=ns), claim("in-use"))
    call(cluster, "POST", PODS.format(ns=ns), pod("user", "in-use"))
    generation = running(cluster, ns, "user")["metadata"]["generation"]
    writes = record(cluster, ns)
    path, claim_path = f"{PODS.format(ns=ns)}/user", f"{CLAIMS.format(ns=ns)}/in-use"
    status, deleted = call(cluster, "DELETE", path)
    meta = deleted["metadata"]
    assert (status, meta["deletionGracePeriodSeconds"]) == (200, 30)
    assert meta["generation"] == generation + 1
    assert meta["deletionTimestamp"]
    again = call(cluster, "DELETE", path)[1]  # pending: only a shorter period changes it
    assert again["metadata"]["resourceVersion"] == meta["resourceVersion"]
    assert get(cluster, claim_path)["status"]["reservedFor"][0]["name"] == "user"
    wait_until(lambda: gone(cluster, path), timeout=30)
    last = [obj for plural, event, obj in writes if plural == "pods" and event == "MODIFIED"][-1]
    terminated = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (last["status"]["phase"], terminated["exitCode"]) == ("Succeeded", 0)
    wait_until(lambda: get(cluster, claim_path)["status"] == {}, timeout=10)


def test_the_grace_period_ends_with_sigkill(cluster: kubesim.Handle) -> None:
    ns = create_namespace(cluster, "kill")
    call(cluster, "POST", PODS.format(ns=ns), pod("p", terminationGracePeriodSeconds=1))
    running(cluster, ns, "p")
    writes = record(cluster, ns)
    deleted = call(cluster, "DELETE", f"{PODS.format(ns=ns)}/p")[1]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 1
    wait_until(lambda: gone(cluster, f"{PODS.format(ns=ns)}/p"), timeout=30)
    last = [obj for plural, event, obj in writes if plural == "pods" and event == "MODIFIED"][-1]
    terminated = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (last["status"]["phase"], terminated["exitCode"]) == ("Failed", 137)
    killing = [o for p, e, o in writes if p == "events" and o.get("reason") == "Killing"]
    assert killing[0]["message"] == "Stopping container ctr0"


def test_a_forced_delete_removes_a_terminating_pod_at_once(cluster: kubesim.Handle) -> None:
    ns = create_namespace(cluster, "force")
    call(cluster, "POST", PODS.format(ns=ns), pod("p", image=UNPULLABLE))
    path = f"{PODS.format(ns=ns)}/p"
    wait_until(lambda: (get(cluster, path) or {}).get("spec", {}).get("nodeName"), timeout=10)
    force = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    status, deleted = call(cluster, "DELETE", path, force)
    assert (status, deleted["metadata"]["deletionGracePeriodSeconds"]) == (200, 0)
    assert deleted["metadata"]["deletionTimestamp"] and gone(cluster, path)


def test_a_pod_never_scheduled_is_removed_at_once(cluster: kubesim.Handle) -> None:
    ns = create_namespace(cluster, "nowhere")
    too_many = claim("too-many")
    too_many["spec"]["devices"]["requests"][0]["exactly"]["count"] = 99  # never schedules
    call(cluster, "POST", CLAIMS.format(ns=ns), too_many)
    call(cluster, "POST", PODS.format(ns=ns), pod("p", "too-many"))
    path = f"{PODS.format(ns=ns)}/p"
    generation = wait_until(lambda: get(cluster, path)["status"].get("conditions") and get(
        cluster, path)["metadata"]["generation"], timeout=10)  # fmt: skip
    status, deleted = call(cluster, "DELETE", path)
    meta = deleted["metadata"]
    assert (status, meta["deletionGracePeriodSeconds"]) == (200, 0)
    assert meta["generation"] == generation + 1
    assert gone(cluster, path)


def test_a_namespace_goes_pods_first_then_the_rest(cluster: kubesim.Handle) -> None:
    ns = create_namespace(cluster, "ordered")
    call(cluster, "POST", CLAIMS.format(ns=ns), claim("c"))
    call(cluster, "POST", CLAIMS.format(ns=ns), claim("idle"))
    call(cluster, "POST", PODS.format(ns=ns), pod("p", "c", image=UNPULLABLE))
    claim_path = f"{CLAIMS.format(ns=ns)}/c"
    wait_until(lambda: get(cluster, claim_path)["status"].get("reservedFor"), timeout=10)
    writes = record(cluster, ns)
    status, namespace = call(cluster, "DELETE", f"/api/v1/namespaces/{ns}")
    assert (status, namespace["status"], namespace["spec"]) == (
        200,
        {"phase": "Terminating"},
        {"finalizers": ["kubernetes"]},
    )
    assert "deletionGracePeriodSeconds" not in namespace["metadata"]
    wait_until(lambda: gone(cluster, f"/api/v1/namespaces/{ns}"), timeout=30)
    order = [(p, e, o["metadata"].get("name")) for p, e, o in writes if p != "events"]
    marked = [
        o["metadata"] for p, _, o in writes if p == "pods" and "deletionTimestamp" in o["metadata"]
    ]
    assert marked[0]["deletionGracePeriodSeconds"] == 30
    first_claim_deleted = order.index(("resourceclaims", "DELETED", "idle"))
    assert order.index(("pods", "DELETED", "p")) < first_claim_deleted
    assert order[-1] == ("namespaces", "DELETED", ns)
    statuses = [
        o["status"] for p, _, o in writes if p == "namespaces" and "conditions" in o["status"]
    ]
    first = [(c["type"], c["status"], c["reason"]) for c in statuses[0]["conditions"]]
    assert first == OK_CONDITIONS  # written while the Pod was still there


def test_content_held_by_a_finalizer_keeps_the_namespace_terminating(
    cluster: kubesim.Handle,
) -> None:
    ns = create_namespace(cluster, "held")
    call(cluster, "POST", CLAIMS.format(ns=ns), claim("held", ["example.com/hold"]))
    call(cluster, "DELETE", f"/api/v1/namespaces/{ns}")
    path = f"/api/v1/namespaces/{ns}"

    def conditions() -> list:
        return [(c["type"], c["status"], c["reason"], c["message"])
                for c in get(cluster, path)["status"].get("conditions", [])]  # fmt: skip

    wait_until(lambda: ("NamespaceFinalizersRemaining", "True") in [c[:2] for c in conditions()])
    assert conditions()[3:] == [
        (
            "NamespaceContentRemaining",
            "True",
            "SomeResourcesRemain",
            "Some resources are remaining: resourceclaims.resource.k8s.io has 1 resource instances",
        ),
        (
            "NamespaceFinalizersRemaining",
            "True",
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 "
            "resource instances",
        ),
    ]
    held = get(cluster, f"{CLAIMS.format(ns=ns)}/held")["metadata"]
    assert (held["deletionGracePeriodSeconds"], bool(held["deletionTimestamp"])) == (0, True)
    status, refused = call(cluster, "POST", PODS.format(ns=ns), pod("late-pod"))
    assert (status, refused["reason"]) == (403, "Forbidden")
    assert refused["message"] == (
        f'pods "late-pod" is forbidden: unable to create new content in namespace {ns} '
        "because it is being terminated"
    )
    patch = raw_request(cluster, "PATCH", f"{CLAIMS.format(ns=ns)}/held",
                        {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")  # fmt: skip
    assert patch.status == 200  # the last finalizer gone: deleted, answered at the old version
    assert json.loads(patch.body)["metadata"]["resourceVersion"] == held["resourceVersion"]
    wait_until(lambda: gone(cluster, path), timeout=30)


def test_a_delete_with_a_stale_resource_version_precondition_is_refused(
    cluster: kubesim.Handle,
) -> None:
    ns = create_namespace(cluster, "precondition")
    created = call(cluster, "POST", CLAIMS.format(ns=ns), claim("c1"))[1]["metadata"]
    path = f"{CLAIMS.format(ns=ns)}/c1"
    current = get(cluster, path)["metadata"]
    stale = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}}
    status, refused = call(cluster, "DELETE", path, stale)
    assert (status, refused["reason"]) == (409, "Conflict")
    assert refused["message"] == (
        f'Operation cannot be fulfilled on ResourceClaim.resource.k8s.io "c1": the '
        f"ResourceVersion in the precondition (1) does not match the ResourceVersion in record "
        f"({current['resourceVersion']}). The object might have been modified"
    )
    fresh = {**stale, "preconditions": {"resourceVersion": created["resourceVersion"]}}
    assert call(cluster, "DELETE", path, fresh)[0] == 200 and gone(cluster, path)


def test_a_dry_run_create_answers_with_uid_and_creation_time_and_stores_nothing(
    cluster: kubesim.Handle,
) -> None:
    ns = create_namespace(cluster, "dry")
    status, answer = call(cluster, "POST", CLAIMS.format(ns=ns) + "?dryRun=All", claim("dry"))
    meta = answer["metadata"]
    assert (status, bool(meta["uid"]), bool(meta["creationTimestamp"])) == (201, True, True)
    assert "resourceVersion" not in meta
    assert gone(cluster, f"{CLAIMS.format(ns=ns)}/dry")


def test_a_namespace_sent_as_protobuf_is_created(cluster: kubesim.Handle) -> None:
    # kubectl 1.34's `create namespace`: magic, runtime.Unknown{typeMeta, raw Namespace}.
    def field(number: int, value: bytes) -> bytes:
        return bytes([number << 3 | 2, len(value)]) + value

    namespace = field(1, field(1, b"proto-space"))  # Namespace.metadata.name
    body = b"k8s\x00" + field(1, field(1, b"v1") + field(2, b"Namespace")) + field(2, namespace)
    response = raw_request(cluster, "POST", "/api/v1/namespaces", body,
                           content_type="application/vnd.kubernetes.protobuf")  # fmt: skip
    created = json.loads(response.body)
    assert (response.status, created["metadata"]["name"]) == (201, "proto-space")
    assert created["spec"] == {"finalizers": ["kubernetes"]}


def test_a_namespace_left_terminating_in_a_state_file_goes_after_a_restart(tmp_path: Any) -> None:
    state = str(tmp_path / "state.json")
    first = kubesim.start(speed=1, state=state)  # the controller waits 5 s: stopped before
    try:
        ns = create_namespace(first, "restarted")
        assert call(first, "DELETE", f"/api/v1/namespaces/{ns}")[0] == 200
    finally:
        first.stop()
    second = kubesim.start(speed=50, state=state)
    try:
        assert get(second, f"/api/v1/namespaces/{ns}")["status"]["phase"] == "Terminating"
        wait_until(lambda: gone(second, f"/api/v1/namespaces/{ns}"), timeout=10)
    finally:
        second.stop()
