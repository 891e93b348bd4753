"""RBAC as a real API server enforces it: bootstrap roles, (Cluster)RoleBindings to
ServiceAccounts, Users and Groups, the exact 403s, escalation prevention, with kubectl."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
from collections.abc import Iterator

import pytest

import kubesim
from tests.fixtures.kubesim import (
    RBAC,
    create_namespace,
    kubeconfig_for,
    raw_request,
    role_binding,
    service_account_token,
    token_auth_file,
    wait_until,
)

USERS = {
    "alice-token": ("alice", ()),
    "bob-token": ("bob", ("gpu-team",)),
    "carol-token": ("carol", ()),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[kubesim.Handle]:
    users = token_auth_file(tmp_path_factory.mktemp("auth") / "tokens.csv", USERS)
    handle = kubesim.start(speed=50, token_auth_file=users)
    yield handle
    handle.stop()


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = ["kubectl", "--kubeconfig", kubeconfig, *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def bind(handle, namespace: str, name: str, role: str, subject: dict) -> dict:
    path = f"/apis/{RBAC}/v1/namespaces/{namespace}/rolebindings"
    return handle.admin("POST", path, role_binding(name, role, [subject]))


@pytest.fixture(scope="module")
def portal_namespace(cluster, tmp_path_factory) -> tuple[str, str]:
    """What the portal does per user: a ServiceAccount bound to `edit`, and its kubeconfig."""
    namespace = create_namespace(cluster, "user")
    cluster.admin(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "portal"}}
    )
    subject = {"kind": "ServiceAccount", "name": "portal", "namespace": namespace}
    bind(cluster, namespace, "portal-edit", "edit", subject)
    token = service_account_token(cluster, namespace, "portal")
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    return namespace, kubeconfig_for(cluster, token, path, namespace)


POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
"""


