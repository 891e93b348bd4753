"""claims/domain/audit.py: what each action records, and that the trail is append-only (the trigger
of migration 0017, the admin's read-only pages, users deleted without touching it)."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse

from claims.clusters import gateways
from claims.domain import audit, services
from claims.domain.transitions import transition
from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
    TeamQuota,
    TeamWebhook,
    VerificationRun,
)
from claims.worker import cluster_steps, sync
from tests.claims.worker.test_sync import applied_claims, stuck_pod
from tests.fixtures.portal import PASSWORD, wait_until

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) audit-test"


def last(action: str, **filters: Any) -> AuditEvent:
    event = AuditEvent.objects.filter(action=action, **filters).order_by("id").last()
    assert event is not None, f"no {action} row"
    return event


def a_row() -> AuditEvent:
    return audit.record(AuditEvent.Action.NOTE, kind="user", name="someone", message="kept")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE claims_auditevent SET message = 'rewritten'",
        "DELETE FROM claims_auditevent",
        "SET LOCAL portal.audit_truncate = 'off'; TRUNCATE claims_auditevent",
    ],
)
def test_it_refuses_to_change_or_remove_rows_in_the_database(db: None, statement: str) -> None:
    row = a_row()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement)
    assert AuditEvent.objects.get(pk=row.pk).message == "kept"


def test_it_refuses_the_orm_too(db: None) -> None:
    row = a_row()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=row.pk).update(message="rewritten")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        row.delete()
    assert AuditEvent.objects.filter(pk=row.pk, message="kept").exists()


def test_it_records_a_login_through_the_login_form(alice: User) -> None:
    client = Client(REMOTE_ADDR="192.0.2.10", HTTP_USER_AGENT=BROWSER)
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    event = last("login")
    assert (event.actor, event.actor_username, event.object_kind) == (alice, "alice", "user")
    assert (event.object_id, event.owner_id) == (alice.pk, alice.pk)
    assert (event.channel, event.client_ip, event.user_agent) == ("web", "192.0.2.10", BROWSER)


def test_it_records_a_failed_login_and_the_lockout(alice: User, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    client = Client(REMOTE_ADDR="192.0.2.11")
    wrong = {"username": "alice", "password": "not-it"}
    assert client.post(reverse("login"), wrong).status_code == 200
    event = last("login_failed")
    assert (event.actor, event.object_name, event.client_ip) == (None, "alice", "192.0.2.11")
    assert "not-it" not in json.dumps([event.message, event.before, event.after])
    assert client.post(reverse("login"), wrong).status_code == 429
    locked = last("locked_out")
    assert locked.object_name == "alice" and "192.0.2.11" in locked.message


def test_it_records_a_logout(alice: User) -> None:
    client = Client()
    client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    client.post(reverse("logout"))
    event = last("logout")
    assert (event.actor, event.object_id) == (alice, alice.pk)


def test_it_records_the_applied_manifest_hash_and_the_allocation(
    alice: User, cluster: Cluster
) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    applied = last("state_change", object_id=claim.pk, to_state="waiting")
    canonical = json.dumps(claim.applied_manifest, sort_keys=True, separators=(",", ":"))
    assert applied.manifest_sha256 == hashlib.sha256(canonical.encode()).hexdigest()
    assert applied.before == {"state": "applying"}
    assert applied.after["applied_api_version"] == claim.applied_api_version
    gateways.gateway_for(cluster).apply(stuck_pod(claim))

    def in_use() -> bool:
        sync.sync_cluster(cluster)
        return ClaimRequest.objects.get(pk=claim.pk).state == "in_use"

    wait_until(in_use, timeout=15)
    claim.refresh_from_db()
    allocated = last("state_change", object_id=claim.pk, to_state="in_use")
    assert allocated.allocation == claim.allocation
    assert allocated.allocation["devices"][0]["device"] in allocated.message


def test_it_records_the_result_of_a_run(alice: User, cluster: Cluster) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    run = services.verification_run_start(user=alice, claim_request=claim)
    assert last("state_change", object_kind="verification_run").actor == alice
    cluster_steps.start_run(run)

    def finished() -> bool:
        sync.sync_cluster(cluster)
        run.refresh_from_db()
        return run.is_final

    wait_until(finished, timeout=20, interval=0.02)
    event = last("state_change", object_kind="verification_run", object_id=run.pk)
    assert event.to_state == run.state == "succeeded"
    assert event.result == {
        "passed": True,
        "vector_add_passed": True,
        "device_query_passed": True,
        "device_name": run.device_name,
        "compute_capability": run.compute_capability,
        "memory_mib": run.memory_mib,
    }
    assert event.allocation == run.devices and run.devices


def test_it_records_who_decided(alice: User, carol: User, cluster: Cluster) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="audit-a")
    services.namespace_request_approve(user=carol, namespace_request=ns)
    event = last("state_change", object_kind="namespace_request", to_state="approved")
    assert (event.actor_username, event.owner_id, event.channel) == ("carol", alice.pk, "system")
    assert event.before == {"state": "pending"}
    assert event.after["decided_by"] == carol.pk


def test_it_records_edits_of_teams_and_clusters_with_before_and_after(db: None) -> None:
    team = Team.objects.create(name="vision")
    assert last("created", object_kind="team").after["name"] == "vision"
    team.name = "vision-lab"
    team.save()
    changed = last("changed", object_kind="team", object_id=team.pk)
    assert (changed.before, changed.after) == ({"name": "vision"}, {"name": "vision-lab"})
    team.delete()
    assert last("deleted", object_kind="team").before["name"] == "vision-lab"

    lab = Cluster.objects.create(name="lab", kubeconfig_encrypted="gAAAA-ciphertext")
    assert last("created", object_kind="cluster").after["kubeconfig_encrypted"] == "(secret)"
    before = AuditEvent.objects.count()
    lab.server_version = "v1.34.1"
    lab.save(update_fields=["server_version"])  # what each sync writes: not an admin's edit
    assert AuditEvent.objects.count() == before


def test_it_keeps_the_rows_of_a_deleted_user(alice: User) -> None:
    Client().post(reverse("login"), {"username": "alice", "password": PASSWORD})
    cluster = Cluster.objects.create(name=f"gone-{uuid.uuid4().hex[:4]}")
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="team-gone")
    transition(ns, to="pending", actor=alice, message="Submitted.", initial=True)
    alice.delete()
    rows = AuditEvent.objects.filter(actor_username="alice")
    assert {row.action for row in rows} == {"login", "state_change"}
    assert AuditEvent.objects.select_related("actor").get(action="login").actor is None
    assert last("login").actor_name == "alice"


@pytest.fixture
def admin_client(db: None) -> Client:
    admin = User.objects.create_superuser("admin", "admin@example.org", PASSWORD)
    client = Client()
    client.force_login(admin)
    return client


def test_it_shows_audit_rows_read_only_in_the_admin(admin_client: Client) -> None:
    row = a_row()
    change = reverse("admin:claims_auditevent_change", args=[row.pk])
    page = admin_client.get(change)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="_save"' not in html and "deletelink" not in html
    listing = admin_client.get(reverse("admin:claims_auditevent_changelist")).content.decode()
    assert 'value="delete_selected"' not in listing
    assert reverse("admin:claims_auditevent_add") not in listing
    assert admin_client.post(change, {"message": "rewritten"}).status_code == 403
    delete = reverse("admin:claims_auditevent_delete", args=[row.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert admin_client.get(reverse("admin:claims_auditevent_add")).status_code == 403
    assert AuditEvent.objects.get(pk=row.pk).message == "kept"


@pytest.mark.parametrize("model", ["namespacerequest", "claimrequest", "verificationrun"])
def test_it_shows_requests_and_runs_read_only_in_the_admin(
    admin_client: Client, alice: User, carol: User, cluster: Cluster, model: str
) -> None:
    """What was asked for (count, class, selector, owner, namespace) changes only through the
    services, which check the quota and write the audit row: never by an admin's edit."""
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="audit-ro")
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    run = VerificationRun.objects.create(claim=claim, owner=alice, pod_name="verify-1")
    asked = (claim.name, claim.count, claim.all_devices, claim.owner)
    obj = {"namespacerequest": ns, "claimrequest": claim, "verificationrun": run}[model]
    change = reverse(f"admin:claims_{model}_change", args=[obj.pk])
    html = admin_client.get(change).content.decode()
    assert 'name="_save"' not in html
    for field in ("name", "owner", "count", "all_devices", "device_class", "selector"):
        assert f'name="{field}"' not in html
    assert 'name="namespace_request"' not in html and 'name="claim"' not in html
    edit = {"name": "renamed", "count": "8", "all_devices": "on", "owner": carol.pk}
    assert admin_client.post(change, edit).status_code == 403
    assert admin_client.get(reverse(f"admin:claims_{model}_add")).status_code == 403
    listing = admin_client.get(reverse(f"admin:claims_{model}_changelist")).content.decode()
    assert reverse(f"admin:claims_{model}_add") not in listing
    claim.refresh_from_db()
    assert (claim.name, claim.count, claim.all_devices, claim.owner) == asked
    ns.refresh_from_db()
    assert (ns.name, ns.owner) == ("audit-ro", alice)


