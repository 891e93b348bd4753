"""Replay the recorded requests of a real kube-apiserver v1.34.9 against kubesim.

`replay(scenario)` starts kubesim in the recordings' shape (topology reference-1.34.yaml, no
kubelet), sends every step of the scenario file in order (waiting where the step says so),
normalises kubesim's answers like the recordings and returns, per step id, None (same
answer) or what differs. The recordings and their rules: tests/kubesim/data/apiserver-1.34/
(a copy of ../shared/reference/apiserver-1.34/).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import ssl
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubesim
from tests.kubesim.replay_normalise import Normaliser, bind, difference
from tests.kubesim.replay_waits import wait_for

ROOT = Path(__file__).resolve().parents[2]
# A copy of ../shared/reference/apiserver-1.34 in the repository: CI's clean clone has no ../shared.
REFERENCE = ROOT / "tests" / "kubesim" / "data" / "apiserver-1.34"
TOPOLOGY = ROOT / "kubesim" / "cluster" / "topologies" / "reference-1.34.yaml"
USER_AGENT = "reference-client/1.0"


def scenario_files() -> list[Path]:
    return sorted(REFERENCE.glob("[0-9][0-9]-*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


class Client:
    def __init__(self, handle: kubesim.Handle) -> None:
        self.handle = handle
        self.context = ssl.create_default_context(cadata=handle.ca_pem.decode())
        self.netloc = urllib.parse.urlsplit(handle.url).netloc

    def send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, Any, bytes]:
        connection = http.client.HTTPSConnection(self.netloc, context=self.context, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.msg, response.read()
        finally:
            connection.close()

    def get(self, path: str) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.handle.token}", "Accept": "application/json"}
        status, _, data = self.send("GET", path, headers, None)
        return status, json.loads(data) if data.startswith(b"{") else None


class Replay:
    def __init__(self, handle: kubesim.Handle, scenario: dict) -> None:
        self.client = Client(handle)
        self.scenario = scenario
        self.normaliser = Normaliser()
        self.bindings: dict[str, str] = {}
        self.uids: dict[tuple[str, str], str] = {}
        self.created_pods: list[str] = []

    def run(self) -> dict[str, str | None]:
        return {step["id"]: self.step(step) for step in self.scenario["steps"]}

    def step(self, step: dict) -> str | None:
        request = step["request"]
        if not wait_for(self, step):
            problem: str | None = f"wait never held: {step.get('wait', 'the observed state')}"
        else:
            problem = None
        status, headers, data = self.client.send(
            request["method"], self.substitute_path(request["path"]), *self.content(request)
        )
        actual = self.answer(step["response"], headers, data)
        self.remember(request, actual)
        found = self.compare(step["response"], status, headers, actual)
        return "\n".join(part for part in (problem, found) if part) or None

    def content(self, request: dict) -> tuple[dict[str, str], bytes | None]:
        headers = {**request.get("headers", {}), "User-Agent": USER_AGENT}
        auth = request.get("authorization", f"Bearer {self.client.handle.token}")
        if auth != "none":
            headers["Authorization"] = auth
        if "body" in request:
            return headers, json.dumps(self.substitute(request["body"])).encode()
        if "body_text" in request:
            return headers, request["body_text"].encode()
        if "body_base64" in request:
            return headers, base64.b64decode(request["body_base64"])
        return headers, None

    def substitute_path(self, path: str) -> str:
        for placeholder, value in self.bindings.items():
            if "<suffix>" in placeholder:
                path = path.replace(placeholder, value)
            else:
                path = path.replace(placeholder, urllib.parse.quote(value, safe=""))
        return path

    def substitute(self, body: Any) -> Any:
        """A recorded request body with kubesim's values for the placeholders."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = json.dumps(body).replace('"<time>"', json.dumps(now))
        for placeholder, value in self.bindings.items():
            text = text.replace(placeholder, value)
        body = json.loads(text)
        meta = body.get("metadata") if isinstance(body, dict) else None
        if isinstance(meta, dict) and meta.get("uid") == "<uid>":
            meta["uid"] = self.uids.get((meta.get("namespace", ""), meta.get("name", "")), "")
        return body

    def answer(self, recorded: dict, headers: Any, data: bytes) -> Any:
        if "events" in recorded:
            lines = data.decode().splitlines()
            return [json.loads(line) for line in lines if line.strip()]
        if "body_summary" in recorded:
            return summary(self.scenario, recorded, data)
        if "body_text" in recorded or not data.lstrip().startswith((b"{", b"[")):
            return data.decode(errors="replace")
        return json.loads(data)

    def remember(self, request: dict, actual: Any) -> None:
        objects = [e.get("object") for e in actual] if isinstance(actual, list) else [actual]
        for obj in objects:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if isinstance(meta, dict) and meta.get("uid") and meta.get("name"):
                self.uids[(meta.get("namespace", ""), meta["name"])] = meta["uid"]
                if obj.get("kind") == "Pod" and request["method"] == "POST":
                    self.created_pods.append(f"{meta.get('namespace')}/{meta['name']}")

    def compare(self, recorded: dict, status: int, headers: Any, actual: Any) -> str | None:
        problems = []
        if status != recorded["status"]:
            problems.append(f"status {status}, recorded {recorded['status']}")
        want_headers = recorded.get("headers", {})
        if headers.get("Content-Type") != want_headers.get("Content-Type"):
            problems.append(
                f"Content-Type {headers.get('Content-Type')!r}, "
                f"recorded {want_headers.get('Content-Type')!r}"
            )
        warnings = headers.get_all("Warning") or []
        if warnings != want_headers.get("Warning", []):
            problems.append(f"Warning {warnings}, recorded {want_headers.get('Warning', [])}")
        key = next(k for k in ("events", "body_summary", "body_text", "body") if k in recorded)
        if key == "body_summary":
            normalised = actual
        else:
            normalised = self.normaliser.normalise(actual)
            bind(recorded[key], actual, self.bindings)
        found = difference(recorded[key], normalised)
        if found:
            problems.append(f"{key} differs:\n{found}")
        return "\n".join(problems) or None


