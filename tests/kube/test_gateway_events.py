"""ClusterGateway.list_pod_warnings on kubesim: the Warning Events of one Pod (this uid, not an
earlier Pod of the same name), newest first, whichever API the recorder wrote them through."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import kubesim
from claims.kube.gateway import ClusterGateway, PodEvent
from tests.fixtures.kubesim import wait_until

NOWHERE = {"kubernetes.io/hostname": "no-such-node"}  # no node matches: FailedScheduling


@pytest.fixture
def gateway(kubesim_cluster: kubesim.Handle) -> Iterator[ClusterGateway]:
    with ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as gw:
        yield gw


@pytest.fixture
def namespace(kubesim_cluster: kubesim.Handle) -> Iterator[str]:
    name = f"events-{uuid.uuid4().hex[:6]}"
    kubesim_cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    kubesim_cluster.admin("DELETE", f"/api/v1/namespaces/{name}")


def unschedulable_pod(handle: kubesim.Handle, namespace: str, name: str) -> str:
    pod = {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": NOWHERE,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }
    return str(handle.admin("POST", f"/api/v1/namespaces/{namespace}/pods", pod)["metadata"]["uid"])


def warnings_of(gw: ClusterGateway, namespace: str, name: str, uid: str) -> list[PodEvent]:
    """The Pod's warnings once the scheduler has reported one (a deadline, not a sleep)."""
    return list(wait_until(lambda: gw.list_pod_warnings(namespace, name, uid), timeout=10))


def test_it_lists_the_warnings_of_this_pod_only(
    gateway: ClusterGateway, kubesim_cluster: kubesim.Handle, namespace: str
) -> None:
    first = unschedulable_pod(kubesim_cluster, namespace, "twin")
    assert warnings_of(gateway, namespace, "twin", first)
    kubesim_cluster.admin("DELETE", f"/api/v1/namespaces/{namespace}/pods/twin")
    again = unschedulable_pod(kubesim_cluster, namespace, "twin")

    [event] = warnings_of(gateway, namespace, "twin", again)

    assert event.reason == "FailedScheduling"
    assert event.message.startswith("0/")
    assert "didn't match Pod's node affinity/selector" in event.message
    assert event.at and event.count == 1
    assert len(gateway.list_pod_warnings(namespace, "twin", "")) == 2  # both Pods' without uid


def test_it_leaves_normal_events_out(
    gateway: ClusterGateway, kubesim_cluster: kubesim.Handle, namespace: str
) -> None:
    uid = unschedulable_pod(kubesim_cluster, namespace, "noted")
    normal = {
        "metadata": {"name": f"noted.{uuid.uuid4().hex[:8]}"},
        "involvedObject": {"kind": "Pod", "name": "noted", "namespace": namespace, "uid": uid},
        "reason": "Pulling",
        "message": 'Pulling image "busybox"',
        "type": "Normal",
        "source": {"component": "kubelet"},
    }
    kubesim_cluster.admin("POST", f"/api/v1/namespaces/{namespace}/events", normal)

    found = warnings_of(gateway, namespace, "noted", uid)

    assert found and all(event.reason == "FailedScheduling" for event in found)


def test_it_lists_every_event_of_a_pod_newest_first_with_its_type(
    gateway: ClusterGateway, kubesim_cluster: kubesim.Handle, namespace: str
) -> None:
    """The kubelet's Normal Events too (Pulling, Pulled, Created, Started), in the order it
    made them even within one second: the newest says what a bound Pod is doing."""
    pod = {
        "metadata": {"name": "pulled"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "nvcr.io/x:1"}]},
    }
    uid = kubesim_cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", pod)["metadata"][
        "uid"
    ]

    def failed() -> list[PodEvent]:
        found = gateway.list_pod_events(namespace, "pulled", uid)
        return found if any(e.message == "Error: ErrImagePull" for e in found) else []

    found = wait_until(failed, timeout=10)
    in_order = [(e.type, e.reason) for e in reversed(found)]
    assert in_order[:4] == [
        ("Normal", "Scheduled"),
        ("Normal", "Pulling"),
        ("Warning", "Failed"),
        ("Warning", "Failed"),
    ]
