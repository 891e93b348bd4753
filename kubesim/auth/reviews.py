"""Requests that store nothing: TokenRequest (serviceaccounts/token), SelfSubjectAccessReview
(`kubectl auth can-i`), SelfSubjectRulesReview (`kubectl auth can-i --list`) and
SelfSubjectReview (`kubectl auth whoami`), with their discovery."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from kubesim.auth.authentication import API_AUDIENCES
from kubesim.auth.rbac import Attributes
from kubesim.base import errors, protobuf
from kubesim.base.http import Request, Response, json_response
from kubesim.registry.validation import INVALID, FieldError

AUTHENTICATION = "authentication.k8s.io"
AUTHORIZATION = "authorization.k8s.io"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
# group -> served resources: plural -> kind
RESOURCES = {
    AUTHENTICATION: {"selfsubjectreviews": "SelfSubjectReview"},
    AUTHORIZATION: {
        "selfsubjectaccessreviews": "SelfSubjectAccessReview",
        "selfsubjectrulesreviews": "SelfSubjectRulesReview",
    },
}


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resource_list(group: str) -> dict[str, Any]:
    resources = [
        {"name": plural, "singularName": kind.lower(), "namespaced": False, "kind": kind,
         "verbs": ["create"]}
        for plural, kind in sorted(RESOURCES[group].items())
    ]  # fmt: skip
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/v1",
        "resources": resources,
    }


def _object(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}


def _decode(request: Request) -> Any:
    try:
        if request.headers.get("Content-Type", "").startswith(protobuf.CONTENT_TYPE):
            return protobuf.decode_object(request.body)
        return json.loads(request.body or b"{}")
    except ValueError:
        return None


def _body(request: Request, group: str, kind: str) -> dict[str, Any]:
    body = _decode(request)
    if not isinstance(body, dict):
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {kind}): couldn't get "
            "version/kind; json parse error"
        )
    expected = f"{group}/v1"
    if body.setdefault("apiVersion", expected) != expected or body.setdefault("kind", kind) != kind:
        raise errors.bad_request(
            f"the API version in the data ({body['apiVersion']}) does not match the expected "
            f"API version ({expected})"
        )
    return body


def token_request(api: Any, request: Request, target: Any) -> Response:
    """POST .../serviceaccounts/<name>/token (registry/core/serviceaccount/storage/token.go)."""
    if request.method != "POST":
        raise errors.method_not_allowed()
    body = _body(request, AUTHENTICATION, "TokenRequest")
    meta = _object(body, "metadata")
    for key, value in (("name", target.name), ("namespace", target.namespace)):
        if meta.get(key) and meta[key] != value:
            detail = f"must match the service account {key} if specified"
            problem = FieldError(INVALID, f"metadata.{key}", meta[key], detail)
            raise errors.invalid(AUTHENTICATION, "TokenRequest", target.name, [problem])
    account = api.store.get(target.kind, target.namespace, target.name)
    spec = _object(body, "spec")
    audiences = spec.get("audiences") or list(API_AUDIENCES)
    seconds = spec.get("expirationSeconds") or DEFAULT_EXPIRATION
    _check_expiration(seconds)
    now = time.time()
    token = api.authenticator.issue(account, audiences, seconds, now)
    answer = {
        "kind": "TokenRequest",
        "apiVersion": f"{AUTHENTICATION}/v1",
        "metadata": {
            "name": target.name,
            "namespace": target.namespace,
            "creationTimestamp": _stamp(now),
        },
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": None},
        "status": {"token": token, "expirationTimestamp": _stamp(now + seconds)},
    }
    return json_response(201, answer)


def _check_expiration(seconds: Any) -> None:
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise errors.bad_request("spec.expirationSeconds: must be an integer")
    problems = []
    if seconds < MIN_EXPIRATION:
        detail = "may not specify a duration less than 10 minutes"
        problems.append(FieldError(INVALID, "spec.expirationSeconds", seconds, detail))
    if seconds > 1 << 32:
        detail = "may not specify a duration larger than 2^32 seconds"
        problems.append(FieldError(INVALID, "spec.expirationSeconds", seconds, detail))
    if problems:
        raise errors.invalid(AUTHENTICATION, "TokenRequest", "", problems)


def handle(api: Any, request: Request, group: str, parts: list[str]) -> Response:
    """/apis/<group>/v1/<plural>: only POST of the reviews served."""
    kind = RESOURCES[group].get(parts[0]) if len(parts) == 1 else None
    if kind is None:
        raise errors.resource_not_found()
    if request.method != "POST":
        raise errors.method_not_allowed()
    body = _body(request, group, kind)
    if kind == "SelfSubjectReview":
        return _self_subject_review(request)
    if kind == "SelfSubjectRulesReview":
        return _rules_review(api, request, body)
    return _access_review(api, request, body)


def _self_subject_review(request: Request) -> Response:
    user = request.user
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    info["groups"] = list(user.groups)
    answer = {
        "kind": "SelfSubjectReview",
        "apiVersion": f"{AUTHENTICATION}/v1",
        "metadata": {"creationTimestamp": _stamp(time.time())},
        "status": {"userInfo": info},
    }
    return json_response(201, answer)


def _access_review(api: Any, request: Request, body: dict[str, Any]) -> Response:
    spec = _object(body, "spec")
    resource, non_resource = (
        _object(spec, "resourceAttributes"),
        _object(spec, "nonResourceAttributes"),
    )
    if bool(resource) == bool(non_resource):
        detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        problem = FieldError(INVALID, "spec.resourceAttributes", "null", detail)
        raise errors.invalid(AUTHORIZATION, "SelfSubjectAccessReview", "", [problem])
    if resource:
        attrs = Attributes(
            request.user, resource.get("verb") or "", "", True, resource.get("group") or "",
            resource.get("namespace") or "", resource.get("resource") or "",
            resource.get("subresource") or "", resource.get("name") or "",
        )  # fmt: skip
    else:
        path = str(non_resource.get("path") or "")
        attrs = Attributes(request.user, non_resource.get("verb") or "", path)
    allowed, reason = api.authorizer.decide(attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    meta = _object(body, "metadata")
    answer = {**body, "metadata": {**meta, "creationTimestamp": None}, "status": status}
    return json_response(201, answer)


def _rules_review(api: Any, request: Request, body: dict[str, Any]) -> Response:
    """registry/authorization/selfsubjectrulesreview/rest.go: the rules of the RBAC rule
    resolver (ClusterRoleBindings, then the namespace's RoleBindings; the system:masters
    authorizer resolves no rules), split as RBACAuthorizer.RulesFor splits them. A fresh
    object: the spec is not echoed."""
    namespace = _object(body, "spec").get("namespace") or ""
    if not isinstance(namespace, str) or not namespace:
        raise errors.bad_request("no namespace on request")
    rules, failures = api.authorizer.rules_for(request.user, namespace)
    resource_rules, non_resource_rules = [], []
    for rule in rules:
        if rule.get("resources"):
            resource_rules.append(_resource_rule(rule))
        if rule.get("nonResourceURLs"):
            urls = {"verbs": list(rule.get("verbs") or [])}
            non_resource_rules.append(urls | {"nonResourceURLs": rule["nonResourceURLs"]})
    status: dict[str, Any] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
    if failures:  # utilerrors.NewAggregate
        status["evaluationError"] = (
            failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
        )
    answer = {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": f"{AUTHORIZATION}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {},
        "status": status,
    }
    return json_response(201, answer)


def _resource_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """authorization/v1 ResourceRule: verbs always, the rest omitted when empty."""
    shown: dict[str, Any] = {"verbs": list(rule.get("verbs") or [])}
    for key in ("apiGroups", "resources", "resourceNames"):
        if rule.get(key):
            shown[key] = list(rule[key])
    return shown
