"""The store: resource versions, no-op updates, finalizers, watch history, persistence."""

from __future__ import annotations

import threading

import pytest

from kubesim.base.errors import ApiError
from kubesim.base.selectors import label_matcher
from kubesim.registry.kinds import kind_for
from kubesim.registry.store import Store

PODS = kind_for("", "pods")
NAMESPACES = kind_for("", "namespaces")


def pod(name: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def test_it_sets_identity_and_one_growing_resource_version():
    store = Store()
    first = store.create(PODS, pod("a"))
    second = store.create(PODS, pod("b"))
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert first["metadata"]["generation"] == 1


def test_it_hands_out_copies():
    store = Store()
    store.create(PODS, pod("a"))
    read = store.get(PODS, "ns", "a")
    read["metadata"]["labels"]["changed"] = "yes"
    assert "changed" not in store.get(PODS, "ns", "a")["metadata"]["labels"]


def test_it_raises_conflict_on_a_stale_update_and_keeps_rv_on_a_no_op():
    store = Store()
    created = store.create(PODS, pod("a"))
    assert (
        store.update(PODS, created)["metadata"]["resourceVersion"]
        == created["metadata"]["resourceVersion"]
    )
    changed = {**created, "metadata": {**created["metadata"], "labels": {"x": "1"}}}
    store.update(PODS, changed)
    with pytest.raises(ApiError) as caught:
        store.update(PODS, changed)
    assert caught.value.code == 409
    assert store.update(PODS, changed, check_rv=False)["metadata"]["labels"] == {"x": "1"}


def test_it_bumps_generation_only_when_the_spec_changes():
    store = Store()
    created = store.create(PODS, pod("a"))
    labelled = store.update(PODS, {**created, "metadata": {**created["metadata"], "labels": {}}})
    assert labelled["metadata"]["generation"] == 1
    respecced = store.update(PODS, {**labelled, "spec": {"containers": []}})
    assert respecced["metadata"]["generation"] == 2


def test_it_lists_with_a_selector_and_reports_the_list_version():
    store = Store()
    store.create(PODS, pod("a", team="red"))
    store.create(PODS, pod("b", team="blue"))
    items, rv = store.list(PODS, "ns", label_selector=label_matcher("team=blue"))
    assert [item["metadata"]["name"] for item in items] == ["b"]
    assert rv == store.resource_version


def test_it_holds_an_object_with_finalizers_until_they_go():
    store = Store()
    created = store.create(
        PODS, {**pod("a"), "metadata": {**pod("a")["metadata"], "finalizers": ["x/y"]}}
    )
    marked = store.delete(PODS, "ns", "a")
    assert marked["metadata"]["deletionTimestamp"]
    released = {**marked, "metadata": {**marked["metadata"], "finalizers": []}}
    store.update(PODS, released)
    with pytest.raises(ApiError):
        store.get(PODS, "ns", created["metadata"]["name"])


def test_it_notifies_subscribers_after_each_change():
    store = Store()
    seen = []
    store.subscribe(lambda event, kind, obj: seen.append((event, obj["metadata"]["name"])))
    created = store.create(PODS, pod("a"))
    store.update(PODS, {**created, "metadata": {**created["metadata"], "labels": {"a": "b"}}})
    store.delete(PODS, "ns", "a")
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_it_replays_history_to_a_watch_and_expires_compacted_versions():
    store = Store()
    start = store.resource_version
    store.create(PODS, pod("a"))
    store.create(NAMESPACES, {"metadata": {"name": "other"}, "kind": "Namespace"})
    events = store.watch(PODS, "ns", start, tick=0.05)
    first = next(events)
    assert (first.type, first.obj["metadata"]["name"]) == ("ADDED", "a")
    assert next(events) is None
    store.compact()
    with pytest.raises(ApiError) as caught:
        store.events_since(start)
    assert caught.value.code == 410
    assert caught.value.message == f"too old resource version: {start} ({store.compacted_rv})"


def test_it_keeps_a_bounded_history():
    store = Store(history_size=3)
    start = store.resource_version
    for name in "abcd":
        store.create(PODS, pod(name))
    with pytest.raises(ApiError):
        store.events_since(start)
    assert len(store.events_since(store.compacted_rv)) == 3


def test_it_wakes_a_waiting_watch_on_a_change():
    store = Store()
    events = store.watch(PODS, None, store.resource_version, tick=5)
    threading.Timer(0.1, lambda: store.create(PODS, pod("late"))).start()
    assert next(events).obj["metadata"]["name"] == "late"


def test_it_persists_the_cluster_to_a_state_file(tmp_path):
    path = str(tmp_path / "state.json")
    store = Store(state_path=path)
    created = store.create(PODS, pod("a"))
    store.close()
    reopened = Store(state_path=path)
    assert reopened.get(PODS, "ns", "a")["metadata"]["uid"] == created["metadata"]["uid"]
    assert reopened.resource_version == store.resource_version
    assert int(reopened.create(PODS, pod("b"))["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )
