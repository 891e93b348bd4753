"""URL routing: discovery, OpenAPI, the admin API under /_kubesim/, and resource verbs."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from kubesim.apiserver import discovery, eviction, handlers, openapi, proxy, streams
from kubesim.apiserver import kueue_visibility as visibility
from kubesim.apiserver.faults import Faults, parse_fault
from kubesim.apiserver.listing import list_objects
from kubesim.auth import escalation, reviews
from kubesim.auth.authentication import impersonate
from kubesim.auth.rbac import Attributes, Authorizer, forbidden, request_attributes
from kubesim.base import errors
from kubesim.base.http import Request, Response, Stream, json_response
from kubesim.controllers.namespaces import terminate
from kubesim.registry import binding, events, pod_security, quota
from kubesim.registry.kinds import ALPHA_VERSION
from kubesim.registry.store import Store

RESOURCE_GROUP = "resource.k8s.io"
NOT_FOUND_PAGE = Response(404, b"404 page not found\n", "text/plain; charset=utf-8")
# (group, version) -> (minor deprecated in, minor removed in), from the API lifecycle files.
DEPRECATED = {(RESOURCE_GROUP, "v1beta1"): (35, 38), (RESOURCE_GROUP, "v1beta2"): (36, 39)}
CREATE_ONLY = ("token", "eviction", "binding")  # subresources whose only verb is create
VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass
class Target:
    kind: Any
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None
    k8s_version: str  # the release served decides which fields a version has


def deprecation_warning(target: Target, k8s_version: str) -> str | None:
    """The warning a 1.35+ server adds to every beta resource.k8s.io response."""
    lifecycle = DEPRECATED.get((target.kind.group, target.version))
    minor = int(k8s_version.lstrip("v").split(".")[1])
    if not lifecycle or minor < lifecycle[0]:
        return None
    deprecated, removed = lifecycle
    return (
        f"{target.kind.group}/{target.version} {target.kind.kind} is deprecated in "
        f"v1.{deprecated}+, unavailable in v1.{removed}+"
    )


class Api:
    """Everything a request can reach: store, kinds, faults, the kubelet for logs."""

    def __init__(
        self,
        *,
        store: Store,
        kinds: dict[tuple[str, str], Any],
        served_versions: tuple[str, ...],
        k8s_version: str,
        faults: Faults,
    ) -> None:
        self.store = store
        self.kinds = kinds
        self.served_versions = tuple(served_versions)
        self.k8s_version = k8s_version
        self.faults = faults
        self.kubelet: Any = None
        self.server_address = ""
        self.stopping = threading.Event()
        self.namespace_kind = kinds[("", "namespaces")]
        self.authenticator: Any = None  # kubesim.auth.authentication.Authenticator, set by start()
        self.authorizer = Authorizer(store, kinds)
        self.quota: Any = None  # kubesim.registry.quota.QuotaController, set by start()
        # Pod Security's levels for namespaces without its labels (the topology's), and the
        # annotations its audit mode adds to audit events.
        self.pod_security_defaults: dict[str, str] = {}
        self.pod_security_audit = pod_security.AuditLog()
        self.optional_groups: dict[str, list[str]] = {}  # Kueue's, where the topology has it

    def terminate_namespace(self, name: str) -> dict[str, Any]:
        return terminate(self.store, self.namespace_kind, name)

    def group_versions(self) -> dict[str, list[str]]:
        """The served groups, in the order upstream lists them (its group priorities)."""
        return {
            "apps": ["v1"],
            events.GROUP: ["v1"],
            reviews.AUTHENTICATION: ["v1"],
            reviews.AUTHORIZATION: ["v1"],
            "batch": ["v1"],
            "networking.k8s.io": ["v1"],
            "policy": ["v1"],
            "rbac.authorization.k8s.io": ["v1"],
            RESOURCE_GROUP: list(self.served_versions),
            **self.optional_groups,
        }

    def resource_list(self, group: str, version: str) -> dict[str, Any]:
        if group in reviews.RESOURCES:
            return reviews.resource_list(group)
        if group == visibility.VISIBILITY_GROUP:
            return visibility.resource_list(version)
        group_version = f"{group}/{version}" if group else version
        kinds = [kind for kind in self.kinds_in(group) if self.serves(kind, version)]
        return discovery.resource_list(group_version, kinds, self.k8s_version)

    def serves(self, kind: Any, version: str) -> bool:
        """Whether `kind` is served in `version` (DeviceTaintRule only in v1alpha3, and only
        kinds other than it there)."""
        if kind.group != RESOURCE_GROUP:
            return True
        if kind.only_version:
            return version in kind.served_versions(self.served_versions)
        return version != ALPHA_VERSION

    def _aggregated(self, groups: dict[str, list[str]]) -> Response:
        document = discovery.aggregated_list(
            {
                group: [
                    discovery.aggregated_version(version, self.resource_list(group, version))
                    for version in versions
                ]
                for group, versions in groups.items()
            }
        )
        response = json_response(200, document)
        response.content_type = discovery.AGGREGATED
        return response

    def admitting(self, kind: Any, obj: dict[str, Any]) -> Any:
        """Around a create: ResourceQuota admission (registry.quota), atomic with the create."""
        return quota.guarded_create(self.quota)(kind, obj)

    def admit_write(self, request: Request, target: Target, obj: dict[str, Any]) -> list[str]:
        """RBAC escalation prevention before a Role or binding is stored, and Pod Security
        admission before a Pod or workload is created (403, or warnings to send back)."""
        escalation.check_write(self.authorizer, request.user, target, obj)
        creating = not obj.get("metadata", {}).get("resourceVersion")
        if not creating or target.subresource or not target.namespace:
            return []
        namespace = self.store.get(self.namespace_kind, None, target.namespace)
        return pod_security.admit(
            namespace,
            target.kind.plural,
            obj,
            self.pod_security_defaults,
            self.pod_security_audit,
        )

    def _authorize(self, request: Request) -> None:
        """Impersonation, then RBAC on the request's attributes (403 Forbidden)."""
        if request.user is None:
            return  # called without the HTTPS front (unit tests)
        request.user = impersonate(request.user, request.headers, self.authorizer.check())
        if request.user.privileged:
            return
        if request.path.startswith("/_kubesim/"):
            raise forbidden(Attributes(request.user, request.method.lower(), request.path))
        attrs = request_attributes(request.user, request.method, request.path, request.query)
        self.authorizer.require(attrs)

    def kinds_in(self, group: str) -> list[Any]:
        return [kind for (kind_group, _), kind in self.kinds.items() if kind_group == group]

    def __call__(self, request: Request) -> Response | Stream:
        self._authorize(request)
        if request.path.startswith("/_kubesim/"):
            return self._admin(request)
        failure = self.faults.before_request(request.path)
        if failure:
            return _fault_response(failure)
        parts = [part for part in request.path.split("/") if part]
        if request.method not in ("GET", "HEAD") and parts[:1] not in (["api"], ["apis"]):
            raise errors.method_not_allowed()
        return self._route(request, parts)

    def _route(self, request: Request, parts: list[str]) -> Response | Stream:
        if parts == ["version"]:
            return json_response(200, discovery.version_document(self.k8s_version))
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if parts[:1] == ["openapi"]:
            document = openapi.document(self, parts[1:])
            if not document:
                return NOT_FOUND_PAGE
            response = json_response(200, document)
            if parts == ["openapi", "v3"]:  # the index is sent as text (recording 08)
                response.content_type = "text/plain; charset=utf-8"
            return response
        if parts[:1] == ["api"]:
            return self._core(request, parts[1:])
        if parts[:1] == ["apis"]:
            return self._groups(request, parts[1:])
        return NOT_FOUND_PAGE

    def _core(self, request: Request, parts: list[str]) -> Response | Stream:
        if not parts and discovery.wants_aggregated(request.headers.get("Accept", "")):
            return self._aggregated({"": ["v1"]})
        if not parts:
            return json_response(200, discovery.api_versions(self.server_address))
        if parts[0] != "v1":
            return NOT_FOUND_PAGE
        if len(parts) == 1:
            return json_response(200, self.resource_list("", "v1"))
        if (
            len(parts) >= 6
            and parts[1] == "namespaces"
            and parts[3] in ("pods", "services")
            and parts[5] == "proxy"
        ):
            marker = f"/{parts[3]}/{parts[4]}/proxy"
            path = request.path.split(marker, 1)[1] or "/"
            return proxy.proxy(self, request, parts[3], parts[2], unquote(parts[4]), path)
        return self._resource(request, "", "v1", parts[1:])

    def _groups(self, request: Request, parts: list[str]) -> Response | Stream:
        groups = self.group_versions()
        if not parts and discovery.wants_aggregated(request.headers.get("Accept", "")):
            return self._aggregated(groups)
        if not parts:
            return json_response(200, discovery.api_group_list(groups))
        versions = groups.get(parts[0])
        if not versions:  # recording 04: an unknown group gets the plain page
            return NOT_FOUND_PAGE
        if len(parts) > 1 and parts[1] not in versions:
            raise errors.resource_not_found()
        if len(parts) == 1:
            return json_response(200, discovery.api_group(parts[0], versions))
        if len(parts) == 2:
            return json_response(200, self.resource_list(parts[0], parts[1]))
        if parts[0] in reviews.RESOURCES:
            return reviews.handle(self, request, parts[0], parts[2:])
        if parts[0] == visibility.VISIBILITY_GROUP:
            return visibility.handle(self, request, parts[2:])
        return self._resource(request, parts[0], parts[1], parts[2:])

    def _target(self, group: str, version: str, parts: list[str]) -> Target:
        namespace = None
        if (
            len(parts) >= 3
            and parts[0] == "namespaces"
            and getattr(self.kinds.get((group, parts[2])), "namespaced", False)
        ):
            namespace, parts = parts[1], parts[2:]
        kind = self.kinds.get((group, parts[0]))
        if (
            kind is None
            or not self.serves(kind, version)
            or len(parts) > 3
            or (kind.namespaced and namespace is None and len(parts) > 1)
        ):
            raise errors.resource_not_found()
        name = parts[1] if len(parts) > 1 else None
        subresource = parts[2] if len(parts) > 2 else None
        if subresource and subresource not in kind.subresources:
            raise errors.resource_not_found()
        return Target(kind, version, namespace, name, subresource, self.k8s_version)

    def _resource(
        self, request: Request, group: str, version: str, parts: list[str]
    ) -> Response | Stream:
        target = self._target(group, version, parts)
        verb = self._verb(request, target)
        if verb != "log":
            handlers.negotiate(request, verb)
        # A dry run writes nothing: counted apart, so counts of writes are of real ones.
        counted = f"dry-run {verb}" if request.query.get("dryRun") == "All" else verb
        self.faults.count(counted, target.kind.plural)
        response = self._answer(request, target, verb)
        warning = deprecation_warning(target, self.k8s_version)
        if warning:
            response.headers.append(("Warning", f'299 - "{warning}"'))
        return response

    def _answer(self, request: Request, target: Target, verb: str) -> Response | Stream:
        if verb == "watch":
            return streams.watch(self, request, target)
        if verb == "log":
            return streams.pod_log(self, request, target)
        if target.subresource == "token":
            return reviews.token_request(self, request, target)
        if target.subresource == "eviction":
            return eviction.evict(self, request, target)
        if target.subresource == "binding":
            return binding.bind(self, request, target)
        return self._verb_handler(request, target, verb)(self, request, target)

    def _verb(self, request: Request, target: Target) -> str:
        if target.subresource == "log":
            if request.method != "GET":
                raise errors.method_not_allowed()
            return "log"
        if target.subresource in CREATE_ONLY:
            if request.method != "POST":
                raise errors.method_not_allowed()
            return "create"
        if request.method in ("GET", "HEAD"):
            if target.name:
                return "get"
            return "watch" if request.flag("watch") else "list"
        if request.method == "POST" and target.name:
            raise errors.method_not_allowed()
        return VERB_BY_METHOD[request.method]

    def _verb_handler(self, request: Request, target: Target, verb: str) -> Any:
        if target.name is None:
            collection = {
                "list": list_objects,
                "create": handlers.create,
                "delete": handlers.delete_collection,
            }
            refused = verb == "delete" and "deletecollection" not in discovery.verbs(target.kind)
            if verb not in collection or refused:
                raise errors.method_not_allowed()
            return collection[verb]
        if target.subresource == "finalize":
            if verb != "update":
                raise errors.method_not_allowed()
            target.subresource = None
        single = {
            "get": handlers.get,
            "update": handlers.update,
            "patch": handlers.patch_object,
            "delete": handlers.delete,
        }
        if target.subresource and verb == "delete":
            raise errors.method_not_allowed()
        return single[verb]

    # -- admin API (tests and benchmarks only) -------------------------------------------

    def _admin(self, request: Request) -> Response:
        route = (request.method, request.path.rstrip("/"))
        if route == ("GET", "/_kubesim/counters"):
            return json_response(200, {"requests": self.faults.counters()})
        if route == ("POST", "/_kubesim/counters/reset"):
            self.faults.reset_counters()
            return json_response(200, {"requests": {}})
        if route == ("POST", "/_kubesim/faults"):
            fault = parse_fault(_json_body(request))
            return json_response(200, {"id": self.faults.add(fault)})
        if route == ("DELETE", "/_kubesim/faults"):
            self.faults.clear()
            return json_response(200, {"ok": True})
        if route[1].startswith("/_kubesim/dcgm"):
            return self._dcgm_admin(request, route)
        if route == ("POST", "/_kubesim/compact"):
            self.store.compact()
            return json_response(200, {"compactedResourceVersion": self.store.compacted_rv})
        return NOT_FOUND_PAGE

    def _dcgm_admin(self, request: Request, route: tuple[str, str]) -> Response:
        """`POST /_kubesim/dcgm/xid {"node", "device", "xid"}`: the GPU reports an XID error;
        `DELETE /_kubesim/dcgm/xid` clears them; `POST /_kubesim/dcgm {"draLabels": false}`
        plays an exporter without KUBERNETES_ENABLE_DRA (or older than its DRA labels)."""
        if self.kubelet is None:
            raise errors.bad_request("kubesim runs without a kubelet: no GPU metrics")
        metrics = self.kubelet.gpu_metrics
        body = _json_body(request) if request.method == "POST" else {}
        if route == ("POST", "/_kubesim/dcgm"):
            metrics.dra_labels = bool(body.get("draLabels", True))
            return json_response(200, {"draLabels": metrics.dra_labels})
        if route == ("DELETE", "/_kubesim/dcgm/xid"):
            metrics.clear_xids()
            return json_response(200, {"ok": True})
        if route != ("POST", "/_kubesim/dcgm/xid"):
            return NOT_FOUND_PAGE
        try:
            metrics.raise_xid(str(body.get("node")), str(body.get("device")), int(body["xid"]))
        except (KeyError, TypeError, ValueError):
            raise errors.bad_request(
                "give node, device (as published) and xid (a number)"
            ) from None
        return json_response(200, {"ok": True})


def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        raise errors.bad_request("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a JSON object")
    return body


def _fault_response(failure: errors.ApiError) -> Response:
    if failure.code == 429:
        # The max-in-flight filter's answer (apiserver filters.tooManyRequests): plain text
        # from http.Error, and Retry-After: 1.
        body = f"{failure.message}\n".encode()
        headers = [("Retry-After", "1"), ("X-Content-Type-Options", "nosniff")]
        return Response(429, body, "text/plain; charset=utf-8", headers)
    return json_response(failure.code, failure.status())
