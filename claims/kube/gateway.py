"""One connection to one cluster: the only code in the portal that talks to Kubernetes.

Responses are handled as plain JSON dicts rather than the client's generated models, which
differ between client versions and reject some of what the servers send (reference dra.md §8).
"""

import json
import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client, config

from claims.kube import parsing, preflight
from claims.kube.errors import (
    KubeError,
    PermanentKubeError,
    TransientKubeError,
    error_for_response,
)
from claims.kube.parsing import (
    ClaimState,
    ClusterInfo,
    DeviceClassInfo,
    DeviceInfo,
    LogLine,
    PodState,
    PreflightCheck,
)

__all__ = [
    "ClaimState",
    "ClusterGateway",
    "ClusterInfo",
    "DeviceClassInfo",
    "DeviceInfo",
    "KubeError",
    "LogLine",
    "PermanentKubeError",
    "PodState",
    "PreflightCheck",
    "TransientKubeError",
]

FIELD_MANAGER = "gpu-portal"
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION_PREFERENCE = ("v1", "v1beta2", "v1beta1")
DEFAULT_TIMEOUT = (3.0, 10.0)  # connect, read (seconds)

# kind -> (plural, namespaced)
KINDS = {
    "Namespace": ("namespaces", False),
    "Pod": ("pods", True),
    "ResourceClaim": ("resourceclaims", True),
    "DeviceClass": ("deviceclasses", False),
    "ResourceSlice": ("resourceslices", False),
}

Obj = dict[str, Any]


def _load_configuration(
    kubeconfig_path: str | None, context: str | None, in_cluster: bool
) -> client.Configuration:
    configuration = client.Configuration()
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=kubeconfig_path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (config.ConfigException, OSError, ValueError) as e:
        raise PermanentKubeError(f"cannot load the cluster connection: {e}", 0, "Config") from e
    # Retries belong to the caller (Celery, with backoff); one quick reconnect is enough here.
    configuration.retries = urllib3.Retry(total=1, read=0, status=0, redirect=0)
    return configuration


def _object_path(api_version: str, kind: str, namespace: str | None, name: str = "") -> str:
    if kind not in KINDS:
        raise ValueError(f"the gateway does not handle kind {kind!r}")
    plural, namespaced = KINDS[kind]
    if kind in ("ResourceClaim", "DeviceClass", "ResourceSlice") and "/" not in api_version:
        api_version = f"{RESOURCE_GROUP}/{api_version}"
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    path = f"{base}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path


def _since_seconds(since: datetime) -> int:
    # Rounded up and padded: the cluster's clock may trail ours; extra lines are dropped anyway.
    age = (datetime.now(UTC) - since).total_seconds()
    return max(1, math.ceil(age) + 2)


def _drop_cut_off_line(body: bytes, limit_bytes: int) -> bytes:
    """A log cut at limitBytes ends mid-line; leave that line for the next read."""
    if len(body) < limit_bytes or body.endswith(b"\n") or b"\n" not in body:
        return body
    return body[: body.rindex(b"\n") + 1]


def _json_object(payload: bytes) -> Obj:
    try:
        obj = json.loads(payload)
    except ValueError as e:  # e.g. an HTML page from a proxy in front of the cluster
        raise TransientKubeError(f"unreadable answer from the cluster: {payload[:200]!r}") from e
    if not isinstance(obj, dict):
        raise TransientKubeError(f"unexpected answer from the cluster: {payload[:200]!r}")
    return obj


def _is_waiting_to_start(error: PermanentKubeError) -> bool:
    return error.status == 400 and (
        "waiting to start" in error.message or "ContainerCreating" in error.message
    )


