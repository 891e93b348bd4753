"""Ask the GPU portal for a GPU, wait for an approver, verify it, and print what you got.

    export PORTAL_URL=http://127.0.0.1:8000
    export PORTAL_TOKEN=gpup_...            # make one on $PORTAL_URL/api/tokens/
    python docs/examples/claim_gpu.py --namespace team-vision --claim my-gpu

Needs only `requests`. Safe to run again after a timeout: every POST carries an
Idempotency-Key, so a retried request never creates a second claim or run.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid

import requests

CLAIM_READY = ("waiting", "in_use")
CLAIM_STOPPED = ("rejected", "failed", "released")
RUN_FINAL = ("succeeded", "failed")


class Portal:
    def __init__(self, url: str, token: str) -> None:
        self.root = url.rstrip("/")
        self.url = self.root + "/api/v1"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str, **params: str | int) -> dict:
        response = self.session.get(self.url + path, params=params, timeout=90)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict) -> dict:
        # One key per intended action: resending it after a lost answer is always safe.
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        try:
            response = self.session.post(self.url + path, json=body, headers=headers, timeout=30)
        except requests.ConnectionError:
            response = self.session.post(self.url + path, json=body, headers=headers, timeout=30)
        if response.status_code >= 400:
            sys.exit(f"POST {path} refused ({response.status_code}): {response.text}")
        return response.json()

    def text(self, url_path: str) -> str:
        response = self.session.get(self.root + url_path, timeout=30)
        response.raise_for_status()
        return response.text

    def wait(self, path: str, obj: dict, until: tuple[str, ...]) -> dict:
        """Long-poll: the portal answers as soon as the state changes (or after 30 s)."""
        while obj["state"] not in until:
            why = f": {obj['state_message']}" if obj["state_message"] else ""
            print(f"  {path} is {obj['state']}{why}", flush=True)
            obj = self.get(path, wait=30, state=obj["state"])
        return obj


def namespace_request(portal: Portal, name: str) -> dict:
    """Your namespace request of that name, or a new one on the first cluster."""
    mine = portal.get("/namespace-requests/", name=name)["results"]
    live = [ns for ns in mine if ns["state"] not in ("rejected", "deleted")]
    if live:
        return live[0]
    cluster = portal.get("/clusters/")["results"][0]
    print(f"Asking for namespace {name} on {cluster['name']}", flush=True)
    return portal.post("/namespace-requests/", {"cluster": cluster["id"], "name": name})


def ready_claim(portal: Portal, args: argparse.Namespace) -> dict:
    """Request the claim and wait until an approver agreed and the cluster has it."""
    ns = namespace_request(portal, args.namespace)
    body = {"namespace_request": ns["id"], "name": args.claim, "device_class": args.device_class}
    claim = portal.post("/claims/", body)
    print(f"Claim {claim['name']} (id {claim['id']}) requested; waiting for approval", flush=True)
    claim = portal.wait(f"/claims/{claim['id']}/", claim, CLAIM_READY + CLAIM_STOPPED)
    if claim["state"] in CLAIM_STOPPED:
        sys.exit(f"Claim {claim['state']}: {claim['state_message']}")
    return claim


def verify(portal: Portal, claim: dict) -> dict:
    """Run vectorAdd and deviceQuery on the claim's GPU; print the device and the logs."""
    run = portal.post("/runs/", {"claim": claim["id"]})
    print(f"Verification run {run['id']} started (pod {run['pod_name']})", flush=True)
    run = portal.wait(f"/runs/{run['id']}/", run, RUN_FINAL)
    got = ", ".join(f"{d['device']} (pool {d['pool']})" for d in run["devices"])
    print(f"Device: {got or 'not recorded'} on node {run['node'] or 'unknown'}")
    print(f"GPU: {run['device_name']}, compute capability {run['compute_capability']}, ", end="")
    print(f"{run['memory_mib']} MiB")
    for log in run["logs"]:
        print(f"--- {log['container']} ---\n{portal.text(log['url'])}", end="")
    print(f"Verification {run['state']}: {run['state_message']}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="team-vision")
    parser.add_argument("--claim", default="my-gpu")
    parser.add_argument("--device-class", default="gpu.nvidia.com")
    args = parser.parse_args()
    portal = Portal(os.environ["PORTAL_URL"], os.environ["PORTAL_TOKEN"])
    run = verify(portal, ready_claim(portal, args))
    sys.exit(0 if run["passed"] else 1)


if __name__ == "__main__":
    main()
