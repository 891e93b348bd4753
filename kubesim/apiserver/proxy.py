"""The pods/proxy and services/proxy subresources: /api/v1/namespaces/{ns}/pods/{name}[:port]
/proxy/{path} reaches the Pod's port as the API server's proxy does (pkg/registry/core/pod/
strategy.go ResourceLocation; apimachinery util/proxy transport.go); .../services/{name}[:port]
/proxy/{path} one of the Service's endpoints (pkg/registry/core/service/storage ResourceLocation).

kubesim has no Endpoints objects: a Service's endpoints are worked out when asked, as the
endpoints controller would list them: the Ready Pods its selector matches, with an address,
on the port its targetPort names (a number, or a container port's name). A Service without a
selector has no Endpoints (404 `endpoints "<name>" not found`); none Ready: 503 `no endpoints
available for service "<name>"`; a port number the Service lacks: 503 `no service port <n>
found for service "<name>"`.

The port is the one named after the Pod's name, else its first container port. A Pod
without an address answers 400 `address not allowed`; nothing listening on the port (no
server in the container, or it is not running) 500 `error trying to reach service: dial tcp
<ip>:<port>: connect: connection refused`. A redirect's Location on the same host is
rewritten to stay under the proxy path. The proxy dials the Pod itself: a node fault
"unreachable" (apiserver/faults.py) fails it with `connect: no route to host`, "down" (the
kubelet's process only) leaves the Pod answering. Simplified: links inside HTML are not
rewritten, and only the Jupyter images (kubelet/notebook.py) listen.
"""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.faults import KUBELET_DIAL_ERRORS
from kubesim.base import errors
from kubesim.base.http import Request, Response
from kubesim.registry.kinds import kind_for

PODS, SERVICES = kind_for("", "pods"), kind_for("", "services")


def _split_name_port(id_: str, what: str) -> tuple[str, str]:
    """SplitSchemeNamePort: name, name:port, or scheme:name:port."""
    parts = id_.split(":")
    if len(parts) == 1:
        return parts[0], ""
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[0] in ("http", "https"):
        return parts[1], parts[2]
    raise errors.bad_request(f'invalid {what} request "{id_}"')


def _first_port(pod: dict) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("containerPort"):
                return str(port["containerPort"])
    return ""


def proxy(
    api: Any, request: Request, resource: str, namespace: str, id_: str, path: str
) -> Response:
    if resource == "services":
        pod, port = _service_endpoint(api, namespace, id_)
    else:
        name, port = _split_name_port(id_, "pod")
        if not name:
            raise errors.bad_request(f'invalid pod request "{id_}"')
        pod = api.store.get(PODS, namespace, name)
        port = port or _first_port(pod)
    address = (pod.get("status") or {}).get("podIP")
    if not address:
        raise errors.bad_request("address not allowed")
    where = f"{address}:{port}" if port else f"{address}:80"
    node = (pod.get("spec") or {}).get("nodeName") or ""
    # The proxy dials the Pod itself: a stopped kubelet leaves its containers running, a node
    # gone from the network (a node fault "unreachable") takes the Pod's address with it.
    if api.faults.kubelet_fault(node) == "unreachable":
        unreachable = KUBELET_DIAL_ERRORS["unreachable"]
        raise errors.ApiError(
            500, "", f"error trying to reach service: dial tcp {where}: {unreachable}"
        )
    server = _listening(api, pod, port)
    if server is None:
        refused = KUBELET_DIAL_ERRORS["down"]
        raise errors.ApiError(
            500, "", f"error trying to reach service: dial tcp {where}: {refused}"
        )
    answer = server.answer(request.method, path, request.query, request.headers)
    headers = []
    prefix = f"/api/v1/namespaces/{namespace}/{resource}/{id_}/proxy"
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


def _ready(pod: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _target_port(pod: dict, target: Any) -> str:
    """A Service port's targetPort on one Pod: a number, or a container port's name."""
    if isinstance(target, int) or str(target).isdigit():
        return str(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return str(port.get("containerPort"))
    return ""


def _service_endpoint(api: Any, namespace: str, id_: str) -> tuple[dict, str]:
    """A ready Pod behind the Service, and the port on it the proxied port leads to."""
    name, port_text = _split_name_port(id_, "service")
    service = api.store.get(SERVICES, namespace, name)
    ports = (service.get("spec") or {}).get("ports") or []
    wanted = None
    if port_text.isdigit():
        wanted = next((p for p in ports if p.get("port") == int(port_text)), None)
        if wanted is None:
            message = f'no service port {port_text} found for service "{name}"'
            raise errors.ApiError(503, "ServiceUnavailable", message)
    else:
        wanted = next((p for p in ports if (p.get("name") or "") == port_text), None)
    selector = (service.get("spec") or {}).get("selector")
    if not selector:
        raise errors.not_found("", "endpoints", name)
    pods, _ = api.store.list(PODS, namespace)
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if not selector.items() <= labels.items() or not _ready(pod):
            continue
        if not (pod.get("status") or {}).get("podIP") or wanted is None:
            continue
        target = _target_port(pod, wanted.get("targetPort", wanted.get("port")))
        if target:
            return pod, target
    raise errors.ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{id_}"')
