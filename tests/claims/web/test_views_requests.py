"""The namespace and claim request forms, and the claim form's live manifest preview."""

from __future__ import annotations

import html
import re

import kubernetes_validate
import pytest
import yaml
from django.contrib.auth.models import User
from django.urls import reverse

from claims.domain import observations, services
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import GPU_CLASS, client_for, htmx_client_for


def field_errors(content: str, field: str) -> str:
    """The HTML of one field's block: errors must show there, next to the field."""
    match = re.search(
        rf'<div class="field[^"]*" id="field-{field}">(.*?)</div>\s*(?=<div class="field|<button)',
        content,
        re.S,
    )
    assert match, f"no field {field} in page"
    return match.group(1)


def claim_form_data(namespace: NamespaceRequest, **overrides: object) -> dict[str, object]:
    data = {
        "namespace_request": namespace.pk,
        "name": "train-gpu",
        "device_class": GPU_CLASS,
        "count": 1,
        "selector": "",
        "purpose": "Fine-tuning",
        "submission_token": "token-1",
    }
    return {**data, **overrides}


def test_it_asks_anonymous_visitors_to_log_in_before_requesting(db: None) -> None:
    for name in ("namespace-request", "claim-request"):
        response = client_for(None).get(reverse(name))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_requests_a_namespace(alice: User, cluster: Cluster) -> None:
    data = {
        "cluster": cluster.pk,
        "name": "alice-ml",
        "purpose": "Training",
        "submission_token": "t",
    }
    response = client_for(alice).post(reverse("namespace-request"), data)
    assert response.status_code == 302
    ns = NamespaceRequest.objects.get()
    assert (ns.name, ns.owner, ns.state) == ("alice-ml", alice, "pending")


def test_it_explains_a_bad_namespace_name_next_to_the_field(alice: User, cluster: Cluster) -> None:
    data = {"cluster": cluster.pk, "name": "Alice_ML", "submission_token": "t"}
    response = client_for(alice).post(reverse("namespace-request"), data)
    assert response.status_code == 200
    assert "lower-case" in field_errors(response.content.decode(), "name")
    assert not NamespaceRequest.objects.exists()


def test_it_refuses_a_duplicate_namespace_next_to_the_field(
    namespace: NamespaceRequest, bob: User, cluster: Cluster
) -> None:
    data = {"cluster": cluster.pk, "name": "alice-ml", "submission_token": "t"}
    response = client_for(bob).post(reverse("namespace-request"), data)
    assert "already requested" in field_errors(response.content.decode(), "name")


def test_it_recognises_a_double_submitted_namespace_form(alice: User, cluster: Cluster) -> None:
    client = client_for(alice)
    data = {"cluster": cluster.pk, "name": "alice-ml", "submission_token": "same"}
    client.post(reverse("namespace-request"), data)
    response = client.post(reverse("namespace-request"), data, follow=True)
    assert "You already submitted this namespace request." in response.content.decode()
    assert NamespaceRequest.objects.count() == 1


def test_it_lists_device_classes_from_the_cluster_inventory(namespace: NamespaceRequest) -> None:
    content = client_for(namespace.owner).get(reverse("claim-request")).content.decode()
    assert "gpu.nvidia.com (2 devices on kubesim)" in content
    assert "mig.nvidia.com (0 devices on kubesim)" in content
    assert "alice-ml on kubesim" in content


def test_it_offers_only_my_namespaces(namespace: NamespaceRequest, bob: User) -> None:
    content = client_for(bob).get(reverse("claim-request")).content.decode()
    assert "alice-ml" not in content
    assert "You have no approved namespace yet" in content


def test_it_previews_the_manifest_when_the_form_opens(namespace: NamespaceRequest) -> None:
    content = client_for(namespace.owner).get(reverse("claim-request")).content.decode()
    assert 'id="manifest-preview"' in content
    assert "Enter a claim name" in content


def test_it_requests_a_claim_and_shows_its_page(namespace: NamespaceRequest) -> None:
    client = client_for(namespace.owner)
    response = client.post(reverse("claim-request"), claim_form_data(namespace))
    claim = ClaimRequest.objects.get()
    assert response["Location"] == reverse("claim", args=[claim.pk])
    assert (claim.name, claim.count, claim.state) == ("train-gpu", 1, "pending")


