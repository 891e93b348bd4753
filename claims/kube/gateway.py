"""One connection to one cluster: the only code in the portal that talks to Kubernetes.

Responses are handled as plain JSON dicts rather than the client's generated models, which
differ between client versions and reject some of what the servers send (reference dra.md §8).
The kinds and their paths are in resources.py, which versions a cluster serves in discovery.py.
"""

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from claims.kube import kueue, parsing, permissions, pod_parsing, preflight
from claims.kube.connection import SERVICE_ACCOUNT_DIR, Connection, json_object
from claims.kube.discovery import ResourceDiscovery
from claims.kube.errors import (
    KubeError,
    PermanentKubeError,
    ResourceVersionExpired,
    TransientKubeError,
    error_for_response,
)
from claims.kube.parsing import (
    ClaimState,
    ClusterInfo,
    DeviceClassInfo,
    DeviceInfo,
    Holding,
    PreflightCheck,
    TaintRule,
)
from claims.kube.pod_parsing import JobState, LogLine, PodState
from claims.kube.pod_reads import PodEvent, PodReads
from claims.kube.ratelimit import DEFAULT_BURST, DEFAULT_QPS, Limiter, TokenBucket
from claims.kube.resources import (
    GROUP_VERSIONS,
    RESOURCE_KINDS,
    TAINT_RULE_VERSION,
    Obj,
    _full_api_version,
    _object_path,
)

__all__ = [
    "ClaimState",
    "ClusterGateway",
    "ClusterInfo",
    "DeviceClassInfo",
    "DeviceInfo",
    "JobState",
    "KubeError",
    "LogLine",
    "PermanentKubeError",
    "PodEvent",
    "PodState",
    "PreflightCheck",
    "ResourceVersionExpired",
    "TaintRule",
    "TransientKubeError",
]

FIELD_MANAGER = "gpu-portal"
DEFAULT_TIMEOUT = (3.0, 10.0)  # connect, read (seconds)