class ClusterGateway:
    def __init__(
        self,
        kubeconfig_path: str | None = None,
        context: str | None = None,
        *,
        in_cluster: bool = False,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        configuration = _load_configuration(kubeconfig_path, context, in_cluster)
        # Never the global default configuration: several clusters live in one process.
        self.api_client = client.ApiClient(configuration=configuration)
        self.timeout = timeout
        self._info: ClusterInfo | None = None

    def close(self) -> None:
        self.api_client.close()

    def __enter__(self) -> "ClusterGateway":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- transport -------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> bytes:
        url = path + ("?" + urlencode(query) if query else "")
        _, full_url, headers, _, _ = self.api_client.param_serialize(
            method=method,
            resource_path=url,
            header_params={"Accept": accept, "Content-Type": content_type},
            auth_settings=["BearerToken"],
        )
        data = json.dumps(body) if body is not None else None
        try:
            response = self.api_client.call_api(
                method, full_url, headers, body=data, _request_timeout=self.timeout
            )
            payload = response.read()
        except urllib3.exceptions.HTTPError as e:
            raise TransientKubeError(f"cannot reach the cluster: {e}") from e
        except client.ApiException as e:  # TLS failures surface as status 0
            raise TransientKubeError(f"cannot reach the cluster: {e.reason}") from e
        if not 200 <= response.status <= 299:
            raise error_for_response(response.status, payload, response.reason or "")
        return payload

    def _get_json(self, path: str, query: dict[str, Any] | None = None) -> Obj:
        return _json_object(self._call("GET", path, query))

    def _list(self, path: str, label_selector: str = "") -> list[Obj]:
        query = {"labelSelector": label_selector} if label_selector else None
        return self._get_json(path, query).get("items") or []

    # --- discovery -------------------------------------------------------------------

    def _served_resource_versions(self) -> list[str]:
        try:
            group = self._get_json(f"/apis/{RESOURCE_GROUP}")
        except PermanentKubeError as e:
            if e.status == 404:
                return []
            raise
        return [v["version"] for v in group.get("versions") or []]

    def discover(self) -> ClusterInfo:
        server_version = self._get_json("/version").get("gitVersion", "")
        served = self._served_resource_versions()
        preferred = next((v for v in RESOURCE_VERSION_PREFERENCE if v in served), None)
        self._info = ClusterInfo(server_version, served, preferred)
        return self._info

    def _resource_version(self) -> str:
        info = self._info or self.discover()
        if info.preferred_resource_version is None:
            raise PermanentKubeError(
                f"the cluster does not serve {RESOURCE_GROUP} (DRA is not enabled)",
                404,
                "NotFound",
            )
        return f"{RESOURCE_GROUP}/{info.preferred_resource_version}"

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
        return _json_object(payload)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        try:
            self._call("DELETE", _object_path(api_version, kind, namespace, name))
        except PermanentKubeError as e:
            if e.status != 404:
                raise

    # --- reads -----------------------------------------------------------------------

    def list_device_classes(self) -> list[DeviceClassInfo]:
        path = _object_path(self._resource_version(), "DeviceClass", None)
        return sorted((parsing.device_class_info(o) for o in self._list(path)), key=_by_name)

    def _resource_slices(self) -> list[Obj]:
        return self._list(_object_path(self._resource_version(), "ResourceSlice", None))

    def list_devices(self) -> list[DeviceInfo]:
        return parsing.devices_from_slices(self._resource_slices())

    def list_claims(self, label_selector: str) -> list[ClaimState]:
        """All matching claims in every namespace, in one API call."""
        path = _object_path(self._resource_version(), "ResourceClaim", None)
        return [parsing.claim_state(o) for o in self._list(path, label_selector)]

    def list_pods(self, label_selector: str) -> list[PodState]:
        """All matching Pods in every namespace, in one API call."""
        return [parsing.pod_state(o) for o in self._list("/api/v1/pods", label_selector)]

    def read_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        since: datetime | None = None,
        limit_bytes: int = 262144,
    ) -> list[LogLine]:
        """Log lines from `since` on (inclusive); [] while the container has not started."""
        query: dict[str, Any] = {
            "container": container,
            "timestamps": "true",
            "limitBytes": limit_bytes,
        }
        if since is not None:
            since = since if since.tzinfo else since.replace(tzinfo=UTC)
            query["sinceSeconds"] = _since_seconds(since)
        path = _object_path("v1", "Pod", namespace, pod) + "/log"
        try:
            body = self._call("GET", path, query, accept="*/*")
        except PermanentKubeError as e:
            if _is_waiting_to_start(e):
                return []
            raise
        return parsing.log_lines(_drop_cut_off_line(body, limit_bytes), since)

    def _node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self._list("/api/v1/nodes")]

    def preflight(self) -> list[PreflightCheck]:
        """The seed's prerequisites, each with a plain-words detail."""
        info = self.discover()
        checks = [preflight.check_server_version(info), preflight.check_dra_served(info)]
        if info.preferred_resource_version is None:
            return checks + preflight.skipped_without_dra()
        devices = self.list_devices()
        return [
            *checks,
            preflight.check_device_classes(self.list_device_classes()),
            preflight.check_gpu_devices(devices),
            preflight.check_gpu_nodes(devices, self._node_names()),
        ]


def _by_name(item: DeviceClassInfo) -> str:
    return item.name