def test_it_explains_bad_claim_input_next_to_each_field(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, name="-bad-", device_class="tpu.example.com", count=0)
    response = client_for(namespace.owner).post(reverse("claim-request"), data)
    assert response.status_code == 200
    content = response.content.decode()
    assert "Start with a letter or a digit." in field_errors(content, "name")
    assert "is not a device class of kubesim" in field_errors(content, "device_class")
    assert not ClaimRequest.objects.exists()


def test_it_refuses_zero_devices(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, count=0)
    content = client_for(namespace.owner).post(reverse("claim-request"), data).content.decode()
    assert "Ask for at least 1 device." in field_errors(content, "count")


def test_it_refuses_more_devices_than_the_cluster_has(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, count=3)
    content = client_for(namespace.owner).post(reverse("claim-request"), data).content.decode()
    assert "ask for at most 2" in field_errors(content, "count")


def test_it_explains_a_bad_cel_selector(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, selector="device.attributes[")
    content = client_for(namespace.owner).post(reverse("claim-request"), data).content.decode()
    assert "Not a valid CEL expression" in field_errors(content, "selector")


def test_it_refuses_a_duplicate_claim_name(claim: ClaimRequest) -> None:
    data = claim_form_data(claim.namespace_request, submission_token="another")
    content = client_for(claim.owner).post(reverse("claim-request"), data).content.decode()
    assert "already exists in namespace alice-ml" in field_errors(content, "name")


def test_it_sends_a_double_submitted_claim_form_to_the_first_claim(
    namespace: NamespaceRequest,
) -> None:
    client = client_for(namespace.owner)
    client.post(reverse("claim-request"), claim_form_data(namespace))
    response = client.post(reverse("claim-request"), claim_form_data(namespace), follow=True)
    assert "You already submitted this claim request" in response.content.decode()
    assert ClaimRequest.objects.count() == 1


def test_it_refuses_a_namespace_of_someone_else(namespace: NamespaceRequest, bob: User) -> None:
    response = client_for(bob).post(reverse("claim-request"), claim_form_data(namespace))
    assert response.status_code == 200
    assert "Select a valid choice" in field_errors(response.content.decode(), "namespace_request")
    assert not ClaimRequest.objects.exists()


def test_it_previews_the_v1_manifest_as_fields_change(namespace: NamespaceRequest) -> None:
    data = claim_form_data(
        namespace, count=2, selector="device.attributes['gpu.nvidia.com'].type == 'gpu'"
    )
    response = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data)
    content = response.content.decode()
    assert content.lstrip().startswith('<div id="manifest-preview">')
    assert "apiVersion: resource.k8s.io/v1\n" in content
    assert "exactly:" in content
    assert "count: 2" in content
    assert "namespace: alice-ml" in content
    assert "<html" not in content


def test_it_previews_v1beta1_for_a_cluster_that_prefers_it(
    namespace: NamespaceRequest, cluster: Cluster
) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(
        preferred_resource_version="v1beta1", resource_versions=["v1beta1"]
    )
    data = claim_form_data(namespace, all_devices="on")
    content = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data).content.decode()
    assert "apiVersion: resource.k8s.io/v1beta1" in content
    assert "exactly:" not in content
    assert "allocationMode: All" in content


def test_it_previews_without_crashing_on_garbage(namespace: NamespaceRequest) -> None:
    data = claim_form_data(namespace, namespace_request="x", count="many")
    response = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data)
    assert response.status_code == 200
    assert "Choose a namespace" in response.content.decode()


def previewed_manifest(content: str) -> dict:
    yaml_text = re.search(r'<pre id="manifest-yaml">(.*?)</pre>', content, re.S).group(1)
    return yaml.safe_load(html.unescape(yaml_text))


def test_it_previews_a_v1_manifest_the_1_34_schema_accepts(namespace: NamespaceRequest) -> None:
    selector = "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"
    data = claim_form_data(namespace, count=2, selector=selector)
    content = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data).content
    manifest = previewed_manifest(content.decode())
    assert manifest["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {"cel": {"expression": selector}}
    ]
    kubernetes_validate.validate(manifest, "1.34", strict=True)


def test_it_previews_a_v1beta1_manifest_the_1_33_schema_accepts(
    namespace: NamespaceRequest, cluster: Cluster
) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(preferred_resource_version="v1beta1")
    data = claim_form_data(namespace)
    content = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data).content
    manifest = previewed_manifest(content.decode())
    assert manifest["apiVersion"] == "resource.k8s.io/v1beta1"
    kubernetes_validate.validate(manifest, "1.33", strict=True)


