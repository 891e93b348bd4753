"""CEL selectors are compiled and type-checked as kube-apiserver 1.34 does (recordings in 02)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fixtures.kubesim import api_client, create_namespace

RECORDINGS = Path(__file__).resolve().parent / "data" / "apiserver-1.34"
FIELD = "spec.devices.requests[0].exactly.selectors[0].cel.expression"
ACCEPTED = [
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
    "device.attributes['compute-domain.nvidia.com'].id == 0",
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    "device.attributes['gpu.nvidia.com'].nosuch == 'x'",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0",
    "cel.bind(g, device.attributes['gpu.nvidia.com'], g.type == 'gpu' && has(g.uuid))",
    "device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Blackwell']",
    "device.attributes['gpu.nvidia.com'].addressingMode",
]
# (expression, detail after `Invalid value: "<expression>": `), beyond the recorded three.
REFUSED = [
    (
        "device.driver == 1",
        "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' "
        "applied to '(string, int)'\n | device.driver == 1\n | ..............^",
    ),
    (
        "gpu.type == 'gpu'",
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'gpu' (in container '')"
        "\n | gpu.type == 'gpu'\n | ^",
    ),
    (
        "device.allowMultipleAllocations",
        "compilation failed: ERROR: <input>:1:7: undefined field 'allowMultipleAllocations'"
        "\n | device.allowMultipleAllocations\n | ......^",
    ),
    (
        "device.capacity['gpu.nvidia.com'].memory",
        "must evaluate to bool or the unknown type, not kubernetes.Quantity",
    ),
]


def recorded(step_id: str) -> dict[str, Any]:
    scenario = json.loads((RECORDINGS / "02-validation-errors.json").read_text())
    (step,) = [step for step in scenario["steps"] if step["id"] == step_id]
    return step


@pytest.fixture(scope="module")
def api(kubesim_cluster):
    return api_client(kubesim_cluster)


@pytest.fixture
def namespace(kubesim_cluster) -> str:
    return create_namespace(kubesim_cluster, "cel")


def refusal(create: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as raised:
        create(*args)
    assert raised.value.status == 422
    return json.loads(raised.value.body)


def claim_v1(name: str, expression: str) -> dict[str, Any]:
    exactly = {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": expression}}],
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def expected_status(name: str, field: str, expression: str, detail: str, kind: str) -> dict:
    message = f"Invalid value: {json.dumps(expression)}: {detail}"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{kind}.resource.k8s.io "{name}" is invalid: {field}: {message}',
        "reason": "Invalid",
        "details": {
            "name": name,
            "group": "resource.k8s.io",
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}],
        },
        "code": 422,
    }


@pytest.mark.parametrize(
    "step_id", ["v1-cel-syntax-error", "v1-cel-undefined-field", "v1-cel-returns-string"]
)
def test_it_refuses_bad_selectors_with_the_recorded_answer(api, namespace, step_id) -> None:
    step = recorded(step_id)
    resource = client.ResourceV1Api(api)
    body = refusal(resource.create_namespaced_resource_claim, namespace, step["request"]["body"])
    assert body == step["response"]["body"]


def test_it_accepts_an_unknown_attribute_name_as_recorded(api, namespace) -> None:
    step = recorded("v1-cel-unknown-attribute-is-valid")
    created = client.ResourceV1Api(api).create_namespaced_resource_claim(
        namespace, step["request"]["body"]
    )
    assert created.metadata.name == step["response"]["body"]["metadata"]["name"]


@pytest.mark.parametrize("expression", ACCEPTED)
def test_it_accepts_the_selectors_drivers_and_users_write(api, namespace, expression) -> None:
    resource = client.ResourceV1Api(api)
    resource.create_namespaced_resource_claim(namespace, claim_v1("ok", expression))
    resource.delete_namespaced_resource_claim("ok", namespace)


@pytest.mark.parametrize(("expression", "detail"), REFUSED)
def test_it_refuses_type_errors_in_cel_go_words(api, namespace, expression, detail) -> None:
    resource = client.ResourceV1Api(api)
    body = refusal(
        resource.create_namespaced_resource_claim, namespace, claim_v1("bad", expression)
    )
    assert body == expected_status("bad", FIELD, expression, detail, "ResourceClaim")


UNDEFINED = "device.atributes['gpu.nvidia.com'].type == 'gpu'"
UNDEFINED_DETAIL = (
    "compilation failed: ERROR: <input>:1:7: undefined field 'atributes'\n"
    f" | {UNDEFINED}\n | ......^"
)


def test_it_checks_v1beta1_claims_on_their_internal_paths(api, namespace) -> None:
    request = {
        "name": "gpu",
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": UNDEFINED}}],
    }
    manifest = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "bad-b1"},
        "spec": {"devices": {"requests": [request]}},
    }
    resource = client.ResourceV1beta1Api(api)
    body = refusal(resource.create_namespaced_resource_claim, namespace, manifest)
    assert body == expected_status("bad-b1", FIELD, UNDEFINED, UNDEFINED_DETAIL, "ResourceClaim")


def test_it_checks_templates_and_subrequests(api, namespace) -> None:
    selectors = [{"cel": {"expression": UNDEFINED}}]
    sub = {"name": "big", "deviceClassName": "gpu.nvidia.com", "selectors": selectors}
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tpl"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [sub]}]}}},
    }
    resource = client.ResourceV1Api(api)
    body = refusal(resource.create_namespaced_resource_claim_template, namespace, manifest)
    field = "spec.spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expression"
    expected = expected_status("tpl", field, UNDEFINED, UNDEFINED_DETAIL, "ResourceClaimTemplate")
    assert body == expected


def test_it_checks_device_class_selectors(api) -> None:
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "bad.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver"}}]},
    }
    body = refusal(client.ResourceV1Api(api).create_device_class, manifest)
    detail = "must evaluate to bool or the unknown type, not string"
    field = "spec.selectors[0].cel.expression"
    assert body == expected_status("bad.example.com", field, "device.driver", detail, "DeviceClass")


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary")
def test_kubectl_shows_the_refusal(kubesim_cluster, namespace, tmp_path) -> None:
    manifest = claim_v1("bad-cel-field", UNDEFINED)
    manifest["metadata"]["namespace"] = namespace
    env = {"HOME": str(tmp_path), "KUBECONFIG": kubesim_cluster.kubeconfig, "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        ["kubectl", "create", "-f", "-"],
        input=json.dumps(manifest),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'The ResourceClaim "bad-cel-field" is invalid: '
        f'{FIELD}: Invalid value: "{UNDEFINED}": {UNDEFINED_DETAIL}'
    )
