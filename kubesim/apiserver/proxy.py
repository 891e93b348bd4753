"""The pods/proxy subresource: GET /api/v1/namespaces/{ns}/pods/{name}[:port]/proxy/{path}
reaches the Pod's port as the API server's proxy does (pkg/registry/core/pod/strategy.go
ResourceLocation; apimachinery util/proxy transport.go).

The port is the one named after the Pod's name, else its first container port. A Pod
without an address answers 400 `address not allowed`; nothing listening on the port (no
server in the container, or it is not running) 500 `error trying to reach service: dial tcp
<ip>:<port>: connect: connection refused`. A redirect's Location on the same host is
rewritten to stay under the proxy path. Simplified: links inside HTML are not rewritten,
services/proxy is not served, and only the Jupyter images (kubelet/notebook.py) listen.
"""

from __future__ import annotations

from typing import Any

from kubesim.base import errors
from kubesim.base.http import Request, Response
from kubesim.registry.kinds import kind_for

PODS = kind_for("", "pods")


def _split_name_port(id_: str) -> tuple[str, str]:
    """SplitSchemeNamePort: name, name:port, or scheme:name:port."""
    parts = id_.split(":")
    if len(parts) == 1:
        return parts[0], ""
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[0] in ("http", "https"):
        return parts[1], parts[2]
    raise errors.bad_request(f'invalid pod request "{id_}"')


def _first_port(pod: dict) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("containerPort"):
                return str(port["containerPort"])
    return ""


def pod_proxy(api: Any, request: Request, namespace: str, id_: str, path: str) -> Response:
    name, port = _split_name_port(id_)
    if not name:
        raise errors.bad_request(f'invalid pod request "{id_}"')
    pod = api.store.get(PODS, namespace, name)
    port = port or _first_port(pod)
    address = (pod.get("status") or {}).get("podIP")
    if not address:
        raise errors.bad_request("address not allowed")
    server = _listening(api, pod, port)
    if server is None:
        where = f"{address}:{port}" if port else f"{address}:80"
        message = f"error trying to reach service: dial tcp {where}: connect: connection refused"
        raise errors.ApiError(500, "", message)
    answer = server.answer(request.method, path, request.query, request.headers)
    headers = []
    prefix = f"/api/v1/namespaces/{namespace}/pods/{id_}/proxy"
    for header, value in answer.headers:
        if header == "Location" and value.startswith("/"):
            value = prefix + value
        headers.append((header, value))
    return Response(answer.status, answer.body, answer.content_type, headers)


def _listening(api: Any, pod: dict, port: str) -> Any:
    kubelet = api.kubelet
    if kubelet is None or not port.isdigit():
        return None
    meta = pod["metadata"]
    running = {
        status["name"]
        for status in (pod.get("status") or {}).get("containerStatuses") or []
        if "running" in (status.get("state") or {})
    }
    for container in running:
        server = kubelet.servers.get((meta["namespace"], meta["name"], container))
        if server is not None and server.port == int(port):
            return server
    return None
