"""Start the test provider in a subprocess on a free loopback port, seeded from a spec."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]


def rsa_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Provider:
    url: str  # the issuer: http://127.0.0.1:<port>/openid
    process: subprocess.Popen[bytes]
    log: Path
    clients: dict[str, str] = field(default_factory=dict)

    def endpoint(self, name: str) -> str:
        return f"{self.url}/{name}"

    def portal_settings(self, client_id: str) -> dict[str, Any]:
        return {
            "OIDC_RP_CLIENT_ID": client_id,
            "OIDC_RP_CLIENT_SECRET": self.clients[client_id],
            "OIDC_OP_ISSUER": self.url,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": self.endpoint("authorize"),
            "OIDC_OP_TOKEN_ENDPOINT": self.endpoint("token"),
            "OIDC_OP_USER_ENDPOINT": self.endpoint("userinfo"),
            "OIDC_OP_JWKS_ENDPOINT": self.endpoint("jwks"),
        }

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_provider(folder: Path, spec: dict[str, Any]) -> Provider:
    """Seed a fresh database from spec (key_pem, users, clients) and serve it; a user's
        `claims` (e.g. {"email_verified": False}) are added to what the provider says of them;
    `no_kid` publishes the keys without a `kid`."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # What the provider says about a user beyond its standard claims (an unverified email).
    extra = {user["username"]: user.get("claims", {}) for user in spec["users"]}
    (folder / "claims.json").write_text(json.dumps(extra))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "OIDC_PROVIDER_DB": str(folder / "provider.sqlite3"),
        "OIDC_PROVIDER_CLAIMS": str(folder / "claims.json"),
        "OIDC_PROVIDER_SITE_URL": f"http://127.0.0.1:{port}",
        "PYTHONPATH": str(ROOT),
        "OIDC_PROVIDER_NO_KID": "1" if spec.get("no_kid") else "",
    }
    python = [sys.executable, "-m"]
    seeded = subprocess.run(
        [*python, "tests.oidc_provider.seed"], input=json.dumps(spec).encode(), env=env, cwd=ROOT
    )
    assert seeded.returncode == 0, "the provider's database was not set up"
    log = folder / "provider.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*python, "tests.oidc_provider.serve", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    clients = {c["client_id"]: c["client_secret"] for c in spec["clients"]}
    provider = Provider(f"http://127.0.0.1:{port}/openid", process, log, clients)
    _wait_until_serving(provider)
    return provider


def _wait_until_serving(provider: Provider) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert provider.process.poll() is None, provider.log.read_text()
        try:
            if requests.get(provider.endpoint("jwks"), timeout=2).ok:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    provider.stop()
    raise RuntimeError(f"the provider did not start:\n{provider.log.read_text()}")