def test_the_service_account_kubeconfig_runs_pods_in_its_namespace(cluster, portal_namespace):
    _, kubeconfig = portal_namespace
    created = kubectl(kubeconfig, "create", "-f", "-", stdin=POD.format(name="made"))
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "pod/made created"
    ran = kubectl(kubeconfig, "run", "ran", "--image=busybox", "--restart=Never")
    assert ran.returncode == 0, ran.stderr
    listed = kubectl(kubeconfig, "get", "pods", "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) >= {"pod/made", "pod/ran"}
    claims = kubectl(kubeconfig, "get", "resourceclaims")
    assert claims.returncode == 0, claims.stderr


def test_it_is_refused_in_another_namespace_with_the_exact_message(cluster, portal_namespace):
    namespace, kubeconfig = portal_namespace
    other = create_namespace(cluster, "other")
    user = f"system:serviceaccount:{namespace}:portal"
    created = kubectl(kubeconfig, "create", "-n", other, "-f", "-", stdin=POD.format(name="x"))
    assert created.returncode == 1
    assert created.stderr.strip() == (
        f'Error from server (Forbidden): error when creating "STDIN": pods is forbidden: '
        f'User "{user}" cannot create resource "pods" in API group "" in the namespace "{other}"'
    )
    token = service_account_token(cluster, namespace, "portal")
    body = {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    response = raw_request(cluster, "POST", f"/api/v1/namespaces/{other}/pods", body, token=token)
    assert response.status == 403
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "{user}" cannot create resource "pods" in API '
        f'group "" in the namespace "{other}"',
        "reason": "Forbidden",
        "details": {"kind": "pods"},
        "code": 403,
    }


def test_it_is_refused_cluster_scoped_things(cluster, portal_namespace):
    namespace, kubeconfig = portal_namespace
    nodes = kubectl(kubeconfig, "get", "nodes")
    assert nodes.returncode == 1
    assert nodes.stderr.strip() == (
        f'Error from server (Forbidden): nodes is forbidden: User "system:serviceaccount:'
        f'{namespace}:portal" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    slices = kubectl(kubeconfig, "get", "resourceslices")
    assert (
        'cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster scope'
        in slices.stderr
    )
    one = kubectl(kubeconfig, "get", "node", "gpu-node-1")
    assert 'nodes "gpu-node-1" is forbidden' in one.stderr
    assert kubectl(kubeconfig, "get", "rolebindings").returncode == 1  # edit cannot touch RBAC


def test_kubectl_auth_can_i_answers_for_the_service_account(cluster, portal_namespace):
    namespace, kubeconfig = portal_namespace
    assert kubectl(kubeconfig, "auth", "can-i", "create", "pods").stdout.strip() == "yes"
    assert kubectl(kubeconfig, "auth", "can-i", "get", "pods/log").stdout.strip() == "yes"
    assert (
        kubectl(kubeconfig, "auth", "can-i", "create", "pods", "-n", "default").stdout.strip()
        == "no"
    )
    assert kubectl(kubeconfig, "auth", "can-i", "list", "nodes").stdout.strip() == "no"
    whoami = kubectl(kubeconfig, "auth", "whoami")
    assert f"system:serviceaccount:{namespace}:portal" in whoami.stdout


RULES_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"


def rules_review(cluster, token: str, namespace: str | None):
    spec = {} if namespace is None else {"namespace": namespace}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": spec}
    return raw_request(cluster, "POST", RULES_REVIEW, body, token=token)


def test_a_rules_review_lists_the_rules_of_one_namespace_as_upstream(cluster, portal_namespace):
    """registry/authorization/selfsubjectrulesreview/rest.go over RBACAuthorizer.RulesFor."""
    namespace, kubeconfig = portal_namespace
    token = service_account_token(cluster, namespace, "portal")
    response = rules_review(cluster, token, namespace)
    assert response.status == 201
    answer = response.json()
    assert {key: answer[key] for key in ("kind", "apiVersion", "metadata", "spec")} == {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {},  # a fresh object: the spec asked is not echoed
    }
    status = answer["status"]
    assert status["incomplete"] is False and "evaluationError" not in status
    assert {
        "verbs": ["create"],
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    } in status["resourceRules"]  # system:basic-user, to every authenticated identity
    assert any("/version" in rule["nonResourceURLs"] for rule in status["nonResourceRules"])
    assert any("pods" in rule.get("resources", []) for rule in status["resourceRules"])  # edit
    elsewhere = rules_review(cluster, token, "default").json()["status"]["resourceRules"]
    assert not any("pods" in rule.get("resources", []) for rule in elsewhere)
    listed = kubectl(kubeconfig, "auth", "can-i", "--list")
    assert listed.returncode == 0, listed.stderr
    assert "selfsubjectrulesreviews.authorization.k8s.io" in listed.stdout


def test_a_rules_review_needs_a_namespace(cluster, portal_namespace):
    namespace, _ = portal_namespace
    response = rules_review(cluster, service_account_token(cluster, namespace, "portal"), None)
    assert response.status == 400
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "no namespace on request",
        "reason": "BadRequest",
        "code": 400,
    }


def test_a_rules_review_says_which_bound_role_is_missing(cluster, tmp_path):
    namespace = create_namespace(cluster, "dangling")
    subject = {"apiGroup": RBAC, "kind": "User", "name": "carol"}
    bind(cluster, namespace, "to-nothing", "no-such-role", subject)
    status = rules_review(cluster, "carol-token", namespace).json()["status"]
    assert (
        status["evaluationError"]
        == 'clusterrole.rbac.authorization.k8s.io "no-such-role" not found'
    )
    assert status["incomplete"] is False


def _user_kubeconfig(cluster, tmp_path, token: str, namespace: str) -> str:
    return kubeconfig_for(cluster, token, tmp_path / f"{token}.kubeconfig", namespace)


def test_a_static_user_gets_rights_from_a_user_subject(cluster, tmp_path):
    namespace = create_namespace(cluster, "alice")
    kubeconfig = _user_kubeconfig(cluster, tmp_path, "alice-token", namespace)
    before = kubectl(kubeconfig, "get", "pods")
    assert 'User "alice" cannot list resource "pods"' in before.stderr
    bind(
        cluster,
        namespace,
        "alice-edit",
        "edit",
        {"apiGroup": RBAC, "kind": "User", "name": "alice"},
    )
    assert kubectl(kubeconfig, "run", "p", "--image=busybox").returncode == 0
    assert kubectl(kubeconfig, "get", "pods", "-o", "name").stdout.strip() == "pod/p"


def test_a_group_subject_grants_its_members(cluster, tmp_path):
    namespace = create_namespace(cluster, "team")
    group = {"apiGroup": RBAC, "kind": "Group", "name": "gpu-team"}
    bind(cluster, namespace, "team-view", "view", group)
    member = _user_kubeconfig(cluster, tmp_path, "bob-token", namespace)
    outsider = _user_kubeconfig(cluster, tmp_path, "carol-token", namespace)
    assert kubectl(member, "get", "pods").returncode == 0
    assert kubectl(outsider, "get", "pods").returncode == 1
    refused = kubectl(member, "run", "p", "--image=busybox")  # view is read-only
    assert 'User "bob" cannot create resource "pods"' in refused.stderr


def test_discovery_works_for_any_authenticated_user(cluster):
    for path in ("/api", "/api/v1", "/apis", f"/apis/{RBAC}/v1", "/version", "/openapi/v3"):
        assert raw_request(cluster, "GET", path, token="carol-token").status == 200, path
    response = raw_request(cluster, "GET", "/api/v1/namespaces", token="carol-token")
    assert response.status == 403
    unknown = raw_request(cluster, "GET", "/metrics", token="carol-token")
    assert unknown.json()["message"] == 'forbidden: User "carol" cannot get path "/metrics"'
    assert raw_request(cluster, "GET", "/api", token=None).status == 403  # system:anonymous
    assert raw_request(cluster, "GET", "/_kubesim/counters", token="carol-token").status == 403


def test_the_recorded_impersonation_answer(cluster):
    """04-errors.json `impersonated-user-without-rights`, by a system:masters user."""
    namespace = create_namespace(cluster, "imp")
    url = cluster.url.removeprefix("https://")
    context = ssl.create_default_context(cadata=cluster.ca_pem.decode())
    connection = http.client.HTTPSConnection(*url.split(":"), context=context, timeout=10)
    headers = {"Authorization": f"Bearer {cluster.token}", "Impersonate-User": "jane"}
    connection.request(
        "GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", headers=headers
    )
    response = connection.getresponse()
    assert response.status == 403
    assert json.loads(response.read())["message"] == (
        'resourceclaims.resource.k8s.io is forbidden: User "jane" cannot list resource '
        f'"resourceclaims" in API group "resource.k8s.io" in the namespace "{namespace}"'
    )
    connection.close()


def test_role_ref_cannot_change(cluster):
    namespace = create_namespace(cluster, "ref")
    path = f"/apis/{RBAC}/v1/namespaces/{namespace}/rolebindings"
    bind(cluster, namespace, "b", "view", {"apiGroup": RBAC, "kind": "User", "name": "alice"})
    patch = {"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "edit"}}
    response = raw_request(
        cluster, "PATCH", f"{path}/b", patch, content_type="application/merge-patch+json"
    )
    assert response.status == 422
    assert response.json()["message"] == (
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Invalid value: '
        'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: '
        "cannot change roleRef"
    )


def test_bindings_are_validated_as_upstream_does(cluster):
    namespace = create_namespace(cluster, "val")
    path = f"/apis/{RBAC}/v1/namespaces/{namespace}/rolebindings"
    bad = role_binding("b", "view", [{"kind": "Robot", "name": "r"}])
    response = raw_request(cluster, "POST", path, bad)
    assert response.status == 422
    assert response.json()["message"] == (
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: subjects[0].kind: Unsupported '
        'value: "Robot": supported values: "ServiceAccount", "User", "Group"'
    )
    missing_ref = {"metadata": {"name": "c"}, "subjects": []}
    assert (
        "roleRef.name: Required value"
        in raw_request(cluster, "POST", path, missing_ref).json()["message"]
    )
    crb = role_binding("crb-no-ns", "view", [{"kind": "ServiceAccount", "name": "sa"}])
    crb["kind"] = "ClusterRoleBinding"
    answer = raw_request(cluster, "POST", f"/apis/{RBAC}/v1/clusterrolebindings", crb).json()
    assert answer["message"].endswith("subjects[0].namespace: Required value")


def test_binding_a_role_needs_its_rights_or_the_bind_verb(cluster):
    namespace = create_namespace(cluster, "esc")
    path = f"/apis/{RBAC}/v1/namespaces/{namespace}/rolebindings"
    grant = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": "binder"},
        "rules": [{"apiGroups": [RBAC], "resources": ["rolebindings"], "verbs": ["create"]}],
    }
    cluster.admin("POST", f"/apis/{RBAC}/v1/namespaces/{namespace}/roles", grant)
    carol = {"apiGroup": RBAC, "kind": "User", "name": "carol"}
    cluster.admin("POST", path, role_binding("carol-binder", "binder", [carol], kind="Role"))
    wanted = role_binding("carol-edit", "edit", [carol])
    refused = raw_request(cluster, "POST", path, wanted, token="carol-token")
    assert refused.status == 403
    message = refused.json()["message"]
    head, *missing = message.split("\n")
    assert head == (
        'rolebindings.rbac.authorization.k8s.io "carol-edit" is forbidden: user "carol" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        "currently held:"
    )
    assert missing == sorted(missing)
    assert (
        '{APIGroups:["resource.k8s.io"], Resources:["resourceclaims"], Verbs:["create" "delete" '
        '"deletecollection" "patch" "update" "get" "list" "watch"]}'
    ) in missing
    assert refused.json()["details"] == {
        "name": "carol-edit",
        "group": RBAC,
        "kind": "rolebindings",
    }
    bind_edit = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": "bind-edit"},
        "rules": [
            {
                "apiGroups": [RBAC],
                "resources": ["clusterroles"],
                "verbs": ["bind"],
                "resourceNames": ["edit"],
            }
        ],
    }
    cluster.admin("POST", f"/apis/{RBAC}/v1/namespaces/{namespace}/roles", bind_edit)
    cluster.admin("POST", path, role_binding("carol-bind-edit", "bind-edit", [carol], kind="Role"))
    allowed = raw_request(cluster, "POST", path, wanted, token="carol-token")
    assert allowed.status == 201, allowed.body
    admin = raw_request(
        cluster, "POST", path, role_binding("carol-admin", "admin", [carol]), token="carol-token"
    )
    assert admin.status == 403  # bind covers edit only, and admin holds more than edit


