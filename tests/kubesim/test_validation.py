"""Validation of claims, classes, slices and pods, as the real API server rejects them."""

import copy
import json
import urllib.error
import uuid

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

import kubesim
from kubesim.registry.kinds import kind_for
from tests.fixtures.kubesim import create_namespace

CLAIMS = kind_for("resource.k8s.io", "resourceclaims")
PODS = kind_for("", "pods")


def claim(*requests: dict, name: str = "gpu-claim") -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "dra-test"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def exact(name: str = "gpu", **fields: object) -> dict:
    return {"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", **fields}}


def messages(kind, obj: dict, old: dict | None = None) -> list[str]:
    obj = copy.deepcopy(obj)
    kind.apply_defaults(obj)
    return [error.message() for error in kind.validate(obj, old)]


def pod(**spec: object) -> dict:
    containers = [{"name": "ctr0", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "dra-test"},
        "spec": {"containers": containers, **spec},
    }


def test_it_accepts_the_seed_claim() -> None:
    assert messages(CLAIMS, claim(exact())) == []


def test_it_rejects_names_that_are_not_dns_subdomains() -> None:
    (message,) = messages(CLAIMS, claim(exact(), name="GPU_claim"))
    assert message.startswith(
        'metadata.name: Invalid value: "GPU_claim": a lowercase RFC 1123 subdomain'
    )


def test_it_rejects_a_request_name_that_is_not_a_dns_label() -> None:
    (message,) = messages(CLAIMS, claim(exact(name="gpu.one")))
    assert message.startswith(
        'spec.devices.requests[0].name: Invalid value: "gpu.one": a lowercase RFC 1123 label'
    )


def test_it_rejects_duplicate_request_names() -> None:
    assert messages(CLAIMS, claim(exact(), exact())) == [
        'spec.devices.requests[1].name: Duplicate value: "gpu"'
    ]


def test_it_needs_exactly_one_of_exactly_or_first_available() -> None:
    expected = (
        "spec.devices.requests[0]: Required value: "
        "exactly one of `exactly` or `firstAvailable` is required"
    )
    assert messages(CLAIMS, claim({"name": "gpu"})) == [expected]


def test_it_refuses_both_exactly_and_first_available() -> None:
    both = {**exact(), "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}]}
    assert messages(CLAIMS, claim(both)) == [
        "spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or "
        "`firstAvailable` is required, but multiple fields are set"
    ]


def test_it_allows_at_most_eight_subrequests() -> None:
    subs = [{"name": f"alt-{n}", "deviceClassName": "gpu.nvidia.com"} for n in range(1, 10)]
    assert messages(CLAIMS, claim({"name": "gpu", "firstAvailable": subs})) == [
        "spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items"
    ]
    assert messages(CLAIMS, claim({"name": "gpu", "firstAvailable": subs[:8]})) == []


def test_it_refuses_duplicate_and_bad_subrequest_names() -> None:
    subs = [
        {"name": "h100", "deviceClassName": "gpu.nvidia.com"},
        {"name": "h100", "deviceClassName": "gpu.nvidia.com"},
        {"name": "A100", "deviceClassName": "gpu.nvidia.com"},
    ]
    found = messages(CLAIMS, claim({"name": "gpu", "firstAvailable": subs}))
    assert 'spec.devices.requests[0].firstAvailable[1].name: Duplicate value: "h100"' in found
    assert any(
        m.startswith('spec.devices.requests[0].firstAvailable[2].name: Invalid value: "A100"')
        for m in found
    )


def test_it_needs_a_device_class() -> None:
    assert messages(CLAIMS, claim({"name": "gpu", "exactly": {}})) == [
        "spec.devices.requests[0].exactly.deviceClassName: Required value"
    ]


def test_it_needs_a_positive_count() -> None:
    assert messages(CLAIMS, claim(exact(count=-2))) == [
        "spec.devices.requests[0].exactly.count: Invalid value: -2: must be greater than zero"
    ]


def test_it_forbids_a_count_with_all_mode() -> None:
    assert messages(CLAIMS, claim(exact(allocationMode="All", count=2))) == [
        "spec.devices.requests[0].exactly.count: Invalid value: 2: "
        "must not be specified when allocationMode is 'All'"
    ]


def test_it_rejects_an_unknown_allocation_mode() -> None:
    assert messages(CLAIMS, claim(exact(allocationMode="Some"))) == [
        "spec.devices.requests[0].exactly.allocationMode: Unsupported value: "
        '"Some": supported values: "All", "ExactCount"'
    ]


def test_it_compiles_cel_selectors() -> None:
    selectors = [{"cel": {"expression": "device.driver == "}}]
    (message,) = messages(CLAIMS, claim(exact(selectors=selectors)))
    assert message.startswith(
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: "
        'Invalid value: "device.driver == ": compilation failed: ERROR: <input>:1:'
    )


def test_it_checks_subrequests() -> None:
    request = {"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": ""}]}
    assert messages(CLAIMS, claim(request)) == [
        "spec.devices.requests[0].firstAvailable[0].deviceClassName: Required value"
    ]