def test_it_records_an_admins_edit_of_a_rule_with_who_and_from_where(
    admin_client: Client,
) -> None:
    form = {"name": "small-a100", "applies_to": "claim", "max_devices": "1", "position": "10"}
    add = reverse("admin:claims_approvalrule_add")
    assert admin_client.post(add, form | {"enabled": "on"}).status_code == 302
    rule = ApprovalRule.objects.get()
    change = reverse("admin:claims_approvalrule_change", args=[rule.pk])
    assert admin_client.post(change, form | {"max_devices": "2"}).status_code == 302
    created = last("created", object_kind="approval_rule")
    assert created.after["max_devices"] == 1 and created.object_name == "small-a100"
    event = last("changed", object_kind="approval_rule", object_id=rule.pk)
    assert event.before == {"max_devices": 1, "enabled": True}
    assert event.after == {"max_devices": 2, "enabled": False}
    assert (event.actor_username, event.channel) == ("admin", "admin")


def test_it_records_quota_and_membership_edits(alice: User) -> None:
    team = Team.objects.create(name="vision")
    lab = Cluster.objects.create(name="lab")
    quota = TeamQuota.objects.create(team=team, cluster=lab, device_class="gpu", max_devices=2)
    quota.max_devices, quota.max_lifetime = 4, timedelta(days=2)
    quota.save()
    event = last("changed", object_kind="team_quota", object_id=quota.pk)
    assert event.before == {"max_devices": 2, "max_lifetime": None}
    assert event.after == {"max_devices": 4, "max_lifetime": "P2DT00H00M00S"}
    TeamMembership.objects.create(team=team, user=alice)
    assert last("created", object_kind="team_membership").after["user_id"] == alice.pk


