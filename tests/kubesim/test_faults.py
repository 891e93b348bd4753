"""Fault injection and request counters through the admin API (and the start options)."""

from __future__ import annotations

import time

import pytest
from kubernetes import client, watch

import kubesim
from tests.fixtures.kubesim import api_client, raw_request


def timed_get(handle, path: str) -> tuple[int, float]:
    started = time.monotonic()
    status = raw_request(handle, "GET", path).status
    return status, time.monotonic() - started


def test_it_adds_latency_to_matching_paths_only(kubesim_private):
    kubesim_private.admin("POST", "/_kubesim/faults", {"path": "/pods", "latency_ms": 300})
    status, slow = timed_get(kubesim_private, "/api/v1/pods")
    assert status == 200
    assert slow >= 0.3
    _, fast = timed_get(kubesim_private, "/api/v1/namespaces")
    assert fast < 0.25


def test_it_fails_requests_with_the_chosen_codes(kubesim_private):
    fault = {"path": "^/api/v1/namespaces$", "error_rate": 1.0, "error_codes": [503]}
    kubesim_private.admin("POST", "/_kubesim/faults", fault)
    core = client.CoreV1Api(api_client(kubesim_private))
    with pytest.raises(client.ApiException) as caught:
        core.list_namespace()
    assert caught.value.status == 503
    assert core.list_pod_for_all_namespaces().items == []
    kubesim_private.admin("DELETE", "/_kubesim/faults")
    assert core.list_namespace().items


def test_it_answers_an_injected_429_as_the_max_in_flight_filter_does(kubesim_private):
    fault = {"path": "^/api/v1/namespaces$", "error_rate": 1.0, "error_codes": [429]}
    kubesim_private.admin("POST", "/_kubesim/faults", fault)
    response = raw_request(kubesim_private, "GET", "/api/v1/namespaces")
    assert response.status == 429
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.body == b"Too many requests, please try again later.\n"


def test_it_fails_about_the_chosen_share_of_requests(kubesim_private):
    fault = {"path": "/api/v1/nodes", "error_rate": 0.5, "error_codes": [500, 429]}
    kubesim_private.admin("POST", "/_kubesim/faults", fault)
    statuses = [raw_request(kubesim_private, "GET", "/api/v1/nodes").status for _ in range(40)]
    assert {500, 429, 200} == set(statuses)
    assert 5 < statuses.count(200) < 35


def test_it_goes_down_for_an_outage_then_recovers(kubesim_private):
    kubesim_private.admin("POST", "/_kubesim/faults", {"path": ".*", "outage_seconds": 0.5})
    assert raw_request(kubesim_private, "GET", "/version").status == 503
    time.sleep(0.6)
    assert raw_request(kubesim_private, "GET", "/version").status == 200


def test_it_drops_watch_streams(kubesim_private):
    kubesim_private.admin("POST", "/_kubesim/faults", {"path": "/namespaces", "watch": "drop"})
    core = client.CoreV1Api(api_client(kubesim_private))
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespace, timeout_seconds=5))
    assert events == []
    assert time.monotonic() - started < 2


def test_it_keeps_silent_watch_streams_open_without_events(kubesim_private):
    kubesim_private.admin("POST", "/_kubesim/faults", {"path": "/namespaces", "watch": "silent"})
    core = client.CoreV1Api(api_client(kubesim_private))
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespace, timeout_seconds=1))
    assert events == []
    assert time.monotonic() - started >= 0.9


def test_it_rejects_a_bad_fault(kubesim_private):
    response = raw_request(kubesim_private, "POST", "/_kubesim/faults", {"path": "("})
    assert response.status == 400
    response = raw_request(kubesim_private, "POST", "/_kubesim/faults", {"watch": "sometimes"})
    assert response.status == 400


def test_it_counts_requests_per_verb_and_resource(kubesim_private):
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    core = client.CoreV1Api(api_client(kubesim_private))
    core.create_namespace({"metadata": {"name": "counted"}})
    core.read_namespace("counted")
    core.read_namespace("counted")
    core.list_namespaced_pod("counted")
    core.patch_namespace("counted", {"metadata": {"labels": {"a": "b"}}})
    core.delete_namespace("counted")
    list(watch.Watch().stream(core.list_pod_for_all_namespaces, timeout_seconds=1))
    counters = kubesim_private.admin("GET", "/_kubesim/counters")["requests"]
    assert counters == {
        "create namespaces": 1,
        "get namespaces": 2,
        "list pods": 1,
        "patch namespaces": 1,
        "delete namespaces": 1,
        "watch pods": 1,
    }
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    assert kubesim_private.admin("GET", "/_kubesim/counters") == {"requests": {}}


def test_it_takes_latency_and_errors_as_start_options():
    handle = kubesim.start(latency_ms=200, error_rate=1.0, error_codes=(502,))
    try:
        status, elapsed = timed_get(handle, "/api/v1/nodes")
        assert status == 502
        assert elapsed >= 0.2
    finally:
        handle.stop()
