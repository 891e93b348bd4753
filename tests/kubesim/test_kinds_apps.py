"""The portal's own workload kinds in kubesim (kubesim/registry/kinds/apps.py): upstream's defaults
and field errors for Deployments, Jobs, Services, Ingresses and PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

import kubesim
from tests.fixtures.kubesim import create_namespace, raw_request

CONTAINER = {"name": "app", "image": "registry.example/app:1"}
LABELS = {"app": "web"}


@pytest.fixture
def namespace(kubesim_module: kubesim.Handle) -> str:
    return create_namespace(kubesim_module, "apps")


def template(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": LABELS}, "spec": {"containers": [CONTAINER], **spec}}


def post(handle: kubesim.Handle, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    response = raw_request(handle, "POST", path, body)
    return response.status, response.json()


def deployment(**spec: Any) -> dict[str, Any]:
    body = {"selector": {"matchLabels": LABELS}, "template": template(), **spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": body,
    }


def test_it_defaults_a_deployment_as_upstream(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    status, body = post(
        kubesim_module, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment()
    )
    assert status == 201, body
    spec = body["spec"]
    assert (spec["replicas"], spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (
        1,
        10,
        600,
    )
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    pod = spec["template"]["spec"]
    assert (pod["restartPolicy"], pod["dnsPolicy"], pod["terminationGracePeriodSeconds"]) == (
        "Always",
        "ClusterFirst",
        30,
    )
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"selector": {"matchLabels": {"app": "other"}}},
            'spec.template.metadata.labels: Invalid value: {"app":"web"}: '
            "`selector` does not match template `labels`",
        ),
        ({"selector": None}, "spec.selector: Required value"),
        (
            {"template": template(restartPolicy="Never")},
            'spec.template.spec.restartPolicy: Unsupported value: "Never": '
            'supported values: "Always"',
        ),
        (
            {"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}},
            "spec.strategy.rollingUpdate: Forbidden: "
            "may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            {"template": {"metadata": {"labels": LABELS}, "spec": {}}},
            "spec.template.spec.containers: Required value",
        ),
    ],
)
def test_it_refuses_a_deployment_upstream_refuses(
    kubesim_module: kubesim.Handle, namespace: str, change: dict, message: str
) -> None:
    body = deployment(**change)
    status, answer = post(kubesim_module, f"/apis/apps/v1/namespaces/{namespace}/deployments", body)
    assert status == 422
    assert answer["message"] == f'Deployment.apps "web" is invalid: {message}'


def test_it_wants_a_jobs_restart_policy_given(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"containers": [CONTAINER]}}},
    }
    status, answer = post(kubesim_module, f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    assert status == 422
    assert answer["message"] == (
        'Job.batch "once" is invalid: spec.template.spec.restartPolicy: Required value: '
        'valid values: "OnFailure", "Never"'
    )
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    status, answer = post(kubesim_module, f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    assert status == 201, answer
    assert (answer["spec"]["backoffLimit"], answer["spec"]["completions"]) == (6, 1)


def test_it_gives_a_service_a_cluster_ip_and_names_its_ports(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/services"
    ports = [{"port": 80}, {"port": 443}]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": LABELS, "ports": ports},
    }
    status, answer = post(kubesim_module, path, service)
    assert status == 422
    assert "spec.ports[0].name: Required value" in answer["message"]
    service["spec"]["ports"] = [{"port": 80}]
    status, answer = post(kubesim_module, path, service)
    assert status == 201, answer
    spec = answer["spec"]
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert (spec["type"], spec["ipFamilyPolicy"], spec["sessionAffinity"]) == (
        "ClusterIP",
        "SingleStack",
        "None",
    )


def test_it_wants_an_ingress_paths_type(kubesim_module: kubesim.Handle, namespace: str) -> None:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "web"},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": backend}]}}]},
    }
    path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses"
    status, answer = post(kubesim_module, path, ingress)
    assert status == 422
    assert answer["message"].endswith(
        "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"
    )


def test_it_takes_one_of_min_available_and_max_unavailable(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": LABELS}, "minAvailable": 1, "maxUnavailable": 1},
    }
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    status, answer = post(kubesim_module, path, budget)
    assert status == 422
    assert "minAvailable and maxUnavailable cannot be both set" in answer["message"]