class ClusterGateway(PodReads):
    def __init__(
        self,
        kubeconfig_path: str | None = None,
        context: str | None = None,
        *,
        in_cluster: bool = False,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        limiter: Limiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        kubeconfig: Obj | None = None,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
    ) -> None:
        """`clock` and `sleep` are for tests (rate limit, credential and discovery ages);
        `kubeconfig`: one held in memory (decrypted), instead of kubeconfig_path; `limiter`:
        a rate limit shared with others (else one of its own, of `qps` and `burst`)."""
        limiter = limiter or TokenBucket(qps, burst, clock=clock, sleep=sleep)
        self.connection = Connection(
            kubeconfig_path,
            context,
            in_cluster,
            timeout=timeout,
            limiter=limiter,
            clock=clock,
            sleep=sleep,
            kubeconfig=kubeconfig,
            service_account_dir=service_account_dir,
        )
        self._discovery = ResourceDiscovery(self._get_json, clock)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "ClusterGateway":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- transport -------------------------------------------------------------------

    def _call(self, method: str, path: str, query: Obj | None = None, **kwargs: Any) -> bytes:
        return self.connection.call(method, path, query, **kwargs)

    def _get_json(self, path: str, query: dict[str, Any] | None = None) -> Obj:
        return json_object(self._call("GET", path, query))

    def read_path(self, path: str, query: dict[str, Any] | None = None) -> Obj:
        """A GET of a path outside the kinds (Kueue's visibility API: claims/kube/kueue.py)."""
        return self._get_json(path, query)

    def _list(self, path: str, label_selector: str = "") -> list[Obj]:
        query = {"labelSelector": label_selector} if label_selector else None
        return self._get_json(path, query).get("items") or []

    # --- discovery (discovery.py) ----------------------------------------------------

    def discover(self) -> ClusterInfo:
        return self._discovery.discover()

    def _cached_info(self) -> ClusterInfo:
        return self._discovery.cached_info()

    def claim_api_version(self) -> str:
        """The resource.k8s.io version to write claims in: the preferred one served now."""
        return self._discovery.resource_version()

    # --- writes ----------------------------------------------------------------------

    def apply(self, manifest: Obj) -> Obj:
        """Server-side apply: creates or updates; running it twice changes nothing."""
        metadata = manifest["metadata"]
        path = _object_path(
            manifest["apiVersion"], manifest["kind"], metadata.get("namespace"), metadata["name"]
        )
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        payload = self._call(
            "PATCH", path, query, body=manifest, content_type="application/apply-patch+yaml"
        )
        return json_object(payload)

    def resume_job(self, namespace: str, name: str) -> Obj:
        """Let a suspended Job start its Pods (spec.suspend false, as Kueue does)."""
        path = _object_path("batch/v1", "Job", namespace, name)
        body = {"spec": {"suspend": False}}
        payload = self._call("PATCH", path, body=body, content_type="application/merge-patch+json")
        return json_object(payload)

    def create(self, manifest: Obj, *, dry_run: bool = False) -> Obj:
        """POST: a new object, or PermanentKubeError 409 AlreadyExists if the name is taken.
        `dry_run`: validated and admitted by the server, answered, and not stored."""
        path = _object_path(
            manifest["apiVersion"], manifest["kind"], manifest["metadata"].get("namespace")
        )
        query = {"dryRun": "All"} if dry_run else None
        return json_object(self._call("POST", path, query, body=manifest))

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation_policy: str = "",
    ) -> bool:
        """True when deleted (or already gone); with `uid`, only that very object is deleted:
        False when the object there now is another one (precondition failed, 409).
        `propagation_policy`: "Background" deletes a Job's Pods after it (a Job's default,
        Orphan, would leave them running on the GPU)."""
        body: Obj | None = {"preconditions": {"uid": uid}} if uid else None
        if propagation_policy:
            body = {**(body or {}), "propagationPolicy": propagation_policy}

        def attempt(version: str) -> bool:
            try:
                self._call("DELETE", _object_path(version, kind, namespace, name), body=body)
            except PermanentKubeError as e:
                if e.status == 409 and uid:
                    return False
                if e.status == 404 and not e.resource_unserved:
                    return True
                raise
            return True

        return self._discovery.versioned(_full_api_version(api_version, kind), attempt)

    # --- reads -----------------------------------------------------------------------

    def read(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The object, or None when it does not exist."""

        def attempt(version: str) -> Obj | None:
            try:
                return self._get_json(_object_path(version, kind, namespace, name))
            except PermanentKubeError as e:
                if e.status == 404 and not e.resource_unserved:
                    return None
                raise

        return self._discovery.versioned(_full_api_version(api_version, kind), attempt)

    def _list_resources(self, kind: str, label_selector: str = "") -> list[Obj]:
        def attempt(version: str) -> list[Obj]:
            return self._list(_object_path(version, kind, None), label_selector)

        return self._discovery.versioned(self._discovery.resource_version(), attempt)

    def _collection_path(self, kind: str) -> str:
        """Every namespace's objects of kind, at the version this cluster prefers."""
        if kind in RESOURCE_KINDS:
            return _object_path(self._discovery.resource_version(), kind, None)
        return _object_path(GROUP_VERSIONS.get(kind, "v1"), kind, None)

    def list_with_version(self, kind: str, label_selector: str) -> tuple[list[Obj], str]:
        """Matching objects and the list's resourceVersion, where a watch carries on."""
        query = {"labelSelector": label_selector} if label_selector else None
        listed = self._get_json(self._collection_path(kind), query)
        return listed.get("items") or [], listed.get("metadata", {}).get("resourceVersion", "")

    def watch(
        self,
        kind: str,
        label_selector: str,
        resource_version: str,
        timeout_seconds: int,
        on_open: Callable[[Callable[[], None]], None] | None = None,
        silence_seconds: float | None = None,
    ) -> Iterator[tuple[str, Obj]]:
        """(type, object) of each change after resource_version, bookmarks included, until
        the server ends the watch (about timeout_seconds). ResourceVersionExpired when the
        version is too old to resume from (list again). on_open: as Connection.stream.
        A stream silent for silence_seconds (default: well past the server's own timeout,
        bookmarks keep a healthy one talking) is taken for dead: TransientKubeError."""
        query = {
            "watch": "1",
            "labelSelector": label_selector,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        silence = silence_seconds or timeout_seconds + 30
        lines = self.connection.stream(
            self._collection_path(kind), query, read_timeout=silence, on_open=on_open
        )
        for line in lines:
            event = json_object(line)
            kind_of_event, obj = event.get("type", ""), event.get("object") or {}
            if kind_of_event == "ERROR":
                if obj.get("code") == 410:
                    raise ResourceVersionExpired(obj.get("message") or "resourceVersion expired")
                status = int(obj.get("code") or 500)
                raise error_for_response(status, json.dumps(obj).encode(), obj.get("reason", ""))
            yield kind_of_event, obj

    def list_device_classes(self) -> list[DeviceClassInfo]:
        classes = self._list_resources("DeviceClass")
        return sorted((parsing.device_class_info(o) for o in classes), key=_by_name)

    def list_devices(self) -> list[DeviceInfo]:
        return parsing.devices_from_slices(self._list_resources("ResourceSlice"))

    def list_claims(self, label_selector: str) -> list[ClaimState]:
        """All matching claims in every namespace, in one API call."""
        claims = self._list_resources("ResourceClaim", label_selector)
        return [parsing.claim_state(o) for o in claims]

    def list_taint_rules(self) -> list[TaintRule]:
        """The DeviceTaintRules (resource.k8s.io/v1alpha3); [] where it is not served."""
        if TAINT_RULE_VERSION not in self._cached_info().resource_versions:
            return []
        found = self._list(self._collection_path("DeviceTaintRule"), "")
        return [parsing.taint_rule(o) for o in found]

    def list_holdings(self, label_selector: str) -> list[Holding]:
        """What the matching claims in every namespace hold (parsing.claim_holding)."""
        claims = self._list_resources("ResourceClaim", label_selector)
        return [parsing.claim_holding(o) for o in claims]

    def list_pods(self, label_selector: str) -> list[PodState]:
        """All matching Pods in every namespace, in one API call."""
        return [pod_parsing.pod_state(o) for o in self._list("/api/v1/pods", label_selector)]

    def list_namespaces(self, label_selector: str) -> list[Obj]:
        """Matching Namespaces as the cluster has them (uid, labels, deletionTimestamp)."""
        return self._list("/api/v1/namespaces", label_selector)

    def list_access_objects(self, label_selector: str) -> dict[str, list[Obj]]:
        """Matching ServiceAccounts and RoleBindings in every namespace, one call each."""
        return {
            "ServiceAccount": self._list("/api/v1/serviceaccounts", label_selector),
            "RoleBinding": self._list(
                "/apis/rbac.authorization.k8s.io/v1/rolebindings", label_selector
            ),
        }

    # --- access for users ------------------------------------------------------------

    def request_token(
        self,
        namespace: str,
        service_account: str,
        *,
        expiration_seconds: int,
        audiences: list[str] | None = None,
    ) -> tuple[str, datetime]:
        """A TokenRequest for the ServiceAccount: the token and when it expires."""
        path = _object_path("v1", "ServiceAccount", namespace, service_account) + "/token"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds, "audiences": audiences or []},
        }
        status = json_object(self._call("POST", path, body=body)).get("status") or {}
        expires = parsing.parse_time(status.get("expirationTimestamp"))
        if not status.get("token") or expires is None:
            raise TransientKubeError(f"the cluster issued no token: {status!r}"[:300])
        return status["token"], expires

    def kubeconfig_for(
        self, *, token: str, namespace: str, cluster_name: str, user_name: str
    ) -> Obj:
        """A kubeconfig (a dict; dump it as YAML) reaching this cluster as `token`."""
        context_name = f"{user_name}@{cluster_name}"
        context = {"cluster": cluster_name, "user": user_name, "namespace": namespace}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": self.connection.cluster_entry()}],
            "users": [{"name": user_name, "user": {"token": token}}],
            "contexts": [{"name": context_name, "context": context}],
            "current-context": context_name,
        }

    # --- what this identity may do -------------------------------------------------------

    def missing_permissions(self, access_role: str) -> list[permissions.Permission]:
        """The permissions the portal needs that the cluster says this identity lacks, one
        SelfSubjectAccessReview each (any authenticated identity may ask: system:basic-user)."""
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        missing = []
        for permission in permissions.needed(access_role):
            body = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": permission.review_attributes()},
            }
            status = json_object(self._call("POST", path, body=body)).get("status") or {}
            if not status.get("allowed"):
                missing.append(permission)
        return missing

    def _node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self._list("/api/v1/nodes")]

    def preflight(self) -> list[PreflightCheck]:
        """The seed's prerequisites, each with a plain-words detail."""
        info = self.discover()
        checks = [
            preflight.check_server_version(info),
            preflight.check_dra_served(info),
            preflight.check_scheduler_dra(info),
        ]
        if info.preferred_resource_version is None:
            return checks + preflight.skipped_without_dra()
        devices, classes = self.list_devices(), self.list_device_classes()
        if info.kueue_versions:  # Kueue queues here: can it admit the portal's classes?
            checks += kueue.preflight_checks(self, [c.name for c in classes])
        return [
            *checks,
            preflight.check_device_classes(classes),
            preflight.check_gpu_devices(devices),
            preflight.check_gpu_nodes(devices, self._node_names()),
        ]


def _by_name(item: DeviceClassInfo) -> str:
    return item.name
