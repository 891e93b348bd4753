"""The verbs through HTTPS with the official client: CRUD, status, delete, errors, limits."""

from __future__ import annotations

import json
import socket
import ssl
import time
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
from kubernetes import client

from tests.fixtures.kubesim import api_client, raw_request, wait_until

ROOT = Path(__file__).resolve().parents[2]

CLAIM_V1BETA1 = {
    "apiVersion": "resource.k8s.io/v1beta1",
    "kind": "ResourceClaim",
    "metadata": {"name": "gpu-claim"},
    "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
}


def pod_manifest(name: str, image: str = "busybox:1.36", labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]},
    }


@pytest.fixture
def core(kubesim_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(kubesim_cluster))


@pytest.fixture
def namespace(core, namespace_name) -> str:
    core.create_namespace({"metadata": {"name": namespace_name}})
    return namespace_name


def test_it_creates_with_201_and_reads_back(kubesim_cluster, namespace):
    response = raw_request(
        kubesim_cluster, "POST", f"/api/v1/namespaces/{namespace}/pods", pod_manifest("p1")
    )
    assert response.status == 201
    created = response.json()
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"].isdigit()
    assert created["metadata"]["creationTimestamp"].endswith("Z")
    read = raw_request(kubesim_cluster, "GET", f"/api/v1/namespaces/{namespace}/pods/p1").json()
    assert read["metadata"]["uid"] == created["metadata"]["uid"]


