"""dryRun=All on create, server-side apply and patch: validation and admission run, nothing is
stored, no resourceVersion is spent and no watch event follows (upstream DryRunnableStorage)."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

import kubesim
from tests.fixtures.kubesim import api_client, create_namespace, raw_request, wait_until

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
BAD_CEL = "device.attributes['gpu.nvidia.com'].productName =="


@pytest.fixture(scope="module")
def cluster() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=20)
    yield handle
    handle.stop()


@pytest.fixture
def ns(cluster: kubesim.Handle) -> str:
    return create_namespace(cluster, "dry")


def claim(name: str, selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def call(
    cluster: kubesim.Handle, method: str, path: str, body: Any = None, **kwargs: Any
) -> tuple[int, Any]:
    response = raw_request(cluster, method, path, body, **kwargs)
    return response.status, response.json() if response.body else None


def stored(cluster: kubesim.Handle, ns: str, name: str) -> Any:
    status, body = call(cluster, "GET", f"{CLAIMS.format(ns=ns)}/{name}")
    return body if status == 200 else None


class Watch:
    """A raw watch of one namespace's claims from a resourceVersion, read line by line."""

    def __init__(self, cluster: kubesim.Handle, ns: str, since: str) -> None:
        url = urlsplit(cluster.url)
        context = ssl.create_default_context(cadata=cluster.ca_pem.decode())
        self.connection = http.client.HTTPSConnection(
            url.hostname, url.port, context=context, timeout=30
        )
        path = f"{CLAIMS.format(ns=ns)}?watch=1&resourceVersion={since}"
        self.connection.request("GET", path, headers={"Authorization": f"Bearer {cluster.token}"})
        self.response = self.connection.getresponse()

    def next_event(self) -> tuple[str, str]:
        event = json.loads(self.response.readline())
        return event["type"], event["object"]["metadata"]["name"]

    def close(self) -> None:
        self.connection.close()


def resource_version(cluster: kubesim.Handle, ns: str) -> str:
    return call(cluster, "GET", CLAIMS.format(ns=ns))[1]["metadata"]["resourceVersion"]


def test_a_dry_run_create_answers_the_defaulted_object_and_stores_nothing(
    cluster: kubesim.Handle, ns: str
) -> None:
    api = client.ResourceV1Api(api_client(cluster))
    body = claim("ghost")

    answer = api.create_namespaced_resource_claim(ns, body, dry_run="All")

    assert answer.metadata.uid and answer.metadata.creation_timestamp
    assert answer.metadata.resource_version is None
    assert answer.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    assert answer.spec.devices.requests[0].exactly.count == 1
    assert stored(cluster, ns, "ghost") is None


def test_a_dry_run_is_refused_with_the_words_of_a_real_create(
    cluster: kubesim.Handle, ns: str
) -> None:
    path = CLAIMS.format(ns=ns)

    dry = call(cluster, "POST", f"{path}?dryRun=All", claim("bad", BAD_CEL))
    real = call(cluster, "POST", path, claim("bad", BAD_CEL))

    assert dry[0] == real[0] == 422
    assert dry[1]["message"] == real[1]["message"]
    assert "compilation failed" in dry[1]["message"]
    assert stored(cluster, ns, "bad") is None


def test_a_dry_run_create_of_a_taken_name_is_already_exists(
    cluster: kubesim.Handle, ns: str
) -> None:
    path = CLAIMS.format(ns=ns)
    assert call(cluster, "POST", path, claim("taken"))[0] == 201

    status, answer = call(cluster, "POST", f"{path}?dryRun=All", claim("taken"))

    assert (status, answer["reason"]) == (409, "AlreadyExists")
    assert answer["message"] == 'resourceclaims.resource.k8s.io "taken" already exists'


def test_a_dry_run_into_a_missing_namespace_is_not_found(cluster: kubesim.Handle) -> None:
    path = CLAIMS.format(ns="no-such-namespace") + "?dryRun=All"

    status, answer = call(cluster, "POST", path, claim("lost"))

    assert (status, answer["message"]) == (404, 'namespaces "no-such-namespace" not found')


def test_a_dry_run_apply_of_a_new_object_answers_like_a_dry_run_create(
    cluster: kubesim.Handle, ns: str
) -> None:
    path = f"{CLAIMS.format(ns=ns)}/applied?fieldManager=test&dryRun=All"
    body = json.dumps(claim("applied")).encode()

    status, answer = call(cluster, "PATCH", path, body, content_type="application/apply-patch+yaml")

    meta = answer["metadata"]
    assert (status, bool(meta.get("uid")), bool(meta.get("creationTimestamp"))) == (201, True, True)
    assert "resourceVersion" not in meta
    assert stored(cluster, ns, "applied") is None


def test_dry_runs_send_no_watch_event_and_spend_no_resource_version(
    cluster: kubesim.Handle, ns: str
) -> None:
    path = CLAIMS.format(ns=ns)
    kept = call(cluster, "POST", path, claim("kept"))[1]
    # The controllers' writes for a new namespace (its default ServiceAccount, its root CA
    # ConfigMap) spend resource versions too: done before counting, on a loaded machine.
    for made in ("serviceaccounts/default", "configmaps/kube-root-ca.crt"):
        url = f"/api/v1/namespaces/{ns}/{made}"
        wait_until(lambda url=url: call(cluster, "GET", url)[0] == 200, timeout=30)
    # A list's resourceVersion is the whole store's: another writer (a controller, the
    # kubelet) may spend one meanwhile. Dry runs spend none, so some try sees it unchanged.
    for _ in range(5):
        since = resource_version(cluster, ns)
        watch = Watch(cluster, ns, since)
        try:
            _dry_create_and_patch(cluster, path, kept)
            if resource_version(cluster, ns) != since:
                continue
            call(cluster, "POST", path, claim("real"))
            assert watch.next_event() == ("ADDED", "real")
            break
        finally:
            watch.close()
    else:
        pytest.fail("the resource version moved across the dry runs in each of 5 tries")
    assert "labels" not in stored(cluster, ns, "kept")["metadata"]


def _dry_create_and_patch(cluster: kubesim.Handle, path: str, kept: dict) -> None:
    assert call(cluster, "POST", f"{path}?dryRun=All", claim("ghost"))[0] == 201
    label = {"metadata": {"labels": {"tried": "yes"}}}
    patched = call(
        cluster,
        "PATCH",
        f"{path}/kept?dryRun=All",
        json.dumps(label).encode(),
        content_type="application/merge-patch+json",
    )
    assert patched[0] == 200 and patched[1]["metadata"]["labels"] == {"tried": "yes"}
    assert patched[1]["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]


def test_an_unknown_dry_run_value_is_a_bad_request(cluster: kubesim.Handle, ns: str) -> None:
    status, answer = call(cluster, "POST", CLAIMS.format(ns=ns) + "?dryRun=Some", claim("x"))

    assert status == 400
    assert answer["message"] == 'dryRun: Unsupported value: "Some": supported values: "All"'