def test_a_role_with_rights_the_writer_lacks_is_refused(cluster):
    namespace = create_namespace(cluster, "esc2")
    bind(
        cluster,
        namespace,
        "alice-admin",
        "admin",
        {"apiGroup": RBAC, "kind": "User", "name": "alice"},
    )
    roles = f"/apis/{RBAC}/v1/namespaces/{namespace}/roles"
    fine = {
        "metadata": {"name": "pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    assert raw_request(cluster, "POST", roles, fine, token="alice-token").status == 201
    nodes = {
        "metadata": {"name": "n"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }
    refused = raw_request(cluster, "POST", roles, nodes, token="alice-token")
    assert refused.status == 403
    assert refused.json()["message"].endswith(
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}'
    )


def test_bootstrap_roles_follow_upstream(cluster):
    def rules(name: str) -> list[dict]:
        return cluster.admin("GET", f"/apis/{RBAC}/v1/clusterroles/{name}")["rules"]

    edit, view, admin = rules("edit"), rules("view"), rules("admin")
    claims = {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims", "resourceclaimtemplates"],
        "verbs": ["create", "delete", "deletecollection", "patch", "update"],
    }
    assert claims in edit and claims in admin and claims not in view
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in view)
    assert not any(RBAC in rule.get("apiGroups", []) for rule in edit)
    assert any(RBAC in rule.get("apiGroups", []) for rule in admin)
    assert rules("cluster-admin")[0] == {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    binding = cluster.admin("GET", f"/apis/{RBAC}/v1/clusterrolebindings/system:public-info-viewer")
    assert [s["name"] for s in binding["subjects"]] == [
        "system:authenticated",
        "system:unauthenticated",
    ]


def test_aggregation_adds_labelled_cluster_roles_to_edit(cluster):
    extra = {
        "metadata": {
            "name": "gpus-extra",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"},
        },
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}],
    }
    cluster.admin("POST", f"/apis/{RBAC}/v1/clusterroles", extra)
    for role in ("edit", "admin"):
        rules = cluster.admin("GET", f"/apis/{RBAC}/v1/clusterroles/{role}")["rules"]
        assert extra["rules"][0] in rules
    cluster.admin("DELETE", f"/apis/{RBAC}/v1/clusterroles/gpus-extra")
    assert (
        extra["rules"][0] not in cluster.admin("GET", f"/apis/{RBAC}/v1/clusterroles/edit")["rules"]
    )


