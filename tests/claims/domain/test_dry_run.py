"""The server dry-run at submit: every manifest goes to kubesim with dryRun=All before the
request enters the approval queue; a refusal is shown in the server's words and nothing is
saved; an unreachable cluster does not hold the request back (it carries a note)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

import kubesim
from claims.clusters import gateways
from claims.clusters import registry as cluster_registry
from claims.domain import dry_run, services
from claims.kube.errors import PermanentKubeError
from claims.kube.manifests import resource_claim_manifest
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from tests.claims.web.test_views_requests import claim_form_data, field_errors
from tests.fixtures.portal import granted_namespace, register_cluster

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


def ask_for_namespace(**fields: Any) -> NamespaceRequest:
    """The submit the pages and the API make: the cluster dry-runs what it will apply."""
    return services.namespace_request_submit(ask_cluster=True, **fields)


def ask_for_claim(**fields: Any) -> ClaimRequest:
    return services.claim_request_submit(ask_cluster=True, **fields)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def active(cluster: Cluster, alice: User, carol: User) -> NamespaceRequest:
    return granted_namespace(cluster, alice, carol, unique("dry"))


@pytest.fixture
def web(alice: User) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def stopped_cluster(db: None) -> Iterator[Cluster]:
    """A cluster the portal knows (inventory synced) whose API server has gone away."""
    handle = kubesim.start(speed=50)
    try:
        cluster = register_cluster(handle, name="gone")
    finally:
        handle.stop()
    gateways.forget_gateways()
    yield cluster
    gateways.forget_gateways()


def on_cluster(handle: kubesim.Handle, ns: str, name: str) -> bool:
    claims = handle.admin("GET", CLAIMS.format(ns=ns))["items"]
    return any(item["metadata"]["name"] == name for item in claims)


def test_a_claim_the_cluster_accepts_is_queued_and_nothing_is_created_there(
    web: Client, active: NamespaceRequest, kubesim_cluster: kubesim.Handle
) -> None:
    response = web.post(reverse("claim-request"), claim_form_data(active, name="checked"))

    assert response.status_code == 302
    claim = ClaimRequest.objects.get(namespace_request=active, name="checked")
    assert (claim.state, claim.dry_run_note) == ("pending", "")
    assert not on_cluster(kubesim_cluster, active.name, "checked")


def test_it_names_a_claim_name_the_cluster_already_has_on_the_name_field(
    web: Client, active: NamespaceRequest, kubesim_cluster: kubesim.Handle
) -> None:
    theirs = {"metadata": {"name": "taken"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}  # fmt: skip
    kubesim_cluster.admin("POST", CLAIMS.format(ns=active.name), theirs)

    response = web.post(reverse("claim-request"), claim_form_data(active, name="taken"))

    assert response.status_code == 200
    errors = field_errors(response.content.decode(), "name")
    assert (
        f"A claim named taken already exists in namespace {active.name}; choose another name."
    ) in errors
    assert "resourceclaims.resource.k8s.io" not in response.content.decode()
    assert not ClaimRequest.objects.filter(name="taken").exists()


def test_a_namespace_that_exists_on_the_cluster_is_refused_at_submit(
    web: Client, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    name = unique("theirs")
    kubesim_cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": name}})

    data = {"cluster": cluster.pk, "name": name, "submission_token": "t1"}
    response = web.post(reverse("namespace-request"), data)

    assert response.status_code == 200
    errors = field_errors(response.content.decode(), "name")
    assert f"A namespace named {name} already exists on {cluster}; choose another name." in errors
    assert not NamespaceRequest.objects.filter(name=name).exists()


def test_a_namespace_the_cluster_accepts_is_queued_and_not_created(
    web: Client, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    name = unique("mine")

    response = web.post(reverse("namespace-request"), {"cluster": cluster.pk, "name": name})

    assert response.status_code == 302
    ns = NamespaceRequest.objects.get(name=name)
    assert (ns.state, ns.dry_run_note) == ("pending", "")
    names = [
        n["metadata"]["name"] for n in kubesim_cluster.admin("GET", "/api/v1/namespaces")["items"]
    ]
    assert name not in names


def test_a_claim_in_a_namespace_not_created_yet_is_checked_all_the_same(
    web: Client, alice: User, cluster: Cluster
) -> None:
    ns = services.namespace_request_submit(
        ask_cluster=True, user=alice, cluster=cluster, name=unique("later")
    )

    manifest = dry_run.claim_manifest(
        ClaimRequest(namespace_request=ns, name="c", device_class="x")
    )
    response = web.post(reverse("claim-request"), claim_form_data(ns, name="early"))

    assert manifest["metadata"]["namespace"] == dry_run.STAND_IN_NAMESPACE
    assert response.status_code == 302
    assert ClaimRequest.objects.get(name="early").dry_run_note == ""


def test_the_servers_validation_runs_on_the_dry_run(cluster: Cluster) -> None:
    manifest = resource_claim_manifest(
        api_version="v1", namespace="default", name="bad-cel", device_class="gpu.nvidia.com",
        count=1, selector="device.attributes['gpu.nvidia.com'].memory >", labels={},
    )  # fmt: skip

    with pytest.raises(PermanentKubeError) as refused:
        dry_run.check(cluster, manifest)

    assert refused.value.status == 422
    assert "selectors[0].cel.expression: Invalid value" in refused.value.message
    assert "compilation failed" in refused.value.message


def test_an_unreachable_cluster_does_not_hold_a_request_back(
    alice: User, stopped_cluster: Cluster
) -> None:
    ns = services.namespace_request_submit(
        ask_cluster=True, user=alice, cluster=stopped_cluster, name=unique("off")
    )
    claim = services.claim_request_submit(
        ask_cluster=True,
        user=alice,
        namespace_request=ns,
        name="offline",
        device_class="gpu.nvidia.com",
    )

    for request in (ns, claim):
        request.refresh_from_db()
        assert request.state == "pending"
        assert request.dry_run_note.startswith("gone could not check this request")


def test_the_approver_sees_that_the_check_could_not_run(
    alice: User, carol: User, stopped_cluster: Cluster
) -> None:
    ns = services.namespace_request_submit(
        ask_cluster=True, user=alice, cluster=stopped_cluster, name=unique("off")
    )
    approver = Client()
    approver.force_login(carol)

    page = approver.get(reverse("approvals")).content.decode()

    assert f'id="dry-run-note-namespace-approve-{ns.pk}"' in page
    assert "could not check this request before it was queued" in page


def test_a_claim_is_checked_in_the_version_the_cluster_serves(
    alice: User, v1beta1_cluster: Cluster, kubesim_v1beta1_cluster: kubesim.Handle
) -> None:
    ns = services.namespace_request_submit(
        ask_cluster=True, user=alice, cluster=v1beta1_cluster, name=unique("old")
    )
    claim = ClaimRequest(namespace_request=ns, name="old-gpu", device_class="gpu.nvidia.com")

    submitted = services.claim_request_submit(
        ask_cluster=True,
        user=alice,
        namespace_request=ns,
        name="old-gpu",
        device_class="gpu.nvidia.com",
        count=2,
    )

    assert dry_run.claim_manifest(claim)["apiVersion"] == "resource.k8s.io/v1beta1"
    assert (submitted.state, submitted.dry_run_note) == ("pending", "")
    # The version matters: v1 is not served there, so a v1 manifest could not be checked.
    v1 = dry_run.claim_manifest(claim) | {"apiVersion": "resource.k8s.io/v1"}
    assert dry_run.check(v1beta1_cluster, v1).startswith("seed-platform could not check")


def test_a_claim_of_the_same_name_in_the_stand_in_namespace_is_no_refusal(
    web: Client, alice: User, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    ns = services.namespace_request_submit(
        ask_cluster=True, user=alice, cluster=cluster, name=unique("later")
    )
    name = unique("twin")
    theirs = {"metadata": {"name": name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}  # fmt: skip
    kubesim_cluster.admin("POST", CLAIMS.format(ns=dry_run.STAND_IN_NAMESPACE), theirs)

    response = web.post(reverse("claim-request"), claim_form_data(ns, name=name))

    assert response.status_code == 302
    claim = ClaimRequest.objects.get(namespace_request=ns, name=name)
    assert (claim.state, claim.dry_run_note) == ("pending", "")


def test_the_stand_in_namespace_still_refuses_what_the_server_does_not_validate(
    alice: User, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    ns = services.namespace_request_submit(
        ask_cluster=True, user=alice, cluster=cluster, name=unique("later")
    )
    theirs = {"metadata": {"name": "bad-twin"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}  # fmt: skip
    kubesim_cluster.admin("POST", CLAIMS.format(ns=dry_run.STAND_IN_NAMESPACE), theirs)

    with pytest.raises(ValidationError) as refused:
        ask_for_claim(
            user=alice, namespace_request=ns, name="bad-twin", device_class="gpu.nvidia.com",
            selector="device.attributes['gpu.nvidia.com'].memory >",
        )  # fmt: skip

    assert "Not a valid CEL expression at line 1, column 45" in str(refused.value)


def test_a_cluster_already_marked_unreachable_is_not_asked(
    alice: User, active: NamespaceRequest, kubesim_cluster: kubesim.Handle
) -> None:
    theirs = {"metadata": {"name": "taken"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}  # fmt: skip
    kubesim_cluster.admin("POST", CLAIMS.format(ns=active.name), theirs)
    cluster_registry.mark_unreachable(active.cluster_id, "no answer in time (timed out)")
    active.refresh_from_db()
    kubesim_cluster.admin("POST", "/_kubesim/counters/reset")

    claim = services.claim_request_submit(
        ask_cluster=True,
        user=alice,
        namespace_request=active,
        name="taken",
        device_class="gpu.nvidia.com",
    )

    assert kubesim_cluster.admin("GET", "/_kubesim/counters")["requests"] == {}
    # The server would refuse the name: it was not asked, and says so.
    assert claim.state == "pending"
    assert claim.dry_run_note.startswith(f"{active.cluster} could not check this request")
    assert "has been unreachable since " in claim.dry_run_note
