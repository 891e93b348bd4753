"""read / create / delete-with-uid, and resource.k8s.io versions that change under the gateway."""

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import kubesim
from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError
from tests.fixtures.kubesim import create_namespace, raw_request
from tests.kube.clock import FakeClock

GPU_CLASS = "gpu.nvidia.com"


@pytest.fixture
def gateway(kubesim_cluster: Any) -> Iterator[ClusterGateway]:
    with ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as gw:
        yield gw


def claim(version: str, namespace: str, name: str = "gpu-claim") -> dict:
    return manifests.resource_claim_manifest(
        api_version=version,
        namespace=namespace,
        name=name,
        device_class=GPU_CLASS,
        count=1,
        labels={"gpu-portal.io/claim-request": "1"},
    )


def test_it_reads_an_object_and_none_for_a_missing_one(
    kubesim_cluster: Any, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_cluster)
    created = gateway.create(claim("v1", namespace))

    found = gateway.read("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim")
    missing = gateway.read("resource.k8s.io/v1", "ResourceClaim", namespace, "no-such-claim")
    no_namespace = gateway.read("v1", "Namespace", None, f"gone-{uuid.uuid4().hex[:6]}")

    assert found is not None and found["metadata"]["uid"] == created["metadata"]["uid"]
    assert (missing, no_namespace) == (None, None)


def test_it_creates_and_refuses_a_taken_name(kubesim_cluster: Any, gateway: ClusterGateway) -> None:
    namespace = create_namespace(kubesim_cluster)

    created = gateway.create(claim("v1", namespace))
    with pytest.raises(PermanentKubeError) as caught:
        gateway.create(claim("v1", namespace))

    assert created["metadata"]["uid"]
    assert (caught.value.status, caught.value.reason) == (409, "AlreadyExists")


def test_it_deletes_only_the_object_with_the_uid(
    kubesim_cluster: Any, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_cluster)
    first = gateway.create(claim("v1", namespace))
    assert gateway.delete("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim")
    second = gateway.create(claim("v1", namespace))

    stale = first["metadata"]["uid"]
    refused = gateway.delete(
        "resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim", uid=stale
    )

    assert refused is False
    still = gateway.read("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim")
    assert still is not None and still["metadata"]["uid"] == second["metadata"]["uid"]
    own = second["metadata"]["uid"]
    assert gateway.delete("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim", uid=own)
    assert gateway.read("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim") is None
    assert gateway.delete("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim", uid=own)


def test_a_stale_uid_gets_the_api_servers_conflict(
    kubesim_cluster: Any, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_cluster)
    gateway.create(claim("v1", namespace))
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/gpu-claim"
    body = {"preconditions": {"uid": "not-its-uid"}}

    response = raw_request(kubesim_cluster, "DELETE", path, body)

    status = response.json()
    assert (response.status, status["reason"]) == (409, "Conflict")
    assert status["message"].startswith(
        'Operation cannot be fulfilled on ResourceClaim.resource.k8s.io "gpu-claim": the UID in '
        "the precondition (not-its-uid) does not match the UID in record ("
    )
    assert status["details"] == {
        "name": "gpu-claim",
        "group": "resource.k8s.io",
        "kind": "ResourceClaim",
    }


def test_it_reads_and_deletes_in_the_version_served(
    kubesim_v1beta1_cluster: Any,
) -> None:
    namespace = create_namespace(kubesim_v1beta1_cluster)
    with ClusterGateway(kubeconfig_path=kubesim_v1beta1_cluster.kubeconfig) as gw:
        created = gw.create(claim("v1beta1", namespace))
        uid = created["metadata"]["uid"]

        read = gw.read("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim")
        deleted = gw.delete("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim", uid=uid)

        assert read is not None and read["apiVersion"] == "resource.k8s.io/v1beta1"
        assert deleted
        assert gw.read("resource.k8s.io/v1beta1", "ResourceClaim", namespace, "gpu-claim") is None


def test_it_follows_the_cluster_when_a_version_is_no_longer_served(tmp_path: Path) -> None:
    kubeconfig, state = str(tmp_path / "kubeconfig"), str(tmp_path / "state.json")
    before = kubesim.start(served_versions=("v1beta1",), state=state, kubeconfig=kubeconfig)
    port = urlsplit(before.url).port or 0
    clock = FakeClock()
    gw = ClusterGateway(kubeconfig_path=kubeconfig, clock=clock, sleep=clock.sleep)
    try:
        assert gw.claim_api_version() == "resource.k8s.io/v1beta1"
        namespace = create_namespace(before)
        uid = gw.create(claim("v1beta1", namespace))["metadata"]["uid"]
    finally:
        before.stop()
    after = kubesim.start(served_versions=("v1",), state=state, kubeconfig=kubeconfig, port=port)
    try:
        clock.now += 2  # the rewritten kubeconfig (new CA) is picked up; discovery still cached
        assert gw._cached_info().resource_versions == ["v1beta1"]  # still believes v1beta1
        deleted = gw.delete(
            "resource.k8s.io/v1beta1", "ResourceClaim", namespace, "gpu-claim", uid=uid
        )

        assert deleted is True
        assert gw.claim_api_version() == "resource.k8s.io/v1"
        with ClusterGateway(kubeconfig_path=kubeconfig) as fresh:
            assert fresh.read("resource.k8s.io/v1", "ResourceClaim", namespace, "gpu-claim") is None
    finally:
        gw.close()
        after.stop()


def test_an_unserved_version_is_not_a_missing_object(kubesim_v1beta1_cluster: Any) -> None:
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c"
    response = raw_request(kubesim_v1beta1_cluster, "GET", path)

    # As the API server answers a path it has no route for: a Status naming no object.
    assert response.status == 404
    assert response.json()["details"] == {}
