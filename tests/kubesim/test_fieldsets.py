"""Field sets and Update ownership as structured-merge-diff computes them (the shapes are those
of the recorded kube-apiserver v1.34.9 answers in tests/kubesim/data/apiserver-1.34)."""

from kubesim.registry.apply import record_update, to_fields_v1
from kubesim.registry.fieldsets import compare

CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "n"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
}


def _created(obj: dict, manager: str = "reference-client") -> dict:
    record_update(None, obj, manager=manager, api_version="v1", reset=("f:status",))
    return obj


def _fields(obj: dict, manager: str) -> dict:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    return entry["fieldsV1"]


def test_it_gives_a_new_map_or_list_its_dot_but_not_one_every_object_has() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "g"}]}}],
            "securityContext": {},
        },
    }
    fields = to_fields_v1(compare(None, pod).changed())
    container = fields["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert "." not in fields["f:spec"] and "." not in fields["f:spec"]["f:containers"]
    assert container["f:resources"]["."] == {} and container["f:resources"]["f:claims"]["."] == {}
    assert fields["f:spec"]["f:securityContext"] == {}


def test_it_leaves_the_dot_of_an_existing_map_with_its_first_owner() -> None:
    claim = _created({**CLAIM, "metadata": {**CLAIM["metadata"], "labels": {"a": "1"}}})
    patched = {**claim, "metadata": {**claim["metadata"], "labels": {"a": "1", "b": "2"}}}
    record_update(claim, patched, manager="bob", api_version="v1")
    assert _fields(patched, "bob") == {"f:metadata": {"f:labels": {"f:b": {}}}}
    assert _fields(patched, "reference-client")["f:metadata"]["f:labels"] == {".": {}, "f:a": {}}


def test_it_takes_from_other_owners_only_what_changed_or_went_away() -> None:
    claim = _created({**CLAIM, "metadata": {**CLAIM["metadata"], "labels": {"a": "1", "b": "2"}}})
    patched = {**claim, "metadata": {**claim["metadata"], "labels": {"a": "1"}}}
    record_update(claim, patched, manager="bob", api_version="v1")
    assert [e["manager"] for e in patched["metadata"]["managedFields"]] == ["reference-client"]
    assert _fields(patched, "reference-client")["f:metadata"]["f:labels"] == {".": {}, "f:a": {}}


def test_it_names_set_items_by_value_and_keeps_atomic_structs_whole() -> None:
    claim = _created(dict(CLAIM))
    allocated = {
        **claim,
        "metadata": {**claim["metadata"], "finalizers": ["example.com/hold"]},
        "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": []}]}}},
    }
    fields = to_fields_v1(compare(claim, allocated).changed())
    assert fields["f:metadata"]["f:finalizers"] == {".": {}, 'v:"example.com/hold"': {}}
    assert fields["f:status"]["f:allocation"] == {".": {}, "f:nodeSelector": {}}


def test_it_starts_from_the_managed_fields_a_client_sent_with_its_update() -> None:
    claim = _created({**CLAIM, "metadata": {**CLAIM["metadata"], "labels": {"v": "2"}}})
    sent = [{**claim["metadata"]["managedFields"][0], "fieldsV1": {"f:spec": {}}}]
    put = {**claim, "metadata": {**claim["metadata"], "labels": {"v": "3"}, "managedFields": sent}}
    record_update(claim, put, manager="reference-client", api_version="v1")
    assert _fields(put, "reference-client") == {
        "f:metadata": {"f:labels": {"f:v": {}}},
        "f:spec": {},
    }