def test_it_mounts_the_service_account_token_on_create_only(kubesim_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/pods"
    created = raw_request(kubesim_cluster, "POST", path, pod_manifest("p1")).json()
    (volume,) = created["spec"]["volumes"]
    assert volume["name"].startswith("kube-api-access-")
    assert volume["projected"]["sources"][0]["serviceAccountToken"]["path"] == "token"
    mount = {
        "name": volume["name"],
        "readOnly": True,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
    }
    assert created["spec"]["containers"][0]["volumeMounts"] == [mount]
    # The scheduler binds meanwhile; a PUT of the unbound spec would unset nodeName (422).
    current = wait_until(
        lambda: (
            (pod := raw_request(kubesim_cluster, "GET", f"{path}/p1").json())["spec"].get(
                "nodeName"
            )
            and pod
        )
    )
    del current["metadata"]["resourceVersion"]  # the kubelet writes meanwhile
    replaced = raw_request(kubesim_cluster, "PUT", f"{path}/p1", current)
    assert replaced.status == 200
    assert replaced.json()["spec"]["volumes"] == [volume]
    opted_out = pod_manifest("p2")
    opted_out["spec"]["automountServiceAccountToken"] = False
    assert "volumes" not in raw_request(kubesim_cluster, "POST", path, opted_out).json()["spec"]


def test_it_answers_409_already_exists_with_the_upstream_message(core, namespace):
    core.create_namespaced_pod(namespace, pod_manifest("p1"))
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_pod(namespace, pod_manifest("p1"))
    assert caught.value.status == 409
    status = json.loads(caught.value.body)
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'pods "p1" already exists'


def test_it_answers_404_not_found_with_the_upstream_message(kubesim_cluster, namespace):
    api = client.ResourceV1Api(api_client(kubesim_cluster))
    with pytest.raises(client.ApiException) as caught:
        api.read_namespaced_resource_claim("missing", namespace)
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (404, "NotFound")
    assert status["message"] == 'resourceclaims.resource.k8s.io "missing" not found'
    assert status["details"] == {
        "name": "missing",
        "group": "resource.k8s.io",
        "kind": "resourceclaims",
    }


def test_it_refuses_to_create_in_a_namespace_that_does_not_exist(core, namespace_name):
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_pod(namespace_name, pod_manifest("p1"))
    assert caught.value.status == 404
    assert json.loads(caught.value.body)["message"] == f'namespaces "{namespace_name}" not found'


def test_it_updates_with_optimistic_concurrency(core, namespace):
    ns = core.read_namespace(namespace)
    ns.metadata.labels["step"] = "one"
    updated = core.replace_namespace(namespace, ns)
    assert updated.metadata.labels["step"] == "one"
    assert int(updated.metadata.resource_version) > int(ns.metadata.resource_version)
    ns.metadata.labels["step"] = "stale"
    with pytest.raises(client.ApiException) as caught:
        core.replace_namespace(namespace, ns)
    assert caught.value.status == 409
    assert json.loads(caught.value.body)["message"] == (
        f'Operation cannot be fulfilled on namespaces "{namespace}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )


def test_it_keeps_the_resource_version_when_an_update_changes_nothing(core, namespace):
    ns = core.read_namespace(namespace)
    again = core.replace_namespace(namespace, ns)
    assert again.metadata.resource_version == ns.metadata.resource_version


def test_it_writes_status_only_through_the_status_subresource(kubesim_cluster, namespace):
    api = client.ResourceV1beta1Api(api_client(kubesim_cluster))
    api.create_namespaced_resource_claim(namespace, CLAIM_V1BETA1)
    reserved = {"reservedFor": [{"resource": "pods", "name": "x", "uid": "1234"}]}
    api.patch_namespaced_resource_claim("gpu-claim", namespace, {"status": reserved})
    unchanged = api.read_namespaced_resource_claim("gpu-claim", namespace)
    assert not (unchanged.status and unchanged.status.reserved_for)
    api.patch_namespaced_resource_claim_status("gpu-claim", namespace, {"status": reserved})
    claim = api.read_namespaced_resource_claim("gpu-claim", namespace)
    assert claim.status.reserved_for[0].uid == "1234"


def test_it_replaces_a_pods_status_through_pods_status(core, namespace):
    core.create_namespaced_pod(namespace, pod_manifest("p1"))
    pod = core.read_namespaced_pod_status("p1", namespace)
    pod.status.message = "set through pods/status"
    pod.spec.containers[0].image = "ignored:1"
    pod.metadata.resource_version = None  # unconditional: the kubelet may write meanwhile
    replaced = core.replace_namespaced_pod_status("p1", namespace, pod)
    assert replaced.status.message == "set through pods/status"
    assert replaced.spec.containers[0].image == "busybox:1.36"


def test_it_serves_one_claim_in_every_version(kubesim_cluster, namespace):
    beta = client.ResourceV1beta1Api(api_client(kubesim_cluster))
    beta.create_namespaced_resource_claim(namespace, CLAIM_V1BETA1)
    stable = client.ResourceV1Api(api_client(kubesim_cluster))
    request = stable.read_namespaced_resource_claim("gpu-claim", namespace).spec.devices.requests[0]
    assert request.exactly.device_class_name == "gpu.nvidia.com"
    assert request.exactly.allocation_mode == "ExactCount"


def test_it_returns_the_deleted_pod_and_claim(kubesim_cluster, core, namespace):
    core.create_namespaced_pod(namespace, pod_manifest("p1"))
    deleted = raw_request(kubesim_cluster, "DELETE", f"/api/v1/namespaces/{namespace}/pods/p1")
    assert (deleted.status, deleted.json()["kind"]) == (200, "Pod")
    beta = client.ResourceV1beta1Api(api_client(kubesim_cluster))
    beta.create_namespaced_resource_claim(namespace, CLAIM_V1BETA1)
    claim = beta.delete_namespaced_resource_claim("gpu-claim", namespace)
    assert claim.metadata.name == "gpu-claim"
    # A bound Pod stays until its kubelet has stopped it and confirms (graceful deletion).
    wait_until(lambda: pod_names(core, namespace) == [], timeout=30)


def test_it_keeps_an_object_with_finalizers_until_they_are_removed(core, namespace):
    manifest = pod_manifest("held")
    manifest["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(namespace, manifest)
    marked = core.delete_namespaced_pod("held", namespace)
    assert marked.metadata.deletion_timestamp is not None
    assert core.read_namespaced_pod("held", namespace).metadata.deletion_timestamp
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})
    # Without its finalizer the Pod goes once its kubelet confirms the graceful deletion.
    wait_until(lambda: pod_names(core, namespace) == [], timeout=30)
    with pytest.raises(client.ApiException) as caught:
        core.read_namespaced_pod("held", namespace)
    assert caught.value.status == 404


def test_it_terminates_a_namespace_then_removes_it_with_its_objects(core, namespace):
    core.create_namespaced_pod(namespace, pod_manifest("p1"))
    held = pod_manifest("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(namespace, held)
    terminating = core.delete_namespace(namespace)
    assert terminating["status"]["phase"] == "Terminating"
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(namespace, pod_manifest("p2"))
    assert refused.value.status == 403
    assert "because it is being terminated" in json.loads(refused.value.body)["message"]
    # The namespace controller deletes the objects in its own time, as in Kubernetes.
    wait_until(lambda: core.read_namespaced_pod("held", namespace).metadata.deletion_timestamp)
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})
    deadline = time.monotonic() + 5
    while namespace in {ns.metadata.name for ns in core.list_namespace().items}:
        assert time.monotonic() < deadline, "the namespace was never removed"
        time.sleep(0.05)
    assert core.list_namespaced_pod(namespace).items == []


