"""Slow deletion end to end: a real Celery worker and beat, kubesim at human speed (a Pod runs
about 5 s and is stopped gracefully), so the portal must wait for the cluster."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User

import kubesim
from claims.domain import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from tests.fixtures.portal import state_of, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_beat_process"),
]
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


def cluster_claim(handle: kubesim.Handle, claim: ClaimRequest) -> dict | None:
    items = handle.admin("GET", CLAIMS.format(ns=claim.namespace))["items"]
    return next((i for i in items if i["metadata"]["name"] == claim.name), None)


def namespace_names(handle: kubesim.Handle) -> list[str]:
    return [n["metadata"]["name"] for n in handle.admin("GET", "/api/v1/namespaces")["items"]]


def test_release_and_delete_wait_for_the_cluster(
    alice: User, carol: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    name = f"slow-{uuid.uuid4().hex[:6]}"
    ns = services.namespace_request_submit(user=alice, cluster=slow_cluster, name=name)
    values = {"name": "train", "device_class": "gpu.nvidia.com", "count": 1}
    claim = services.claim_request_submit(user=alice, namespace_request=ns, **values)
    services.claim_request_approve(user=carol, claim_request=claim)
    wait_until(lambda: state_of(claim) == "waiting", timeout=30)
    run = services.verification_run_start(user=alice, claim_request=claim)
    wait_until(lambda: state_of(run) == "running", timeout=30)  # its sample runs 3 s

    services.claim_request_release(user=alice, claim_request=claim)
    # The worker deleted it; the finalizer holds it while the run's Pod terminates.
    wait_until(lambda: (cluster_claim(slow_kubesim, claim) or {}).get("metadata", {}).get(
        "deletionTimestamp"), timeout=30)  # fmt: skip
    held = ClaimRequest.objects.get(pk=claim.pk)
    assert (held.state, held.cleaned_up_at) == ("released", None)
    wait_until(lambda: cluster_claim(slow_kubesim, claim) is None, timeout=60)
    wait_until(lambda: ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at, timeout=60)

    ns = NamespaceRequest.objects.get(pk=ns.pk)
    services.namespace_request_delete(user=alice, namespace_request=ns)
    wait_until(lambda: state_of(ns) == "deleting", timeout=30)
    assert name in namespace_names(slow_kubesim)  # the namespace controller waits 5 s first
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleting"
    wait_until(lambda: name not in namespace_names(slow_kubesim), timeout=60)
    wait_until(lambda: state_of(ns) == "deleted", timeout=60)
