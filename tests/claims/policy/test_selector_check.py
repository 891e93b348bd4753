"""The portal checks a CEL selector as the API server does, and counts the devices it matches."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.urls import reverse
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from rest_framework.test import APIClient

import dracel
from claims.domain import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.policy.validation import selector_match, selector_problem
from claims.read import approval_queue
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import GPU_CLASS, client_for, htmx_client_for
from tests.claims.web.test_views_requests import claim_form_data, field_errors
from tests.fixtures.kubesim import api_client, create_namespace

UNDEFINED = "device.atributes['gpu.nvidia.com'].type == 'gpu'"
H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
A100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"
CHECKED = [
    (UNDEFINED, "line 1, column 7: undefined field 'atributes'"),
    ("device.driver", "it must be a condition (true or false), not a string"),
    ("device.driver ==", "line 1, column 17: it ends too soon: a value is missing at the end"),
    ("device.driver == 1", "found no matching overload for '==' applied to '(string, int)'"),
]


@pytest.mark.parametrize(("selector", "words"), CHECKED)
def test_it_explains_a_selector_shortly_where_the_api_server_would(
    selector: str, words: str
) -> None:
    problem = selector_problem(selector)
    assert problem is not None
    assert problem.startswith("Not a valid CEL expression")
    assert words in problem


def test_it_points_at_the_undefined_field_like_the_api_server() -> None:
    assert selector_problem(UNDEFINED) == (
        "Not a valid CEL expression at line 1, column 7: undefined field 'atributes'."
    )
    assert dracel.compile_error(UNDEFINED) == (
        "compilation failed: ERROR: <input>:1:7: undefined field "
        f"'atributes'\n | {UNDEFINED}\n | ......^"
    )


@pytest.mark.parametrize(
    ("selector", "matched"),
    [
        (H100, 2),
        (A100, 0),
        ("device.attributes['gpu.nvidia.com'].nosuch == 'x'", 0),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", 2),
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80Gi'))", 0),
        (
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability"
            ".compareTo(semver('8.0.0')) > 0",
            2,
        ),
        ("device.attributes['gpu.nvidia.com'].uuid.endsWith('dddd')", 2),
    ],
)
def test_it_counts_the_devices_of_the_class_a_selector_matches(
    cluster: Cluster, selector: str, matched: int
) -> None:
    match = selector_match(cluster, GPU_CLASS, selector)
    assert match is not None
    assert (match.matched, match.total) == (matched, 2)
    assert str(match) == f"matches {matched} of 2 devices of class gpu.nvidia.com"


def test_it_counts_nothing_for_a_refused_selector_or_an_unknown_class(cluster: Cluster) -> None:
    assert selector_match(cluster, GPU_CLASS, UNDEFINED) is None
    assert selector_match(cluster, "no.such.class", H100) is None
    assert selector_match(cluster, GPU_CLASS, "") is None


def test_the_form_puts_the_api_servers_words_on_the_selector(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, selector=UNDEFINED)
    content = client_for(namespace.owner).post(reverse("claim-request"), data).content.decode()
    errors = html.unescape(field_errors(content, "selector"))
    assert "at line 1, column 7: undefined field 'atributes'." in errors
    assert ClaimRequest.objects.count() == 0


def test_the_form_refuses_a_selector_no_device_matches(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, selector=A100)
    content = client_for(namespace.owner).post(reverse("claim-request"), data).content.decode()
    errors = html.unescape(field_errors(content, "selector"))
    assert "No device in the cluster matches this selector" in errors
    assert "matches 0 of 2 devices of class gpu.nvidia.com on kubesim" in errors
    assert ClaimRequest.objects.count() == 0


def preview(namespace: NamespaceRequest, selector: str) -> str:
    data = claim_form_data(namespace, selector=selector)
    response = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data)
    return html.unescape(response.content.decode())


def test_the_preview_says_how_many_devices_match(namespace: NamespaceRequest) -> None:
    content = preview(namespace, H100)
    assert (
        "Can be satisfied: up to 2 devices of class gpu.nvidia.com matching the selector on "
        "one node."
    ) in content
    content = preview(namespace, A100)
    assert (
        "Cannot be satisfied: no device of class gpu.nvidia.com matches the model, memory, "
        "MIG profile or selector."
    ) in content


def test_the_preview_shows_why_the_cluster_would_refuse_the_selector(
    namespace: NamespaceRequest,
) -> None:
    content = preview(namespace, UNDEFINED)
    assert 'id="selector-check"' in content
    assert "Not a valid CEL expression at line 1, column 7: undefined field 'atributes'." in (
        content
    )
    assert "Not a valid CEL" not in preview(namespace, "")


def post_claim(user: User, namespace: NamespaceRequest, selector: str) -> tuple[int, dict]:
    api = APIClient()
    api.force_authenticate(user)
    body = {
        "namespace_request": namespace.pk,
        "name": "train",
        "device_class": GPU_CLASS,
        "selector": selector,
    }
    response = api.post("/api/v1/claims/", body, format="json")
    return response.status_code, response.json()


def test_the_api_answers_a_field_error_in_the_api_servers_words(
    namespace: NamespaceRequest,
) -> None:
    status, body = post_claim(namespace.owner, namespace, "device.driver")
    assert status == 400
    assert body["selector"] == [
        "Not a valid CEL expression: it must be a condition (true or false), not a string."
    ]
    status, body = post_claim(namespace.owner, namespace, A100)
    assert status == 400
    assert body["selector"][0].startswith("No device in the cluster matches this selector")
    assert ClaimRequest.objects.count() == 0
    assert post_claim(namespace.owner, namespace, H100)[0] == 201


def test_a_claim_with_a_bad_selector_never_reaches_an_approver(
    namespace: NamespaceRequest, charlie: User
) -> None:
    with pytest.raises(ValidationError) as raised:
        services.claim_request_submit(
            user=namespace.owner,
            namespace_request=namespace,
            name="typo",
            device_class=GPU_CLASS,
            selector=UNDEFINED,
        )
    assert "undefined field 'atributes'" in raised.value.message_dict["selector"][0]
    assert not ClaimRequest.objects.exists()
    assert not approval_queue.approval_queue(user=charlie)["claims"].exists()


@pytest.mark.parametrize(
    "selector", [UNDEFINED, "device.driver", "device.driver ==", H100, A100, "device.x == 1"]
)
def test_the_portal_and_kubesim_agree_on_every_selector(kubesim_cluster, selector: str) -> None:
    namespace = create_namespace(kubesim_cluster, "agree")
    exactly = {"deviceClassName": GPU_CLASS, "selectors": [{"cel": {"expression": selector}}]}
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "agree"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    resource = client.ResourceV1Api(api_client(kubesim_cluster))
    try:
        resource.create_namespaced_resource_claim(namespace, manifest)
        refused = None
    except ApiException as error:
        assert error.status == 422
        refused = error
    problem = selector_problem(selector)
    assert (problem is None) == (refused is None)
    if problem is not None and refused is not None:
        (cause,) = json.loads(refused.body)["details"]["causes"]
        assert cause["message"].endswith(str(dracel.compile_error(selector)))
        # The portal's short words point where the server's do.
        where = re.search(r"<input>:(\d+):(\d+):", cause["message"])
        if where:
            assert f"at line {where[1]}, column {where[2]}: " in problem