def test_it_deletes_a_collection_by_label(core, namespace):
    for name, team in (("a", "red"), ("b", "red"), ("c", "blue")):
        core.create_namespaced_pod(namespace, pod_manifest(name, labels={"team": team}))
    core.delete_collection_namespaced_pod(namespace, label_selector="team=red")
    wait_until(lambda: pod_names(core, namespace) == ["c"], timeout=30)


def pod_names(core: client.CoreV1Api, namespace: str) -> list[str]:
    return [p.metadata.name for p in core.list_namespaced_pod(namespace).items]


def test_it_lists_by_label_selector_including_set_based(core, namespace):
    for name, team in (("a", "red"), ("b", "blue"), ("c", "green")):
        core.create_namespaced_pod(namespace, pod_manifest(name, labels={"team": team}))

    def names(selector: str) -> list[str]:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        return [pod.metadata.name for pod in pods]

    assert names("team=red") == ["a"]
    assert names("team!=red") == ["b", "c"]
    assert names("team in (red, green)") == ["a", "c"]
    assert names("team notin (red)") == ["b", "c"]
    assert names("team") == ["a", "b", "c"]
    assert names("!team") == []


def test_it_lists_by_field_selector(core, namespace):
    core.create_namespaced_pod(namespace, pod_manifest("a"))
    bound = pod_manifest("b")
    bound["spec"]["nodeName"] = "gpu-node-2"
    core.create_namespaced_pod(namespace, bound)

    def names(selector: str) -> list[str]:
        pods = core.list_namespaced_pod(namespace, field_selector=selector).items
        return [pod.metadata.name for pod in pods]

    assert names("metadata.name=b") == ["b"]
    assert names("metadata.name!=b") == ["a"]
    assert "b" in names("spec.nodeName=gpu-node-2")
    assert names("status.phase=Nope") == []
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={namespace}")
    assert len(everywhere.items) == 2


def test_it_rejects_an_unsupported_field_selector(core, namespace):
    with pytest.raises(client.ApiException) as caught:
        core.list_namespaced_pod(namespace, field_selector="spec.hostname=x")
    assert caught.value.status == 400
    assert "field label not supported: spec.hostname" in json.loads(caught.value.body)["message"]


