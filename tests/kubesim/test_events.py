"""Events as the 1.34 scheduler records them, readable as core/v1 and as events.k8s.io/v1."""

from __future__ import annotations

import kubesim
from tests.fixtures.kubesim import create_namespace, raw_request, wait_until


def schedule_a_pod(cluster: kubesim.Handle) -> str:
    namespace = create_namespace(cluster, "ev")
    container = {"name": "ctr0", "image": "busybox"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {"containers": [container]}
    cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    return namespace


def scheduled_events(cluster: kubesim.Handle, path: str) -> list[dict]:
    """The Scheduled events at `path` (the kubelet records its own as the Pod runs)."""
    listed = lambda: cluster.admin("GET", path)["items"]  # noqa: E731
    return wait_until(lambda: [e for e in listed() if e["reason"] == "Scheduled"])


def test_it_records_scheduling_the_way_the_events_api_recorder_does(kubesim_cluster):
    namespace = schedule_a_pod(kubesim_cluster)
    [event] = scheduled_events(kubesim_cluster, f"/api/v1/namespaces/{namespace}/events")
    assert (event["reason"], event["action"], event["type"]) == ("Scheduled", "Binding", "Normal")
    assert (event["firstTimestamp"], event["lastTimestamp"], event["source"]) == (None, None, {})
    assert "count" not in event
    assert event["reportingComponent"] == "default-scheduler"
    assert event["reportingInstance"].startswith("default-scheduler-")
    [managed] = event["metadata"]["managedFields"]
    assert (managed["manager"], managed["apiVersion"]) == ("kube-scheduler", "events.k8s.io/v1")


def test_it_serves_the_same_events_through_events_k8s_io(kubesim_cluster):
    namespace = schedule_a_pod(kubesim_cluster)
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    [event] = scheduled_events(kubesim_cluster, path)
    assert event["regarding"]["name"] == "p"
    assert event["note"].startswith(f"Successfully assigned {namespace}/p to ")
    assert event["reportingController"] == "default-scheduler"
    assert event["deprecatedSource"] == {}
    assert "involvedObject" not in event


def test_it_keeps_an_event_created_through_events_k8s_io_readable_as_core(kubesim_cluster):
    namespace = create_namespace(kubesim_cluster, "ev")
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p.1", "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1",
        "action": "Checking",
        "reason": "Checked",
        "regarding": {"kind": "Pod", "name": "p", "namespace": namespace},
        "note": "all good",
        "type": "Normal",
    }
    kubesim_cluster.admin("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
    core = kubesim_cluster.admin("GET", f"/api/v1/namespaces/{namespace}/events/p.1")
    assert (core["message"], core["involvedObject"]["name"]) == ("all good", "p")
    assert core["reportingComponent"] == "example.com/ctl"
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/p.1"
    assert raw_request(kubesim_cluster, "DELETE", path).status == 200
    core_path = f"/api/v1/namespaces/{namespace}/events/p.1"
    assert raw_request(kubesim_cluster, "GET", core_path).status == 404
