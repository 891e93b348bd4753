"""NVIDIA's dcgm-exporter, one per GPU node, as a cluster runs it (a DaemonSet on :9400).

kubesim serves every node's exporter on one plain-HTTP listener of its own, a path per node:
`GET /nodes/<node>/metrics` is what `http://<that node's exporter>:9400/metrics` answers
(text from kubelet/gpu_metrics.py). A Prometheus scrapes them with a static config, one
target per node with `__metrics_path__` set (docs/kubesim.md). A node whose kubelet is down
(a node fault) has no exporter answering either: 503, as a Service with no ready endpoint.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("kubesim")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DcgmExporters

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def do_GET(self) -> None:
        status, body = self.server.answer(self.path.split("?", 1)[0])
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class DcgmExporters(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: Any) -> None:
        self.api = api
        super().__init__(address, _Handler)
        self._thread = threading.Thread(
            target=self.serve_forever, args=(0.05,), name="kubesim-dcgm", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"

    def node_urls(self) -> dict[str, str]:
        kubelet = self.api.kubelet
        nodes = kubelet.topology.node_names if kubelet else []
        return {node: f"{self.url}/nodes/{node}/metrics" for node in nodes}

    def start(self) -> DcgmExporters:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def answer(self, path: str) -> tuple[int, bytes]:
        parts = [part for part in path.split("/") if part]
        kubelet = self.api.kubelet
        if len(parts) != 3 or parts[0] != "nodes" or parts[2] != "metrics" or kubelet is None:
            return 404, b"404 page not found\n"
        if self.api.faults.kubelet_fault(parts[1]):
            return 503, b"no endpoint: the node's exporter is unreachable\n"
        text = kubelet.gpu_metrics.exposition(parts[1])
        if text is None:
            return 404, b"404 page not found\n"
        return 200, text.encode()