def summary(scenario: dict, recorded: dict, data: bytes) -> Any:
    """The body_summary of an /openapi/v3 answer, computed as the recording's was."""
    try:
        doc = json.loads(data)
    except ValueError:
        return data.decode(errors="replace")[:200]
    if "paths keys" in recorded["body_summary"]:
        return {"paths keys": sorted(doc.get("paths", {}))}
    schemas = doc.get("components", {}).get("schemas", {})
    claim = schemas.get("io.k8s.api.resource.v1.ResourceClaim", {})
    operations = {}
    for path, item in doc.get("paths", {}).items():
        if not re.search(r"/resourceclaims(/|$)", path):
            continue
        for method in ("get", "put", "post", "delete", "patch"):
            if method in item:
                op = item[method]
                operations[f"{method.upper()} {path}"] = {
                    k: op.get(k)
                    for k in (
                        "operationId",
                        "x-kubernetes-action",
                        "x-kubernetes-group-version-kind",
                    )
                }
    return {
        "top-level keys": list(doc),
        "openapi": doc.get("openapi"),
        "info": doc.get("info"),
        "number of paths": len(doc.get("paths", {})),
        "number of schemas": len(schemas),
        "ResourceClaim schema x-kubernetes-group-version-kind": claim.get(
            "x-kubernetes-group-version-kind"
        ),
        "ResourceClaim operations": operations,
    }


def replay(path: Path) -> dict[str, str | None]:
    """Every step of one scenario file against a fresh kubesim in the recordings' shape."""
    handle = kubesim.start(topology=str(TOPOLOGY), kubelet=False, k8s_version="1.34.9")
    try:
        return Replay(handle, load(path)).run()
    finally:
        handle.stop()
