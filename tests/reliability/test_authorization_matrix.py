"""Every URL pattern of the project, for every role: the expected answer, and zero leaks.

The patterns come from the resolver itself, so a new page or endpoint fails this test until
the matrix says who may use it. Pages are probed with GET and POST, the REST API with GET, POST
and DELETE, the admin with GET only (a staff POST there would delete for real). A leak is the
owner's object read or changed by someone who may not: an answer to anonymous or another user
that names it, a kubeconfig for anyone but its owner, or any change while they probe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.http import HttpResponse
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from knox.models import AuthToken
from rest_framework.test import APIClient

from claims.domain import expiry, observations, services
from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
    TeamQuota,
    VerificationRun,
    Workload,
    WorkloadProfile,
)
from tests.fixtures.portal import make_user, register_cluster
from tests.fixtures.workloads import BATCH, seeded_profile
from tests.reliability.conftest import figure

# The owner goes last: her POSTs release and delete her own things.
ROLES = ("anonymous", "other", "approver", "staff", "owner")
# In the names of the owner's objects: no answer to anonymous or other may contain it.
SECRET = "zq7secret"

# One letter per role, in ROLES order: A allowed (2xx, 400, 409, a redirect not to a login
# page), L sent to log in (302 to a login page, or 401), F 403, N 404, X 405.
PAGE = {"GET": "LAAAA", "POST": "LAAAA"}
USER_ACTION = {"GET": "LXXXX", "POST": "LAAAA"}
OWNED_PAGE = {"GET": "LNAAA", "POST": "LNAAA"}
OWNED_ACTION = {"GET": "LXXXX", "POST": "LNAAA"}
OWNER_ONLY_ACTION = {"GET": "LXXXX", "POST": "LNFFA"}
APPROVER_PAGE = {"GET": "LFAAF", "POST": "LFAAF"}
APPROVER_ACTION = {"GET": "LXXXX", "POST": "LFAAF"}
API_READ = {"GET": "LAAAA", "POST": "LXXXX", "DELETE": "LXXXX"}
API_LIST_CREATE = {"GET": "LAAAA", "POST": "LAAAA", "DELETE": "LXXXX"}
API_OWNED = {"GET": "LNAAA", "POST": "LXXXX", "DELETE": "LNAAA"}
API_OWNED_ACTION = {"GET": "LXXXX", "POST": "LNAAA", "DELETE": "LXXXX"}
API_OWNER_ONLY_ACTION = {"GET": "LXXXX", "POST": "LNFFA", "DELETE": "LXXXX"}
API_APPROVER_ACTION = {"GET": "LFXXF", "POST": "LFAAF", "DELETE": "LFXXF"}
PUBLIC = {"GET": "AAAAA", "POST": "AAAAA"}
PUBLIC_READ = {"GET": "AAAAA", "POST": "XXXXX"}
ADMIN = {"GET": "LLLAL"}
STAFF_PAGE = {"GET": "LFFAF", "POST": "LFFAF"}
API_STAFF_ACTION = {"GET": "LXXXX", "POST": "LFFAF", "DELETE": "LXXXX"}
# A button's refusal is a message on the page it sends back to (302), as for approving.
BUTTON_ACTION = {"GET": "LXXXX", "POST": "LNAAA"}
CONFIRMED_ACTION = {"GET": "LNAAA", "POST": "LNAAA"}  # GET asks, only the POST acts

EXPECTED: dict[str, dict[str, str]] = {
    "login": PUBLIC,
    "logout": {"GET": "XXXXX", "POST": "LLLLL"},
    "password_change": PAGE,
    "password_change_done": {"GET": "LAAAA", "POST": "LXXXX"},
    "password_reset": PUBLIC,
    "password_reset_done": PUBLIC_READ,
    "password_reset_confirm": PUBLIC,
    "password_reset_complete": PUBLIC_READ,
    "api-me": API_READ,
    "api-clusters": {"GET": "LAAAA", "POST": "LFFAF", "DELETE": "LXXXX"},
    "api-cluster": {"GET": "LAAAA", "POST": "LXXXX", "DELETE": "LFFAF"},
    "api-cluster-check": API_STAFF_ACTION,
    "api-claim-extensions": {"GET": "LNAAA", "POST": "LNAAA", "DELETE": "LXXXX"},
    "api-extension-approve": {"GET": "LXXXX", "POST": "LNAAF", "DELETE": "LXXXX"},
    "api-extension-reject": {"GET": "LXXXX", "POST": "LNAAF", "DELETE": "LXXXX"},
    "api-audit": {"GET": "LAAAA", "POST": "LXXXX", "DELETE": "LXXXX"},
    # The owner is in the team, other is not; staff cannot delete it while it has members.
    "api-teams": {"GET": "LAAAA", "POST": "LFFAF", "DELETE": "LXXXX"},
    "api-team": {"GET": "LNAAA", "POST": "LXXXX", "DELETE": "LNFAF"},
    "api-team-members": {"GET": "LXXXX", "POST": "LNFAF", "DELETE": "LXXXX"},
    "api-team-member": {"GET": "LXXXX", "POST": "LXXXX", "DELETE": "LNFAF"},
    "api-team-quotas": {"GET": "LXXXX", "POST": "LNFAF", "DELETE": "LXXXX"},
    "api-team-quota": {"GET": "LXXXX", "POST": "LXXXX", "DELETE": "LNFAF"},
    "api-approval-rules": {"GET": "LAAAA", "POST": "LFFAF", "DELETE": "LXXXX"},
    "api-approval-rule": {"GET": "LXXXX", "POST": "LXXXX", "DELETE": "LFFAF"},
    "api-cluster-device-classes": API_READ,
    "api-cluster-devices": API_READ,
    "api-namespace-requests": API_LIST_CREATE,
    "api-namespace-request": API_OWNED,
    "api-namespace-request-approve": API_APPROVER_ACTION,
    "api-namespace-request-reject": API_APPROVER_ACTION,
    "api-namespace-request-retry": API_OWNED_ACTION,
    "api-namespace-request-kubeconfig": API_OWNER_ONLY_ACTION,
    "api-claims": API_LIST_CREATE,
    "api-claim-preview": {"GET": "LXXXX", "POST": "LAAAA", "DELETE": "LXXXX"},
    "api-claim": API_OWNED,
    "api-claim-approve": API_APPROVER_ACTION,
    "api-claim-reject": API_APPROVER_ACTION,
    "api-claim-queue": API_APPROVER_ACTION,
    "api-claim-retry": API_OWNED_ACTION,
    "api-runs": API_LIST_CREATE,
    "api-run": API_OWNED,
    "api-run-log": {"GET": "LNAAA", "POST": "LXXXX", "DELETE": "LXXXX"},
    "api-events": API_READ,
    "api-workload-profiles": {"GET": "LAAAA", "POST": "LFFAF", "DELETE": "LXXXX"},
    # Staff's DELETE removes it for real: the owner, probed after, finds it gone.
    "api-workload-profile": {"GET": "LAAAN", "POST": "LXXXX", "DELETE": "LFFAF"},
    "api-workloads": API_LIST_CREATE,
    "api-workload": {"GET": "LNAAA", "POST": "LXXXX", "DELETE": "LXXXX"},
    "api-workload-stop": API_OWNED_ACTION,
    "api-workload-log": {"GET": "LNAAA", "POST": "LXXXX", "DELETE": "LXXXX"},
    "api/^v1/": {"GET": "NNNNN", "POST": "NNNNN", "DELETE": "NNNNN"},
    "api-schema": PUBLIC_READ,
    "api-docs": PUBLIC_READ,
    "api-docs-asset": PUBLIC,
    "api-tokens": PAGE,
    "api-token-create": USER_ACTION,
    "api-token-revoke": {"GET": "LNNNA", "POST": "LAAAA"},  # GET confirms her own token
    "dashboard": PAGE,
    "namespace-request": PAGE,
    "namespace": OWNED_PAGE,
    "namespace-kubeconfig": OWNER_ONLY_ACTION,
    "namespace-retry": OWNED_ACTION,
    "namespace-delete": CONFIRMED_ACTION,
    "claim-request": PAGE,
    "claim-preview": USER_ACTION,
    "claim": OWNED_PAGE,
    "claim-release": CONFIRMED_ACTION,
    "claim-retry": OWNED_ACTION,
    "claim-verify": OWNED_ACTION,
    "run": OWNED_PAGE,
    "workload-start": OWNED_PAGE,
    "workload-preview": OWNED_ACTION,
    "workload": OWNED_PAGE,
    "workload-stop": CONFIRMED_ACTION,
    "workload-log": {"GET": "LNAAA", "POST": "LXXXX"},
    "workload-again": BUTTON_ACTION,
    "workload-profiles": PAGE,
    "workload-profile-new": STAFF_PAGE,
    "workload-profile": STAFF_PAGE,
    "workload-profile-remove": {"GET": "LXXXX", "POST": "LFFAF"},
    "run-cancel": CONFIRMED_ACTION,
    "approvals": APPROVER_PAGE,
    "namespace-approve": APPROVER_ACTION,
    "namespace-reject": APPROVER_ACTION,
    "claim-approve": APPROVER_ACTION,
    "gpu-hours": {"GET": "LAAAA", "POST": "LXXXX"},  # each sees the teams they may
    "idle-claims": {"GET": "LFAAF", "POST": "LXXXX"},
    "claim-queue-move": BUTTON_ACTION,  # a non-approver gets a message, as for approving
    "claim-reject": APPROVER_ACTION,
    "clusters": PAGE,
    "cluster": PAGE,
    "cluster-claim-map": OWNED_PAGE,
    "cluster-register": STAFF_PAGE,
    "cluster-contexts": {"GET": "LFFXF", "POST": "LFFAF"},
    "cluster-edit": STAFF_PAGE,
    "cluster-recheck": {"GET": "LFFXF", "POST": "LFFAF"},
    "cluster-remove": STAFF_PAGE,
    "claim-extend": OWNED_PAGE,
    "extension-approve": BUTTON_ACTION,
    "extension-reject": BUTTON_ACTION,
    "profile": PAGE,
    "set-language": {"GET": "XXXXX", "POST": "AAAAA"},
    "teams": PAGE,
    # Staff and the team's approvers; the owner is a member only, other not in the team.
    "team-idle-policy": {"GET": "LXXXX", "POST": "LNFAF"},
    "audit": {"GET": "LFAAF", "POST": "LXXXX"},
    "audit-export": {"GET": "LFAAF", "POST": "LXXXX"},
    # Single sign-on is off in the tests (no client id): its views are not there.
    "oidc_authentication_init": {"GET": "NNNNN", "POST": "XXXXX"},
    "oidc_authentication_callback": {"GET": "NNNNN", "POST": "XXXXX"},
}
# The admin is for staff alone; these differ only in what staff gets (or, for its login and
# logout, in being open).
ADMIN_EXCEPTIONS = {
    "admin:login": {"GET": "AAAAA"},
    "admin:logout": {"GET": "AAAXA"},  # GET logs no one out (405); others are sent on
    "admin:autocomplete": {"GET": "LLLFL"},  # without its query parameters
    "admin:view_on_site": {"GET": "LLLNL"},  # content type 1 has no page
    "admin:admin/(?P<url>.*)$": {"GET": "LLLNL"},
    "admin:axes_accessattempt_add": {"GET": "LLLFL"},  # axes records, nobody adds
    "admin:axes_accesslog_add": {"GET": "LLLFL"},
    "admin:claims_auditevent_add": {"GET": "LLLFL"},  # the audit trail is append-only
    "admin:claims_auditevent_delete": {"GET": "LLLFL"},
    "admin:claims_webhookdelivery_add": {"GET": "LLLFL"},  # records of what happened
    "admin:claims_claimextension_add": {"GET": "LLLFL"},
    # Requests and runs are made through the services (quota, audit), never in the admin.
    "admin:claims_namespacerequest_add": {"GET": "LLLFL"},
    "admin:claims_claimrequest_add": {"GET": "LLLFL"},
    "admin:claims_verificationrun_add": {"GET": "LLLFL"},
    "admin:claims_workload_add": {"GET": "LLLFL"},
    "admin:claims_idlewarning_add": {"GET": "LLLFL"},  # written by idle reclaim only
    "admin:axes_accessfailurelog_add": {"GET": "LLLFL"},
}
SPECIAL_PATHS = {
    "api/^v1/": "api/v1/nowhere/",
    "admin/^(?P<app_label>auth|knox|axes|claims)/$": "admin/claims/",
    "admin/(?P<url>.*)$": "admin/nowhere/",
}


def walk(patterns: list[Any], prefix: str = "", namespace: str = "") -> Iterator[tuple[str, str]]:
    """(route, name) of every pattern; an unnamed one is named by its route."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = f"{pattern.namespace}:" if pattern.namespace else namespace
            yield from walk(pattern.url_patterns, route, inner)
        elif isinstance(pattern, URLPattern):
            yield route, namespace + (pattern.name or route)


