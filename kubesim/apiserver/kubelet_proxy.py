"""How the API server reaches a node's kubelet for `pods/log`, and how that fails.

As kube-apiserver's NodeConnectionInfoGetter (pkg/kubelet/client/kubelet_client.go): the Node
is read (404 if it is gone), its address is the first of the preferred types it reports
(--kubelet-preferred-address-types, default Hostname, InternalDNS, InternalIP, ExternalDNS,
ExternalIP; pkg/util/node GetPreferredNodeAddress, no address: "no preferred addresses found;
known addresses: []"), its port the kubelet's reported one, else 10250. The log's location is
pod strategy LogLocation's `https://<address>:<port>/containerLogs/<ns>/<pod>/<container>` with
its query encoded as url.Values does (sorted keys). A kubelet the dial cannot reach fails the
way rest.LocationStreamer's http.Client does: `Get "<url>": dial tcp <ip>:<port>: ...`. Both
are plain Go errors, which the API server answers as 500 without a reason.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from kubesim.apiserver.faults import KUBELET_DIAL_ERRORS
from kubesim.base import errors
from kubesim.base.http import Request

PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
# LogLocation's PodLogOptions (url.Values.Encode writes them sorted by name).
LOG_FLAGS = ("follow", "previous", "timestamps")
LOG_VALUES = ("limitBytes", "sinceSeconds", "sinceTime", "tailLines")


def log_location(api: Any, pod: dict[str, Any], container: str, request: Request) -> str:
    """The kubelet URL of the container's log; raises the API server's error when the node
    has no address the API server can use, or its kubelet cannot be dialled."""
    node = api.store.get(api.kinds[("", "nodes")], None, pod["spec"]["nodeName"])
    status = node.get("status") or {}
    host = preferred_address(status.get("addresses") or [])
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 0
    port = port if isinstance(port, int) and port > 0 else DEFAULT_KUBELET_PORT
    meta = pod["metadata"]
    url = f"https://{_join_host_port(host, port)}/containerLogs/{meta['namespace']}/"
    url += f"{meta['name']}/{container}"
    encoded = urlencode(sorted(_log_params(request).items()))
    url += f"?{encoded}" if encoded else ""
    mode = api.faults.kubelet_fault(node["metadata"]["name"])
    if api.kubelet is None and mode is None:
        mode = "down"  # no kubelet listens on that node
    if mode is not None:
        dialled = _join_host_port(_resolved(status.get("addresses") or [], host), port)
        message = f'Get "{url}": dial tcp {dialled}: {KUBELET_DIAL_ERRORS[mode]}'
        raise errors.ApiError(500, "", message)
    return url


def preferred_address(addresses: list[dict[str, Any]]) -> str:
    for address_type in PREFERRED_ADDRESS_TYPES:
        for address in addresses:
            if address.get("type") == address_type:
                return str(address.get("address", ""))
    # Go's %v of []NodeAddress: [{InternalIP 10.0.0.1} {Hostname node-1}]
    known = " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses)
    raise errors.ApiError(500, "", f"no preferred addresses found; known addresses: [{known}]")


def _resolved(addresses: list[dict[str, Any]], host: str) -> str:
    """The IP a host name resolves to: the node's InternalIP (Go's dial error names it)."""
    for address_type in ("InternalIP", "ExternalIP"):
        for address in addresses:
            if address.get("type") == address_type:
                return str(address.get("address", ""))
    return host


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _log_params(request: Request) -> dict[str, str]:
    params = {name: "true" for name in LOG_FLAGS if request.flag(name)}
    params.update({name: request.query[name] for name in LOG_VALUES if request.query.get(name)})
    return params