def test_it_lets_the_owner_withdraw_a_pending_namespace(claim: ClaimRequest) -> None:
    ns = claim.namespace_request
    client = client_for(ns.owner)
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert reverse("namespace-delete", args=[ns.pk]) in dashboard
    url = reverse("namespace-delete", args=[ns.pk])
    response = client.post(url, {"confirmed": "yes"}, follow=True)
    assert "Namespace alice-ml: Deleting it" in response.content.decode()
    ns.refresh_from_db()
    claim.refresh_from_db()
    assert (ns.state, claim.state) == ("deleted", "rejected")


def test_it_hides_namespace_actions_from_others(namespace: NamespaceRequest, bob: User) -> None:
    response = client_for(bob).post(reverse("namespace-delete", args=[namespace.pk]))
    assert response.status_code == 404
    namespace.refresh_from_db()
    assert namespace.state == "pending"


def test_it_retries_a_refused_namespace(namespace: NamespaceRequest, charlie: User) -> None:
    services.namespace_request_approve(user=charlie, namespace_request=namespace)
    observations.namespace_failed(namespace_request=namespace, message="quota exceeded")
    client = client_for(namespace.owner)
    content = client.get(reverse("dashboard")).content.decode()
    assert "quota exceeded" in content
    assert reverse("namespace-retry", args=[namespace.pk]) in content
    client.post(reverse("namespace-retry", args=[namespace.pk]))
    namespace.refresh_from_db()
    assert namespace.state == "approved"


def test_it_explains_why_a_namespace_cannot_be_retried(namespace: NamespaceRequest) -> None:
    url = reverse("namespace-retry", args=[namespace.pk])
    response = client_for(namespace.owner).post(url, follow=True)
    assert "Namespace alice-ml: alice-ml is already pending." in response.content.decode()


MALFORMED_NAMESPACE_FIELDS = [
    ("cluster", "abc"),
    ("cluster", "99999"),
    ("cluster", ""),
    ("name", ""),
    ("name", "x" * 500),
    ("name", "bad\x00name"),
    ("name", "Ünïcode"),
    ("purpose", "nul\x00byte"),
]


@pytest.mark.parametrize(("field", "value"), MALFORMED_NAMESPACE_FIELDS)
def test_it_answers_a_malformed_namespace_post_next_to_the_field(
    alice: User, cluster: Cluster, field: str, value: str
) -> None:
    data = {"cluster": cluster.pk, "name": "fine-name", "purpose": "", field: value}
    response = client_for(alice).post(reverse("namespace-request"), data)
    assert response.status_code == 200
    assert 'class="errorlist' in field_errors(response.content.decode(), field)
    assert not NamespaceRequest.objects.exists()


MALFORMED_CLAIM_FIELDS = [
    ("namespace_request", "abc"),
    ("namespace_request", "-1"),
    ("name", ""),
    ("name", "x" * 500),
    ("name", "UPPER_case"),
    ("name", "nul\x00"),
    ("device_class", ""),
    ("device_class", "nope.example.com"),
    ("count", "abc"),
    ("count", "-5"),
    ("count", "1e3"),
    ("count", "99999999999999999999999"),
    ("selector", "((("),
    ("selector", "device.attributes\x00"),
    ("purpose", "nul\x00"),
]


@pytest.mark.parametrize(("field", "value"), MALFORMED_CLAIM_FIELDS)
def test_it_answers_a_malformed_claim_post_next_to_the_field(
    namespace: NamespaceRequest, field: str, value: str
) -> None:
    data = claim_form_data(namespace, **{field: value})
    response = client_for(namespace.owner).post(reverse("claim-request"), data)
    assert response.status_code == 200
    assert 'class="errorlist' in field_errors(response.content.decode(), field)
    assert not ClaimRequest.objects.exists()


@pytest.mark.parametrize(("field", "value"), MALFORMED_CLAIM_FIELDS)
def test_it_previews_malformed_claim_input_without_an_error_page(
    namespace: NamespaceRequest, field: str, value: str
) -> None:
    data = claim_form_data(namespace, **{field: value})
    response = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data)
    assert response.status_code == 200
    assert 'id="manifest-preview"' in response.content.decode()