def expected_for(name: str) -> dict[str, str] | None:
    if name.startswith("admin:"):
        return ADMIN_EXCEPTIONS.get(name, ADMIN)
    return EXPECTED.get(name)


def outcome(response: HttpResponse) -> str:
    code = response.status_code
    if code == 401 or (code == 302 and "login/" in response.get("Location", "")):
        return "L"
    assert code < 500, f"server error {code}"
    return {403: "F", 404: "N", 405: "X"}.get(code, "A")


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


class World:
    """The owner's namespace, claims, run and token, and a client per role."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.users = {
            "owner": make_user(f"owner{SECRET}"),
            "other": make_user("other"),
            "approver": make_user("approver", approver=True),
            "staff": User.objects.create_superuser("staff", "staff@example.org", "x"),
        }
        owner = self.users["owner"]
        self.namespace = services.namespace_request_submit(
            user=owner, cluster=cluster, name=f"ns-{SECRET}"
        )
        self.claim = self.submit_claim(f"c-{SECRET}")
        applied = self.applied_claim(f"a-{SECRET}")
        self.run = services.verification_run_start(user=owner, claim_request=applied)
        self.workload = services.workload_start(
            user=owner, claim_request=applied, profile=seeded_profile(BATCH)
        )
        # One profile per route that may delete one: a removal does not hide another's.
        self.profiles = {
            route: WorkloadProfile.objects.create(name=f"matrix {route}", kind="job", image="x")
            for route in ("api", "page", "remove")
        }
        self.extension = expiry.extension_request(
            user=owner, claim_request=applied, hours=1, reason=SECRET
        )
        self.token, _ = AuthToken.objects.create(user=owner, expiry=None)
        self.team = Team.objects.create(name=f"team-{SECRET}")
        self.team.members.add(owner)
        self.member = TeamMembership.objects.create(team=self.team, user=make_user("member"))
        self.quota = TeamQuota.objects.create(team=self.team, cluster=cluster, device_class="x")
        self.rule = ApprovalRule.objects.create(name="matrix-rule")
        self.secrets = {
            role: AuthToken.objects.create(user=user, expiry=None)[1]
            for role, user in self.users.items()
        }
        self.clients: dict[tuple[str, bool], Client] = {}

    def submit_claim(self, name: str) -> ClaimRequest:
        return services.claim_request_submit(
            user=self.users["owner"],
            namespace_request=self.namespace,
            name=name,
            device_class="gpu.nvidia.com",
        )

    def applied_claim(self, name: str) -> ClaimRequest:
        claim = self.submit_claim(name)
        services.claim_request_approve(user=self.users["approver"], claim_request=claim)
        observations.claim_applying(claim_request=claim)
        manifest: dict = {}
        api_version = "resource.k8s.io/v1"
        observations.claim_applied(claim_request=claim, api_version=api_version, manifest=manifest)
        return claim

    def snapshot(self) -> list[Any]:
        """What anyone changing the owner's things would change."""
        rows = [
            *NamespaceRequest.objects.values_list("pk", "state", "updated"),
            *ClaimRequest.objects.values_list("pk", "state", "updated"),
            *VerificationRun.objects.values_list("pk", "state", "updated"),
            *Workload.objects.values_list("pk", "state", "updated"),
            *WorkloadProfile.objects.values_list("pk", "updated"),
        ]
        tokens = AuthToken.objects.filter(user=self.users["owner"]).values_list("token_key")
        # The probers' own sign-ins and outs (and failed ones) are recorded: nothing of hers.
        A = AuditEvent.Action
        attempts = (A.LOGIN, A.LOGOUT, A.LOGIN_FAILED, A.LOCKED_OUT)
        audit = AuditEvent.objects.exclude(action__in=attempts).values_list("pk", "action")
        return [rows, sorted(tokens), list(audit)]

    def client(self, role: str, api: bool) -> Client:
        """A session for pages, a personal API token for /api/v1/ (one of each per role)."""
        if (role, api) not in self.clients:
            self.clients[role, api] = self.new_client(role, api)
        return self.clients[role, api]

    def new_client(self, role: str, api: bool) -> Client:
        if api:
            token_client = APIClient()
            if role != "anonymous":
                token_client.credentials(HTTP_AUTHORIZATION=f"Token {self.secrets[role]}")
            return token_client
        client = Client()
        if role != "anonymous":
            client.force_login(self.users[role])
        return client

    def path(self, route: str) -> str:
        route = SPECIAL_PATHS.get(route, route)
        pk = self.pk_for(route)
        values = {
            "pk": pk,
            "object_id": pk,
            "id": pk,
            "container": "ctr0",
            "filename": "swagger-ui.css",
            "uidb64": "MQ",
            "token": "set-password",
            "content_type_id": 1,
            "claim_pk": self.claim.pk,
            "member_id": self.member.pk,
            "quota_id": self.quota.pk,
        }
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values[m.group(1)]), route)

    def pk_for(self, route: str) -> int:
        for marker, pk in (
            ("api/v1/workload-profiles/", self.profiles["api"].pk),
            ("workload-profiles/<int:pk>/remove/", self.profiles["remove"].pk),
            ("workload-profiles/", self.profiles["page"].pk),
            ("workloads/<int:pk>/", self.workload.pk),
            ("api/v1/teams/", self.team.pk),
            ("teams/<int:pk>/", self.team.pk),
            ("approval-rules/", self.rule.pk),
            ("clusters/<int:pk>/claims/", self.cluster.pk),
            ("extensions/<int:pk>/", self.extension.pk),
            ("namespace", self.namespace.pk),
            ("/ns/", self.namespace.pk),  # approvals/ns/<pk>/...
            ("claim", self.claim.pk),
            ("run", self.run.pk),
            ("cluster", self.cluster.pk),
            ("/user/", self.users["owner"].pk),
        ):
            if marker in route:
                return pk
        return 1

    def probe(self, route: str, role: str, method: str) -> HttpResponse:
        cache.clear()  # throttle counts: each probe stands alone
        path = self.path(route)
        client = self.client(role, api=path.startswith("/api/v1/"))
        data = {"token_key": self.token.token_key} if "revoke" in path else None
        response = getattr(client, method.lower())(path, data)
        if "logout" in path:
            self.clients.pop((role, False), None)  # that session has ended
        return response


