"""Helpers of the API tests: clients for each persona, a namespace and a claim of alice's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from claims.domain import observations, run_observations, services
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from tests.fixtures.portal import register_cluster

GPU = "gpu.nvidia.com"
REAL_OUTPUT = Path(__file__).resolve().parents[1] / "fixtures" / "real-gpu-output"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """schemathesis names each operation's test after it (`test_x[GET /api/v1/claims/]`) but
    gives them all the function's node id; pytest-xdist runs tests by node id, so it ran one
    operation of all of them. Each gets the id its name says."""
    for item in items:
        if hasattr(item, "operation_label") and not item.nodeid.endswith("]"):
            item._id = item.parent.id.child(item.name)  # type: ignore[union-attr]


@pytest.fixture(autouse=True)
def fresh_throttle_counts() -> None:
    # Throttle counts live in the cache; one test's requests must not slow the next one.
    cache.clear()


def token_client(user: User | None) -> APIClient:
    """A client sending a personal API token of `user` (no credentials for None)."""
    client = APIClient()
    if user is not None:
        _, secret = AuthToken.objects.create(user=user, expiry=None)
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


@pytest.fixture
def api(alice: User, bob: User, carol: User) -> Callable[[str], APIClient]:
    """api("alice") is a token client of alice; api("anonymous") has no credentials."""
    users = {"anonymous": None, "alice": alice, "bob": bob, "carol": carol}
    return lambda who: token_client(users[who])


SYNCED_FIELDS = (
    "server_version",
    "resource_versions",
    "preferred_resource_version",
    "inventory",
    "inventory_synced_at",
    "last_synced_at",
)


@pytest.fixture(scope="session")
def kubesim_synced_fields(
    django_db_setup: None, django_db_blocker: Any, kubesim_cluster: Any
) -> dict[str, Any]:
    """What a real sync of the session's kubesim finds, read once for all API tests."""
    with django_db_blocker.unblock(), transaction.atomic():
        synced = register_cluster(kubesim_cluster, name="sync-probe")
        transaction.set_rollback(True)
    return {field: getattr(synced, field) for field in SYNCED_FIELDS}


@pytest.fixture
def cluster(db: None, kubesim_cluster: Any, kubesim_synced_fields: dict[str, Any]) -> Cluster:
    """The session's kubesim as the portal knows it after a sync (without syncing again)."""
    return Cluster.objects.create(
        name="kubesim",
        kubeconfig_path=kubesim_cluster.kubeconfig,
        simulated=True,
        **kubesim_synced_fields,
    )


def namespace_with_claim(user: User, cluster: Cluster, suffix: str) -> ClaimRequest:
    ns = services.namespace_request_submit(user=user, cluster=cluster, name=f"team-{suffix}")
    return services.claim_request_submit(
        user=user, namespace_request=ns, name="train", device_class=GPU, count=1
    )


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(user=alice, cluster=cluster, name="team-a")


@pytest.fixture
def claim(alice: User, namespace: NamespaceRequest) -> ClaimRequest:
    return services.claim_request_submit(
        user=alice, namespace_request=namespace, name="train", device_class=GPU, count=1
    )


def applied_claim(owner: User, approver: User, cluster: Cluster, suffix: str) -> ClaimRequest:
    """A claim approved and applied, as the worker leaves it: waiting for a Pod to use it."""
    claim = namespace_with_claim(owner, cluster, suffix)
    services.claim_request_approve(user=approver, claim_request=claim)
    observations.claim_applying(claim_request=claim)
    observations.claim_applied(claim_request=claim, api_version="resource.k8s.io/v1", manifest={})
    return claim


def started_run(owner: User, approver: User, cluster: Cluster, suffix: str) -> VerificationRun:
    """A run whose vectorAdd container printed the real H200 output so far."""
    claim = applied_claim(owner, approver, cluster, suffix)
    run = services.verification_run_start(user=owner, claim_request=claim)
    text = (REAL_OUTPUT / "vectorAdd-H200.txt").read_text()
    lines = [(timezone.now(), line) for line in text.splitlines()]
    run_observations.run_logs_appended(run=run, container="ctr0", lines=lines)
    return run