def test_namespace_deletion_removes_its_rbac_objects(cluster):
    namespace = create_namespace(cluster, "gone")
    bind(cluster, namespace, "b", "view", {"apiGroup": RBAC, "kind": "User", "name": "alice"})
    cluster.admin(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "sa"}}
    )
    cluster.admin("DELETE", f"/api/v1/namespaces/{namespace}")
    kind = cluster.api.kinds[(RBAC, "rolebindings")]
    wait_until(lambda: not cluster.store.list(kind, namespace)[0], timeout=10)
    accounts = cluster.api.kinds[("", "serviceaccounts")]
    assert not cluster.store.list(accounts, namespace)[0]


def test_kubectl_apply_of_rbac_objects_validates_on_the_server(cluster, tmp_path):
    namespace = create_namespace(cluster, "apply")
    manifest = f"""apiVersion: {RBAC}/v1
kind: RoleBinding
metadata:
  name: applied
  namespace: {namespace}
roleRef:
  apiGroup: {RBAC}
  kind: ClusterRole
  name: view
subjects:
- apiGroup: {RBAC}
  kind: User
  name: alice
"""
    applied = kubectl(cluster.kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "rolebinding.rbac.authorization.k8s.io/applied created"
    typo = kubectl(
        cluster.kubeconfig, "apply", "-f", "-", stdin=manifest.replace("subjects:", "subjectz:")
    )
    assert 'unknown field "subjectz"' in typo.stderr