@pytest.fixture
def world(db: None, kubesim_cluster: Any) -> World:
    return World(register_cluster(kubesim_cluster, name="matrix"))


def leaked(world: World, role: str, response: HttpResponse) -> bool:
    if role == "owner":
        return False
    if response.get("Content-Type", "").startswith("application/yaml"):
        return True  # a kubeconfig for someone else's namespace
    return role in ("anonymous", "other") and SECRET.encode() in body_of(response)


def test_every_pattern_and_role_answers_as_the_matrix_says_and_nothing_leaks(
    world: World,
) -> None:
    patterns = list(walk(get_resolver().url_patterns))
    uncovered = [name for _, name in patterns if expected_for(name) is None]
    assert not uncovered, f"say in EXPECTED who may use these: {uncovered}"
    before = world.snapshot()
    wrong, leaks, probes = [], [], 0
    for role in ROLES:
        for route, name in patterns:
            for method, letters in (expected_for(name) or {}).items():
                response = world.probe(route, role, method)
                probes += 1
                got = outcome(response)
                if got != letters[ROLES.index(role)]:
                    wrong.append(f"{role} {method} {name}: {got} ({response.status_code})")
                if leaked(world, role, response):
                    leaks.append(f"{role} {method} {name}")
        if role == "other":
            assert world.snapshot() == before, "anonymous or another user changed something"
    figure(
        "authorization matrix",
        f"{len(patterns)} URL patterns x {len(ROLES)} roles: {probes} probes, "
        f"{len(wrong)} unexpected, {len(leaks)} leaks",
    )
    assert not wrong
    assert not leaks
