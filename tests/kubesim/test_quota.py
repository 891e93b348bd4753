"""A ResourceQuota on `<class>.deviceclass.resource.k8s.io/devices` refuses ResourceClaims
over it, as the real quota admission does (same 403 and words), through the official client."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import kubesim
from tests.fixtures.kubesim import api_client, create_namespace, raw_request, wait_until

GPU = "gpu.nvidia.com"
KEY = f"{GPU}.deviceclass.resource.k8s.io/devices"
COUNT_KEY = "count/resourceclaims.resource.k8s.io"


@pytest.fixture(scope="module")
def handle() -> Iterator[kubesim.Handle]:
    started = kubesim.start(speed=50)
    yield started
    started.stop()


@pytest.fixture
def api(handle: kubesim.Handle) -> Iterator[client.ApiClient]:
    with api_client(handle) as made:
        yield made


@pytest.fixture
def namespace(handle: kubesim.Handle, api: client.ApiClient) -> str:
    name = create_namespace(handle, "quota")
    body = {"metadata": {"name": "gpus"}, "spec": {"hard": {KEY: "3"}}}
    client.CoreV1Api(api).create_namespaced_resource_quota(name, body)
    return name


def claim(name: str, *, count: int | None = 1, version: str = "v1") -> dict[str, Any]:
    fields: dict[str, Any] = {"deviceClassName": GPU}
    fields |= {"allocationMode": "All"} if count is None else {"count": count}
    request = (
        {"name": "gpu", **fields} if version == "v1beta1" else {"name": "gpu", "exactly": fields}
    )
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def create(api: client.ApiClient, namespace: str, body: dict, **query: Any) -> dict:
    version = body["apiVersion"].split("/")[1]
    objects = client.CustomObjectsApi(api)
    return objects.create_namespaced_custom_object(
        "resource.k8s.io", version, namespace, "resourceclaims", body, **query
    )


def refusal(api: client.ApiClient, namespace: str, body: dict, **query: Any) -> dict:
    with pytest.raises(ApiException) as refused:
        create(api, namespace, body, **query)
    assert refused.value.status == 403
    return json.loads(refused.value.body)


def used(api: client.ApiClient, namespace: str) -> dict[str, str]:
    quota = client.CoreV1Api(api).read_namespaced_resource_quota("gpus", namespace)
    return dict(quota.status.used or {})


def test_it_refuses_a_claim_over_the_quota_in_the_api_servers_words(
    api: client.ApiClient, namespace: str
) -> None:
    create(api, namespace, claim("one", count=2))
    status = refusal(api, namespace, claim("two", count=2))
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'resourceclaims.resource.k8s.io "two" is forbidden: exceeded quota: gpus, '
        f"requested: {KEY}=2, used: {KEY}=2, limited: {KEY}=3"
    )
    assert status["details"] == {
        "name": "two",
        "group": "resource.k8s.io",
        "kind": "resourceclaims",
    }
    create(api, namespace, claim("three", count=1))  # exactly the last one fits
    assert used(api, namespace) == {KEY: "3"}


def test_it_charges_an_all_devices_claim_the_most_one_claim_can_get(
    api: client.ApiClient, namespace: str
) -> None:
    status = refusal(api, namespace, claim("everything", count=None))
    assert f"requested: {KEY}=32, used: {KEY}=0, limited: {KEY}=3" in status["message"]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_it_charges_a_prioritized_list_its_largest_subrequest_per_class(
    api: client.ApiClient, namespace: str, version: str
) -> None:
    # pkg/quota/v1/evaluator/core/resource_claims.go: "the worst case per device class".
    subrequests = [
        {"name": "h100", "deviceClassName": GPU, "count": 1},
        {"name": "a100", "deviceClassName": GPU, "count": 3},
        {"name": "any", "deviceClassName": GPU, "count": 2},
    ]
    body = claim("either", version=version)
    body["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": subrequests}]
    create(api, namespace, body)
    assert used(api, namespace) == {KEY: "3"}
    status = refusal(api, namespace, claim("one-more", count=1))
    assert f"requested: {KEY}=1, used: {KEY}=3, limited: {KEY}=3" in status["message"]


def test_it_counts_v1beta1_claims_alike_and_frees_what_is_deleted(
    api: client.ApiClient, namespace: str
) -> None:
    create(api, namespace, claim("old-style", count=3, version="v1beta1"))
    refusal(api, namespace, claim("more", count=1))
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", "old-style"
    )
    wait_until(lambda: used(api, namespace) == {KEY: "0"})
    create(api, namespace, claim("more", count=1))


def test_it_refuses_a_dry_run_over_the_quota_and_charges_none_within(
    api: client.ApiClient, namespace: str
) -> None:
    refusal(api, namespace, claim("big", count=4), dry_run="All")
    create(api, namespace, claim("small", count=3), dry_run="All")
    assert used(api, namespace) == {KEY: "0"}


def test_it_lets_exactly_the_quota_through_twenty_parallel_creates(
    api: client.ApiClient, namespace: str
) -> None:
    def attempt(index: int) -> int:
        try:
            create(api, namespace, claim(f"c{index}", count=1))
        except ApiException as error:
            return error.status
        return 201

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(attempt, range(20)))
    assert sorted(results) == [201] * 3 + [403] * 17
    assert used(api, namespace) == {KEY: "3"}


def test_it_counts_claims_when_the_quota_limits_their_number(
    handle: kubesim.Handle, api: client.ApiClient
) -> None:
    namespace = create_namespace(handle, "count")
    body = {"metadata": {"name": "claims"}, "spec": {"hard": {COUNT_KEY: "1"}}}
    client.CoreV1Api(api).create_namespaced_resource_quota(namespace, body)
    create(api, namespace, claim("first"))
    status = refusal(api, namespace, claim("second"))
    assert (
        f"exceeded quota: claims, requested: {COUNT_KEY}=1, used: {COUNT_KEY}=1"
        in (status["message"])
    )


def pod_using(name: str, claim_entry: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", **claim_entry}],
            "containers": [
                {
                    "name": "ctr0",
                    "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def test_it_holds_the_claim_of_a_template_over_the_quota_until_the_quota_allows_it(
    handle: kubesim.Handle, api: client.ApiClient
) -> None:
    namespace = create_namespace(handle, "tpl")
    core = client.CoreV1Api(api)
    wait_until(lambda: core.list_namespaced_service_account(namespace).items, timeout=30)
    body = {"metadata": {"name": "gpus"}, "spec": {"hard": {KEY: "2"}}}
    core.create_namespaced_resource_quota(namespace, body)
    create(api, namespace, claim("direct", count=1))
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus"},
        "spec": {"spec": claim("unused", count=2)["spec"]},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template
    )
    core.create_namespaced_pod(
        namespace, pod_using("templated", {"resourceClaimTemplateName": "two-gpus"})
    )
    core.create_namespaced_pod(namespace, pod_using("direct", {"resourceClaimName": "direct"}))
    # The scheduler tries the older pod first: once the younger one is placed, it was tried.
    wait_until(lambda: core.read_namespaced_pod("direct", namespace).spec.node_name, timeout=30)
    templated = core.read_namespaced_pod("templated", namespace)
    assert templated.spec.node_name is None
    assert not (templated.status.resource_claim_statuses or [])
    assert used(api, namespace) == {KEY: "1"}
    core.patch_namespaced_resource_quota("gpus", namespace, {"spec": {"hard": {KEY: "3"}}})
    wait_until(lambda: core.read_namespaced_pod("templated", namespace).spec.node_name, timeout=30)
    assert used(api, namespace) == {KEY: "3"}


def test_the_quota_controller_owns_the_status_it_writes(
    api: client.ApiClient, namespace: str
) -> None:
    create(api, namespace, claim("one", count=1))
    managed = client.CoreV1Api(api).read_namespaced_resource_quota("gpus", namespace)
    writers = {(entry.manager, entry.subresource) for entry in managed.metadata.managed_fields}
    assert ("kube-controller-manager", "status") in writers


def test_kubectl_shows_the_refusal_as_the_api_server_words_it(
    handle: kubesim.Handle, namespace: str
) -> None:
    manifest = json.dumps(claim("too-many", count=4))
    result = subprocess.run(
        ["kubectl", "--kubeconfig", handle.kubeconfig, "-n", namespace, "create", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": '
        'resourceclaims.resource.k8s.io "too-many" is forbidden: exceeded quota: gpus, '
        f"requested: {KEY}=4, used: {KEY}=0, "
        f"limited: {KEY}=3"
    )


def test_it_validates_a_resource_quota_as_the_api_server_does(
    handle: kubesim.Handle, api: client.ApiClient
) -> None:
    namespace = create_namespace(handle, "valid")
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "bad"},
        "spec": {"hard": {KEY: "1500m", "gpus": "1", COUNT_KEY: "-1"}},
    }
    path = f"/api/v1/namespaces/{namespace}/resourcequotas"
    response = raw_request(handle, "POST", path, body)
    assert response.status == 422
    causes = {(c["field"], c["message"]) for c in response.json()["details"]["causes"]}
    assert causes == {
        (f"spec.hard[{KEY}]", 'Invalid value: "1500m": must be an integer'),
        ("spec.hard[gpus]", 'Invalid value: "gpus": must be a standard resource for quota'),
        (f"spec.hard[{COUNT_KEY}]", 'Invalid value: "-1": must be greater than or equal to 0'),
    }
    body["spec"]["hard"] = {KEY: "lots"}
    response = raw_request(handle, "POST", path, body)
    assert response.status == 400
    assert response.json()["message"] == (
        'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: quantities must '
        "match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