def test_it_pages_with_limit_and_continue(core, namespace):
    for index in range(5):
        core.create_namespaced_pod(namespace, pod_manifest(f"p{index}"))
    first = core.list_namespaced_pod(namespace, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_namespaced_pod(namespace, limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["p2", "p3"]
    last = core.list_namespaced_pod(namespace, limit=2, _continue=second.metadata._continue)
    assert [p.metadata.name for p in last.items] == ["p4"]
    assert last.metadata._continue is None


def test_it_stores_nothing_on_dry_run(kubesim_cluster, core, namespace):
    path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
    response = raw_request(kubesim_cluster, "POST", path, pod_manifest("ghost"))
    assert response.status == 201
    assert response.json()["metadata"]["name"] == "ghost"
    assert core.list_namespaced_pod(namespace).items == []


def test_it_rejects_unknown_fields_under_strict_validation(kubesim_cluster, namespace):
    manifest = pod_manifest("p1")
    manifest["spec"]["bogus"] = 1
    path = f"/api/v1/namespaces/{namespace}/pods?fieldValidation=Strict"
    response = raw_request(kubesim_cluster, "POST", path, manifest)
    assert response.status == 400
    assert response.json()["reason"] == "BadRequest"
    assert response.json()["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.bogus"'
    )


def test_it_warns_about_unknown_fields_and_drops_them_by_default(kubesim_cluster, namespace):
    manifest = pod_manifest("p1")
    manifest["spec"]["bogus"] = 1
    path = f"/api/v1/namespaces/{namespace}/pods?fieldValidation=Warn"
    response = raw_request(kubesim_cluster, "POST", path, manifest)
    assert response.status == 201
    assert response.headers["Warning"] == '299 - "unknown field \\"spec.bogus\\""'
    assert "bogus" not in response.json()["spec"]
    ignored = raw_request(
        kubesim_cluster,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods?fieldValidation=Ignore",
        {**manifest, "metadata": {"name": "p2"}},
    )
    assert ignored.status == 201
    assert ignored.headers["Warning"] is None


def test_it_answers_422_with_field_causes_for_an_invalid_name(kubesim_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/pods"
    response = raw_request(kubesim_cluster, "POST", path, pod_manifest("Not_Valid"))
    assert response.status == 422
    status = response.json()
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('Pod "Not_Valid" is invalid: metadata.name: Invalid value')
    assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_it_answers_400_for_a_malformed_body(kubesim_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/pods"
    response = raw_request(kubesim_cluster, "POST", path, b"{not json")
    assert response.status == 400
    assert response.json()["reason"] == "BadRequest"


def test_it_answers_413_above_3_mib(kubesim_cluster, namespace):
    manifest = pod_manifest("big", labels={})
    manifest["metadata"]["annotations"] = {"blob": "x" * (3 * 1024 * 1024)}
    path = f"/api/v1/namespaces/{namespace}/pods"
    response = raw_request(kubesim_cluster, "POST", path, manifest)
    assert response.status == 413
    assert raw_request(kubesim_cluster, "GET", "/version").status == 200


def test_it_answers_a_404_status_for_an_unserved_group_version(kubesim_v1beta1_cluster):
    response = raw_request(kubesim_v1beta1_cluster, "GET", "/apis/resource.k8s.io/v1/deviceclasses")
    assert response.status == 404
    assert response.json()["message"] == "the server could not find the requested resource"
    assert response.json()["details"] == {}
    api = client.ResourceV1beta1Api(api_client(kubesim_v1beta1_cluster))
    assert api.list_device_class().items


def test_it_survives_garbage_requests(kubesim_cluster):
    for method, path, body in (
        ("GET", "/api/v1/namespaces/x/pods/y/z/w/v", None),
        ("PUT", "/api/v1/namespaces", b"[]"),
        ("POST", "/api/v1/namespaces", b"\xff\xfe"),
        ("PATCH", "/api/v1/namespaces/default", b"null"),
        ("DELETE", "/apis/resource.k8s.io/v1/nosuch", None),
        ("GET", "/api/v1/pods?limit=abc&continue=%%%", None),
    ):
        response = raw_request(kubesim_cluster, method, path, body)
        assert 400 <= response.status < 500, (method, path, response.status)
    assert raw_request(kubesim_cluster, "GET", "/version").status == 200


def test_it_returns_core_objects_that_pass_the_strict_upstream_schemas(kubesim_cluster, namespace):
    api = api_client(kubesim_cluster)
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, pod_manifest("p1"))
    for path in (f"/api/v1/namespaces/{namespace}", f"/api/v1/namespaces/{namespace}/pods/p1"):
        obj = raw_request(kubesim_cluster, "GET", path).json()
        kubernetes_validate.validate(obj, "1.34", strict=True)


def test_it_returns_nodes_that_pass_the_strict_upstream_schema(kubesim_cluster):
    node = raw_request(kubesim_cluster, "GET", "/api/v1/nodes/gpu-node-1").json()
    kubernetes_validate.validate(node, "1.34", strict=True)


def test_it_survives_broken_http_and_abandoned_connections(kubesim_cluster):
    url = urlsplit(kubesim_cluster.url)
    context = ssl.create_default_context(cadata=kubesim_cluster.ca_pem.decode())
    for garbage in (b"\x00\x01\x02 nonsense\r\n\r\n", b"GET / HTTP/1.1\r\n" + b"X: y" * 20000):
        with (
            socket.create_connection((url.hostname, url.port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(garbage)
    with socket.create_connection((url.hostname, url.port), timeout=5):
        pass  # connect and leave without a TLS handshake
    assert raw_request(kubesim_cluster, "GET", "/version").status == 200


def test_it_serves_each_version_and_each_change_fresh_from_its_encoding_cache(
    kubesim_cluster, namespace
):
    beta = client.ResourceV1beta1Api(api_client(kubesim_cluster))
    beta.create_namespaced_resource_claim(namespace, CLAIM_V1BETA1)
    base = f"/apis/resource.k8s.io/{{}}/namespaces/{namespace}/resourceclaims"
    for _ in range(2):
        as_beta = raw_request(kubesim_cluster, "GET", base.format("v1beta1") + "/gpu-claim").json()
        as_list = raw_request(kubesim_cluster, "GET", base.format("v1")).json()
        as_v1 = as_list["items"][0]
        assert as_beta["apiVersion"] == "resource.k8s.io/v1beta1"
        assert "deviceClassName" in as_beta["spec"]["devices"]["requests"][0]
        assert as_list["apiVersion"] == "resource.k8s.io/v1" and "apiVersion" not in as_v1
        assert "exactly" in as_v1["spec"]["devices"]["requests"][0]
    beta.patch_namespaced_resource_claim(
        "gpu-claim", namespace, {"metadata": {"labels": {"a": "b"}}}
    )
    relisted = raw_request(kubesim_cluster, "GET", base.format("v1")).json()["items"][0]
    assert relisted["metadata"]["labels"] == {"a": "b"}
