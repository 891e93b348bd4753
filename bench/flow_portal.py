"""The same flow as a data scientist's script through the portal's REST API."""

from __future__ import annotations

import time
import uuid
from typing import Any

import requests

from bench.flow_steps import check_log, has_ending, step

CLAIM_USABLE = ("waiting", "in_use")
FINAL = ("succeeded", "failed")


class PortalClient:
    """One data scientist's script through the REST API, on a keep-alive session."""

    def __init__(self, url: str, token: str, cluster: int) -> None:
        self.url, self.cluster = url + "/api/v1", cluster
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        # Reads of an ended run's log that came back without the sample's last line.
        self.short_log_reads = 0
        # Requests sent, and long-polls answered within a second with the state already known
        # (the server's bound on waiting requests answers at once; the client asks again).
        self.requests = 0
        self.quick_unchanged = 0
        self.connection_resets = 0  # requests sent again on a new connection

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        # As a careful script: a POST carries an Idempotency-Key, so that it can be sent again
        # when a kept-alive connection the server had just closed is reset under it.
        headers = {"Idempotency-Key": uuid.uuid4().hex} if method == "POST" else {}
        resets = 0
        while True:
            self.requests += 1
            try:
                response = self.session.request(
                    method, self.url + path, timeout=90, headers=headers, **kwargs
                )
            except requests.ConnectionError:
                resets += 1
                self.connection_resets += 1
                if resets > 2:
                    raise
                continue
            if response.status_code != 429:
                response.raise_for_status()
                return response
            time.sleep(float(response.headers.get("Retry-After", "1")))

    def wait_for(
        self,
        path: str,
        state: str,
        until: tuple[str, ...],
        seen: list[tuple[str, float]],
        every_change: bool = False,
    ) -> dict[str, Any]:
        """Long-poll the object until its state is one of `until` (the server answers then;
        with every_change, at each change); each answer into `seen`."""
        wanted = f"state={state}" if every_change else f"until={','.join(until)}"
        while True:
            asked = time.perf_counter()
            response = self.call("GET", f"{path}?wait=30&{wanted}")
            body = response.json()
            if body["state"] == state and time.perf_counter() - asked < 1:
                self.quick_unchanged += 1
            if "Retry-After" in response.headers:  # its wait was refused: as docs/api.md says
                time.sleep(float(response.headers["Retry-After"]))
            if body["state"] != state:
                seen.append((body["state"], time.perf_counter()))
            state = body["state"]
            if state in until or state == "failed":
                return dict(body)
            wanted = f"state={state}" if every_change else wanted

    def claim(self, namespace: str, wait: bool = True) -> int:
        """Ask for the namespace and the claim; with wait, until the claim is usable."""
        ns = self.call(
            "POST",
            "/namespace-requests/",
            json={"cluster": self.cluster, "name": namespace, "purpose": "flow bench"},
        ).json()
        claim = self.call(
            "POST",
            "/claims/",
            json={
                "namespace_request": ns["id"],
                "name": "gpu-claim",
                "device_class": "gpu.nvidia.com",
                "count": 1,
            },
        ).json()
        if not wait:
            return int(claim["id"])
        usable = self.wait_for(f"/claims/{claim['id']}/", claim["state"], CLAIM_USABLE, [])
        if usable["state"] not in CLAIM_USABLE:
            raise RuntimeError(f"claim {namespace}: {usable['state']} {usable['state_message']}")
        return int(claim["id"])

    def run(
        self, claim: int, seen: list[tuple[str, float]], every_change: bool = False
    ) -> dict[str, Any]:
        run = self.call("POST", "/runs/", json={"claim": claim}).json()
        ended = self.wait_for(f"/runs/{run['id']}/", run["state"], FINAL, seen, every_change)
        if ended["state"] != "succeeded":
            raise RuntimeError(f"run {run['id']}: {ended['state']} {ended['state_message']}")
        return ended

    def read_log(self, run: int, container: str) -> None:
        """The run has ended (X-Log-Complete: true), so its log should be whole; when it is
        not, count it and read again, so the flow finishes and the report says how often."""
        deadline = time.monotonic() + 10
        while True:
            text = self.call("GET", f"/runs/{run}/logs/{container}/").text
            if has_ending(container, text) or time.monotonic() > deadline:
                check_log(container, text)
                return
            self.short_log_reads += 1
            time.sleep(0.05)

    def flow(self, namespace: str) -> None:
        """As the seed's loop: namespace, claim and the run's Pod asked for one after the
        other (the run is queued until the claim is applied), then wait for the end."""
        with step(namespace, "namespace, claim"):
            claim = self.claim(namespace, wait=False)
        with step(namespace, "run until final"):
            run = self.run(claim, [])
        with step(namespace, "logs"):
            for container in ("ctr0", "ctr1"):
                self.read_log(run["id"], container)