def test_it_records_the_members_a_clear_removes(alice: User, bob: User) -> None:
    team = Team.objects.create(name="vision")
    team.members.add(alice, bob)
    added = last("changed", object_kind="team", object_id=team.pk)
    assert added.after == {"users added": sorted([alice.pk, bob.pk])}
    team.members.clear()
    cleared = last("changed", object_kind="team", object_id=team.pk)
    assert cleared.after == {"users removed": sorted([alice.pk, bob.pk])}
    assert not team.members.exists()
    # From the user's side too.
    team.members.add(alice)
    alice.gpu_teams.clear()
    assert last("changed", object_kind="user", object_id=alice.pk).after == {
        "teams removed": [team.pk]
    }


def test_it_records_that_a_webhook_secret_changed_but_not_the_secret(db: None) -> None:
    hook = TeamWebhook.objects.create(
        team=Team.objects.create(name="vision"), url="https://hooks.example.org/a", secret="s1"
    )
    assert last("created", object_kind="team_webhook").after["secret"] == "(secret)"
    hook.secret = "s2"
    hook.save()
    event = last("changed", object_kind="team_webhook", object_id=hook.pk)
    assert (event.before, event.after) == ({"secret": "(secret)"}, {"secret": "(secret)"})
    assert "s1" not in str(AuditEvent.objects.values_list())


def test_it_shows_a_deleted_users_row_in_the_admin(admin_client: Client, alice: User) -> None:
    Client().post(reverse("login"), {"username": "alice", "password": PASSWORD})
    alice.delete()
    row = last("login")
    page = admin_client.get(reverse("admin:claims_auditevent_change", args=[row.pk]))
    assert page.status_code == 200 and "alice" in page.content.decode()
    listing = admin_client.get(reverse("admin:claims_auditevent_changelist"), {"q": "alice"})
    assert f"/{row.pk}/change/" in listing.content.decode()
