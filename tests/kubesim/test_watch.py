"""Watch: event order, resume from a resourceVersion, bookmarks, 410 Expired, timeouts."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from urllib.parse import urlsplit

import pytest
from kubernetes import client, watch

from tests.fixtures.kubesim import api_client


def open_watch(handle, path: str) -> http.client.HTTPResponse:
    url = urlsplit(handle.url)
    context = ssl.create_default_context(cadata=handle.ca_pem.decode())
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=10)
    connection.request("GET", path, headers={"Authorization": f"Bearer {handle.token}"})
    return connection.getresponse()


def read_events(response: http.client.HTTPResponse, count: int) -> list[dict]:
    return [json.loads(response.readline()) for _ in range(count)]


@pytest.fixture
def core(kubesim_private) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(kubesim_private))


def labelled_namespace(name: str, value: str) -> dict:
    return {"metadata": {"name": name, "labels": {"watch": value}}}


def test_it_streams_added_modified_deleted_in_order(core):
    def make_changes() -> None:
        time.sleep(0.2)
        core.create_namespace(labelled_namespace("w1", "yes"))
        core.patch_namespace("w1", {"metadata": {"labels": {"step": "2"}}})
        core.delete_namespace("w1")

    threading.Thread(target=make_changes).start()
    seen = []
    for event in watch.Watch().stream(
        core.list_namespace, label_selector="watch=yes", timeout_seconds=3
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            break
    assert seen[:2] == [("ADDED", "w1"), ("MODIFIED", "w1")]
    assert seen[-1] == ("DELETED", "w1")


def test_it_starts_with_the_current_objects_when_no_version_is_given(kubesim_private, core):
    core.create_namespace(labelled_namespace("w1", "yes"))
    response = open_watch(kubesim_private, "/api/v1/namespaces?watch=1&labelSelector=watch%3Dyes")
    assert response.status == 200
    assert response.headers["Transfer-Encoding"] == "chunked"
    [event] = read_events(response, 1)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "w1")


def test_it_resumes_after_a_resource_version(kubesim_private, core):
    first = core.create_namespace(labelled_namespace("w1", "yes"))
    core.create_namespace(labelled_namespace("w2", "yes"))
    rv = first.metadata.resource_version
    response = open_watch(kubesim_private, f"/api/v1/namespaces?watch=true&resourceVersion={rv}")
    [event] = read_events(response, 1)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "w2")


def test_it_sends_a_bookmark_two_seconds_before_the_watch_times_out(kubesim_private, core):
    rv = core.list_namespace().metadata.resource_version
    path = (
        f"/api/v1/namespaces?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3"
    )
    [event] = read_events(open_watch(kubesim_private, path), 1)
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "Namespace"
    assert event["object"]["metadata"] == {"resourceVersion": rv}
    assert (event["object"]["spec"], event["object"]["status"]) == ({}, {})


def test_it_ends_the_initial_events_with_an_annotated_bookmark(kubesim_private, core):
    core.create_namespace(labelled_namespace("w1", "yes"))
    path = (
        "/api/v1/namespaces?watch=1&labelSelector=watch%3Dyes&sendInitialEvents=true"
        "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    )
    added, bookmark = read_events(open_watch(kubesim_private, path), 2)
    assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "w1")
    assert bookmark["type"] == "BOOKMARK"
    annotations = bookmark["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


def test_it_answers_an_expired_version_with_an_error_event_and_http_200(kubesim_private, core):
    old = core.list_namespace().metadata.resource_version
    core.create_namespace(labelled_namespace("w1", "yes"))
    compacted = kubesim_private.admin("POST", "/_kubesim/compact")["compactedResourceVersion"]
    response = open_watch(kubesim_private, f"/api/v1/namespaces?watch=1&resourceVersion={old}")
    assert response.status == 200
    [event] = read_events(response, 1)
    assert event == {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {old} ({compacted})",
            "reason": "Expired",
            "code": 410,
        },
    }


def test_the_official_client_raises_410_for_an_expired_version(kubesim_private, core):
    old = core.list_namespace().metadata.resource_version
    core.create_namespace(labelled_namespace("w1", "yes"))
    kubesim_private.admin("POST", "/_kubesim/compact")
    with pytest.raises(client.ApiException) as caught:
        for _ in watch.Watch().stream(core.list_namespace, resource_version=old):
            pass
    assert caught.value.status == 410


def test_it_closes_the_stream_after_timeout_seconds(kubesim_private, core):
    rv = core.list_namespace().metadata.resource_version
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespace, resource_version=rv, timeout_seconds=1))
    assert events == []
    assert 0.9 < time.monotonic() - started < 3


def test_it_watches_claims_in_v1beta1_and_v1(kubesim_private):
    api = api_client(kubesim_private)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "claims"}})
    claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
    }
    beta = client.ResourceV1beta1Api(api)
    beta.create_namespaced_resource_claim("claims", claim)
    stream = watch.Watch().stream(beta.list_namespaced_resource_claim, "claims", timeout_seconds=1)
    [event] = list(stream)
    assert event["object"].spec.devices.requests[0].device_class_name == "gpu.nvidia.com"
    stable = client.ResourceV1Api(api)
    stream = watch.Watch(return_type="ResourceV1ResourceClaim").stream(
        stable.list_namespaced_resource_claim, "claims", timeout_seconds=1
    )
    [event] = list(stream)
    assert event["object"].spec.devices.requests[0].exactly.device_class_name == "gpu.nvidia.com"


def test_it_reports_an_object_leaving_the_selection_as_deleted(kubesim_private, core):
    core.create_namespace(labelled_namespace("w1", "yes"))
    response = open_watch(kubesim_private, "/api/v1/namespaces?watch=1&labelSelector=watch%3Dyes")
    [added] = read_events(response, 1)
    core.patch_namespace("w1", {"metadata": {"labels": {"watch": "no"}}})
    core.patch_namespace("w1", {"metadata": {"labels": {"watch": "yes"}}})
    left, back = read_events(response, 2)
    assert (added["type"], left["type"], back["type"]) == ("ADDED", "DELETED", "ADDED")
    assert left["object"]["metadata"]["labels"]["watch"] == "no"