def test_it_keeps_the_claim_spec_immutable() -> None:
    old = claim(exact())
    CLAIMS.apply_defaults(old)
    assert messages(CLAIMS, claim(exact(count=2)), old)[0].startswith("spec: Invalid value: ")
    assert messages(CLAIMS, claim(exact(count=2)), old)[0].endswith(": field is immutable")
    assert messages(CLAIMS, claim(exact()), old) == []


def test_it_validates_device_class_selectors() -> None:
    device_class = {
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": ")"}}]},
    }
    (message,) = messages(kind_for("resource.k8s.io", "deviceclasses"), device_class)
    assert message.startswith("spec.selectors[0].cel.expression: Invalid value")


def test_it_needs_containers_with_images() -> None:
    assert messages(PODS, pod(containers=[])) == ["spec.containers: Required value"]
    assert messages(PODS, pod(containers=[{"name": "ctr0"}])) == [
        "spec.containers[0].image: Required value"
    ]


def test_it_checks_container_names() -> None:
    containers = [
        {"name": "Ctr", "image": "x"},
        {"name": "b", "image": "x"},
        {"name": "b", "image": "x"},
    ]
    found = messages(PODS, pod(containers=containers))
    assert found[0].startswith('spec.containers[0].name: Invalid value: "Ctr"')
    assert found[1] == 'spec.containers[2].name: Duplicate value: "b"'


def test_it_needs_container_claims_to_name_a_pod_claim() -> None:
    containers = [{"name": "ctr0", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]
    assert messages(PODS, pod(containers=containers)) == [
        'spec.containers[0].resources.claims[0]: Not found: "gpu": '
        "must be one of the names in pod.spec.resourceClaims which is empty"
    ]
    claims = [{"name": "other", "resourceClaimName": "c"}]
    assert messages(PODS, pod(containers=containers, resourceClaims=claims)) == [
        'spec.containers[0].resources.claims[0]: Not found: "gpu": '
        "must be one of the names in pod.spec.resourceClaims: other"
    ]


def test_it_needs_exactly_one_claim_source() -> None:
    neither = messages(PODS, pod(resourceClaims=[{"name": "gpu"}]))
    assert neither == [
        'spec.resourceClaims[0]: Invalid value: {"name":"gpu"}: '
        "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
    ]
    both = messages(
        PODS,
        pod(
            resourceClaims=[
                {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}
            ]
        ),
    )
    assert both[0].endswith(
        "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
    )


def test_it_checks_the_restart_policy() -> None:
    assert messages(PODS, pod(restartPolicy="Sometimes")) == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "OnFailure", "Never"'
    ]


def test_it_validates_namespace_names_as_labels() -> None:
    (message,) = messages(kind_for("", "namespaces"), {"metadata": {"name": "dra.test"}})
    assert message.startswith(
        'metadata.name: Invalid value: "dra.test": a lowercase RFC 1123 label'
    )


def test_it_finds_unknown_fields_for_the_version_sent() -> None:
    beta = {**claim(), "apiVersion": "resource.k8s.io/v1beta1"}
    beta["spec"]["devices"]["requests"] = [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]
    assert CLAIMS.unknown_fields(beta, "v1beta1") == []
    assert CLAIMS.unknown_fields(beta, "v1") == ["spec.devices.requests[0].deviceClassName"]
    typo = claim(exact())
    typo["spec"]["devices"]["requests"][0]["exactly"]["cuont"] = 1
    typo["metadata"]["labelz"] = {}
    assert CLAIMS.unknown_fields(typo, "v1") == [
        "metadata.labelz",
        "spec.devices.requests[0].exactly.cuont",
    ]


