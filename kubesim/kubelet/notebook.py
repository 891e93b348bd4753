"""The Jupyter images' server (jupyter/docker-stacks: start-notebook.py runs `jupyter lab`),
as much of it as a test reaches through the API server's pod proxy.

Token: the JUPYTER_TOKEN environment variable, or `--IdentityProvider.token=` (jupyter_server
2.x; `--ServerApp.token=` and `--NotebookApp.token=` are its deprecated spellings); without one
the server makes a random token and prints it in its log, as jupyter_server does. An empty
token turns authentication off. Port `--ServerApp.port` (8888), base URL `--ServerApp.base_url`.

Answers (jupyter_server 2.14, JupyterLab 4.2):
- `GET /api`: `{"version": "2.14.2"}` to anyone (APIVersionHandler is not authenticated);
- other `/api/...` without the token: 403 `{"message": "Forbidden", "reason": null}`;
  `/api/status` with it: the server's status;
- `/lab` without the token: 302 to `/login?next=%2Flab` (tornado's web.authenticated); with it
  (`?token=` or `Authorization: token ...`): JupyterLab's page; `/` redirects to `/lab`;
- anything else: 404.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from kubesim.kubelet.programs import FOREVER, Program, option

SERVER_VERSION = "2.14.2"
LAB_VERSION = "4.2.5"
DEFAULT_PORT = 8888
FORBIDDEN = {"message": "Forbidden", "reason": None}
NOT_FOUND = {"message": "Not Found", "reason": None}


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class Server:
    token: str
    port: int
    base_url: str
    started: str

    def answer(self, method: str, path: str, query: dict[str, str], headers: Any) -> Answer:
        """The server's answer to `method path` (path below the pod's port)."""
        base = self.base_url.rstrip("/")
        if base and not (path == base or path.startswith(base + "/")):
            return _json(404, NOT_FOUND)
        local = path[len(base) :] or "/"
        authenticated = self._authenticated(query, headers)
        if local.rstrip("/") == "/api":
            return _json(200, {"version": SERVER_VERSION})
        if local.startswith("/api/"):
            if not authenticated:
                return _json(403, FORBIDDEN)
            if local.rstrip("/") == "/api/status":
                status = {
                    "connections": 0,
                    "kernels": 0,
                    "last_activity": self.started,
                    "started": self.started,
                }
                return _json(200, status)
            return _json(404, NOT_FOUND)
        if local == "/":
            return Answer(302, b"", "text/html", (("Location", f"{base}/lab"),))
        if local.rstrip("/") == "/login":
            return _html(200, "Jupyter Server", "<h1>Password or token:</h1>")
        if local == "/lab" or local.startswith("/lab/"):
            if not authenticated:
                target = quote(f"{base}/lab", safe="")
                return Answer(302, b"", "text/html", (("Location", f"{base}/login?next={target}"),))
            return _html(200, "JupyterLab", f'<script id="jupyter-config-data">'
                         f'{{"appVersion": "{LAB_VERSION}"}}</script>')  # fmt: skip
        return _html(404, "404 : Not Found", "<h1>404 : Not Found</h1>")

    def _authenticated(self, query: dict[str, str], headers: Any) -> bool:
        if not self.token:
            return True
        given = query.get("token", "")
        authorization = (headers.get("Authorization") or "") if headers is not None else ""
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "token":
            given = given or value.strip()
        return bool(given) and secrets.compare_digest(given, self.token)


def _json(status: int, body: dict) -> Answer:
    return Answer(status, json.dumps(body).encode(), "application/json")


def _html(status: int, title: str, content: str) -> Answer:
    page = f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{content}</body></html>"
    return Answer(status, page.encode(), "text/html; charset=UTF-8")


def _env(container: dict, name: str) -> str | None:
    for variable in container.get("env") or []:
        if isinstance(variable, dict) and variable.get("name") == name:
            return str(variable.get("value") or "")
    return None


def start(container: dict, argv: list[str]) -> Program:
    """The server of a notebook container: its log at start-up, running until stopped."""
    token = option(argv, "--IdentityProvider.token", "--ServerApp.token", "--NotebookApp.token")
    if token is None:
        token = _env(container, "JUPYTER_TOKEN")
    if token is None:
        token = secrets.token_hex(24)  # jupyter_server's generated token
    port_text = option(argv, "--ServerApp.port", "--port") or str(DEFAULT_PORT)
    port = int(port_text) if port_text.isdigit() else DEFAULT_PORT
    base_url = option(argv, "--ServerApp.base_url", "--NotebookApp.base_url") or "/"
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}"
    shown = f"?token={token}" if token else ""
    url = f"http://127.0.0.1:{port}{base_url.rstrip('/')}/lab{shown}"
    lines = [
        f"[I {stamp} ServerApp] jupyterlab | extension was successfully loaded.",
        f"[I {stamp} ServerApp] Serving notebooks from local directory: /home/jovyan",
        f"[I {stamp} ServerApp] Jupyter Server {SERVER_VERSION} is running at:",
        f"[I {stamp} ServerApp] {url}",
        f"[I {stamp} ServerApp] Use Control-C to stop this server and shut down all kernels "
        "(twice to skip confirmation).",
    ]
    server = Server(token, port, base_url, now.isoformat().replace("+00:00", "Z"))
    output = [(0.0, line) for line in lines]
    return Program(output, 0, FOREVER, stops_on_sigterm=True, server=server)
