"""/healthz and /readyz (portal/health.py): real PostgreSQL and Redis, no login, and answered
to a kubelet's probe (a Pod's address over plain HTTP) even under production settings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from claims.models import Cluster
from tests.claims.worker.test_cluster_loop import run_follower
from tests.fixtures.portal import wait_until

PROBE = {"HTTP_HOST": "10.1.2.3:8000"}  # what the kubelet sends: the Pod's IP, plain HTTP


@pytest.fixture
def production(settings: Any) -> Any:
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["portal.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    return settings


def followed(name: str) -> Cluster:
    until = timezone.now() + timedelta(seconds=15)
    return Cluster.objects.create(name=name, follower="host:1:2", follower_lease_until=until)


def test_it_answers_healthz_without_touching_the_database(client: Client, production: Any) -> None:
    # No `db` fixture: pytest-django fails any test that queries the database.
    response = client.get("/healthz", **PROBE)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_it_is_ready_with_database_broker_and_every_cluster_followed(
    db: None, client: Client, production: Any
) -> None:
    followed("east")
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["broker"] == {"ok": True}
    assert body["checks"]["clusters"] == {"east": {"ok": True, "follower": "host:1:2"}}


def test_it_is_not_ready_while_a_cluster_has_no_fresh_follower(
    db: None, client: Client, production: Any
) -> None:
    followed("east")
    long_ago = timezone.now() - timedelta(seconds=65)
    Cluster.objects.create(
        name="stale",
        follower="gone:1:2",
        follower_lease_until=timezone.now() - timedelta(seconds=1),
        last_synced_at=long_ago,
    )
    Cluster.objects.create(name="never")
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 503
    clusters = response.json()["checks"]["clusters"]
    assert clusters["east"]["ok"] is True
    assert clusters["stale"] == {
        "ok": False,
        "error": f"no live follower; last synced {long_ago.isoformat()}",
    }
    assert clusters["never"] == {"ok": False, "error": "no live follower; last synced never"}


def test_a_cluster_that_refuses_the_portal_makes_it_degraded_not_ok(
    db: None, client: Client, production: Any
) -> None:
    followed("east")
    refusing = followed("west")
    problem = "reachable, but the portal's identity may not: list resourceslices.resource.k8s.io"
    Cluster.objects.filter(pk=refusing.pk).update(refused_since=timezone.now(), last_error=problem)
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 200  # it serves: the admin reads on the page what to grant
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["clusters"]["west"] == {
        "ok": False,
        "degraded": True,
        "follower": "host:1:2",
        "error": problem,
    }
    assert body["checks"]["clusters"]["east"] == {"ok": True, "follower": "host:1:2"}
    Cluster.objects.create(name="never")  # and one with no follower: unavailable
    assert client.get("/readyz", **PROBE).json()["status"] == "unavailable"


def test_it_can_leave_the_followers_out_of_readiness(
    db: None, client: Client, production: Any
) -> None:
    production.READYZ_CHECK_FOLLOWERS = False
    Cluster.objects.create(name="never")
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 200
    assert "clusters" not in response.json()["checks"]


def test_it_is_not_ready_when_the_broker_does_not_answer(
    db: None, client: Client, production: Any
) -> None:
    followed("east")
    production.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 503
    broker = response.json()["checks"]["broker"]
    assert broker["ok"] is False
    assert broker["error"].startswith("ConnectionError")
    assert response.json()["checks"]["database"] == {"ok": True}


def test_it_answers_only_get_and_head(db: None, client: Client) -> None:
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 404


@pytest.mark.django_db(transaction=True)
@override_settings(FOLLOWER_LEASE_SECONDS=1.5)
def test_it_follows_a_real_loop_of_a_real_cluster(
    client: Client, production: Any, cluster: Cluster
) -> None:
    def status() -> int:
        return client.get("/readyz", **PROBE).status_code

    assert status() == 503  # registered, no loop follows it
    stop = run_follower(cluster, holder="readyz-follower")
    try:
        wait_until(lambda: status() == 200, timeout=30)
        body = client.get("/readyz", **PROBE).json()
        assert body["checks"]["clusters"]["kubesim"]["follower"] == "readyz-follower"
    finally:
        stop()  # it gives its lease back as it stops
    wait_until(lambda: status() == 503, timeout=30)