def test_it_accepts_free_form_maps_and_opaque_parameters() -> None:
    obj = claim(exact())
    obj["metadata"]["labels"] = {"anything/goes": "x"}
    obj["spec"]["devices"]["config"] = [
        {
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}},
            }
        }
    ]
    assert CLAIMS.unknown_fields(obj, "v1") == []
    assert PODS.unknown_fields(
        {
            **pod(),
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "imagePullPolicy": "Always", "colour": 1}
                ]
            },
        },
        "v1",
    ) == ["spec.containers[0].colour"]


@pytest.fixture
def resource_api(kubesim_cluster) -> client.ResourceV1Api:
    api = config.new_client_from_config(kubesim_cluster.kubeconfig)
    return client.ResourceV1Api(api)


def test_it_answers_422_with_causes_through_the_api(resource_api: client.ResourceV1Api) -> None:
    namespace = f"val-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(resource_api.api_client).create_namespace({"metadata": {"name": namespace}})
    body = claim(exact(count=0, allocationMode="All"), {"name": "other"})
    body["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    body["metadata"]["namespace"] = namespace
    with pytest.raises(ApiException) as raised:
        resource_api.create_namespaced_resource_claim(namespace, body)
    status = json.loads(raised.value.body)
    assert raised.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 3: must not be specified when allocationMode is 'All'",
            "field": "spec.devices.requests[0].exactly.count",
        },
        {
            "reason": "FieldValueRequired",
            "message": "Required value: exactly one of `exactly` or `firstAvailable` is required",
            "field": "spec.devices.requests[1]",
        },
    ]
    assert status["message"].startswith(
        'ResourceClaim.resource.k8s.io "gpu-claim" is invalid: '
        "[spec.devices.requests[0].exactly.count"
    )


def test_it_reports_values_of_the_wrong_type_instead_of_failing() -> None:
    wrong = claim()
    wrong["spec"]["devices"]["requests"] = "gpu"
    assert messages(CLAIMS, wrong) == [
        'spec.devices.requests: Invalid value: "gpu": must be of type array'
    ]
    bad_pod = pod()
    bad_pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": 7}]}
    assert messages(PODS, bad_pod) == [
        "spec.containers[0].resources.claims[0].name: Invalid value: 7: must be of type string"
    ]


def test_it_rejects_a_misshapen_v1beta1_slice_device() -> None:
    slices = kind_for("resource.k8s.io", "resourceslices")
    body = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "d",
            "nodeName": "n",
            "pool": {"name": "n"},
            "devices": [{"name": "d", "basic": 1}],
        },
    }
    stored = slices.to_storage(body, "v1beta1")
    assert [e.message() for e in slices.validate(stored, None)] == [
        "spec.devices[0].basic: Invalid value: 1: must be of type object"
    ]


def test_it_answers_422_not_500_for_a_misshapen_body(kubesim_cluster: kubesim.Handle) -> None:
    namespace = create_namespace(kubesim_cluster, "val")
    body = {"metadata": {"name": "p"}, "spec": {"containers": "ctr0"}}
    with pytest.raises(urllib.error.HTTPError) as raised:
        kubesim_cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    status = json.loads(raised.value.read())
    assert raised.value.code == 422
    assert status["details"]["causes"][0]["field"] == "spec.containers"


def create_strictly(handle: kubesim.Handle, version: str, body: dict) -> int:
    """The status of a Strict create of `body` as a resource.k8s.io/`version` claim."""
    namespace = create_namespace(handle, "strict")
    path = f"/apis/resource.k8s.io/{version}/namespaces/{namespace}/resourceclaims"
    try:
        handle.admin("POST", f"{path}?fieldValidation=Strict", body)
    except urllib.error.HTTPError as error:
        assert b"allocationTimestamp" in error.read()
        return error.code
    return 201


def test_it_knows_the_fields_of_the_release_it_serves(
    kubesim_cluster: kubesim.Handle, kubesim_v1beta1_cluster: kubesim.Handle
) -> None:
    allocation = {"devices": {"results": []}, "allocationTimestamp": "2026-01-01T00:00:00Z"}
    request = {"name": "gpu", "deviceClassName": "gpu.nvidia.com"}
    body = {
        "metadata": {"name": "read-back"},
        "spec": {"devices": {"requests": [request]}},
        "status": {"allocation": allocation},
    }
    assert create_strictly(kubesim_cluster, "v1beta1", body) == 201
    assert create_strictly(kubesim_v1beta1_cluster, "v1beta1", body) == 400
