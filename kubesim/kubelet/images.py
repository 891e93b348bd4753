"""Image pulls as containerd on a node does them: registries, mirrors, pull secrets, errors.

A topology may list `registries:` (a host, or host/path prefix, with `mirrors:` and
`requires_auth:`) and say `offline: true` (hosts not listed cannot be reached). The messages
are containerd 1.7's, passed through the kubelet's CRI client, which strips the gRPC prefix
of `Unknown` errors only (so "not found" keeps `rpc error: code = NotFound desc = `).
"""

import base64
import binascii
import fnmatch
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

DOCKER_HUB = "docker.io"
DOCKER_HUB_HOSTS = ("docker.io", "index.docker.io")
NOT_FOUND_PREFIX = "rpc error: code = NotFound desc = "
RESOLVER = "127.0.0.53"  # the nodes run Ubuntu 22.04: systemd-resolved's stub resolver
ACCESS_DENIED = (
    "pull access denied, repository does not exist or may require authorization: "
    "server message: insufficient_scope: authorization failed"
)


@dataclass(frozen=True)
class Registry:
    """A registry the nodes can reach: `prefix` is a host or host/path."""

    prefix: str
    mirrors: str = ""
    requires_auth: bool = False


@dataclass(frozen=True)
class Reference:
    """A normalised image reference: docker.io/library/busybox:latest."""

    host: str
    path: str
    suffix: str  # ":tag" or "@sha256:..."

    @property
    def repository(self) -> str:
        return f"{self.host}/{self.path}"

    @property
    def full(self) -> str:
        return self.repository + self.suffix


@dataclass(frozen=True)
class Pull:
    ok: bool
    image: str  # what runs: the reference, or what it mirrors
    error: str = ""


class NodeImages:
    """The images each node's containerd holds, and each node's one pull at a time: the
    kubelet pulls serially by default (serializeImagePulls), so a pull waits for the one
    before it, and the Pulled event's "including waiting" counts that wait."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._present: dict[str, set[str]] = {}
        self._pullers: dict[str, threading.Lock] = {}

    def present(self, node: str, image: str) -> bool:
        with self._lock:
            return parse(image).full in self._present.get(node, set())

    def add(self, node: str, image: str) -> None:
        with self._lock:
            self._present.setdefault(node, set()).add(parse(image).full)

    def puller(self, node: str) -> threading.Lock:
        with self._lock:
            return self._pullers.setdefault(node, threading.Lock())


def parse(image: str) -> Reference:
    """The reference containerd pulls for `image` (default registry and tag filled in)."""
    name, suffix = image, ":latest"
    if "@" in image:
        name, digest = image.split("@", 1)
        suffix = "@" + digest
    elif ":" in image.rsplit("/", 1)[-1]:
        name, tag = image.rsplit(":", 1)
        suffix = ":" + tag
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, name
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return Reference(host, path, suffix)


def registry_for(registries: dict[str, Registry], ref: Reference) -> Registry | None:
    """The registry entry with the longest prefix of the reference's repository."""
    matching = [
        prefix
        for prefix in registries
        if ref.repository == prefix or ref.repository.startswith(prefix + "/")
    ]
    return registries[max(matching, key=len)] if matching else None


def canonical(registries: dict[str, Registry], image: str) -> str:
    """The image a mirror reference stands for (itself when not under a mirror)."""
    ref = parse(image)
    registry = registry_for(registries, ref)
    if registry is None or not registry.mirrors:
        return ref.full
    return registry.mirrors.rstrip("/") + ref.full[len(registry.prefix) :]


def pull(topology: Any, image: str, auths: list[str]) -> Pull:
    """Pull `image` on a node of `topology` with the registry locations in `auths`."""
    ref = parse(image)
    registry = registry_for(topology.registries, ref)
    if registry is None and topology.offline:
        return Pull(False, ref.full, unreachable(ref))
    if registry is not None and registry.requires_auth and not has_credentials(auths, ref):
        return Pull(False, ref.full, access_denied(ref))
    runs = canonical(topology.registries, image)
    known = {parse(listed).full for listed in topology.images}
    if runs not in known and ref.full not in known:
        return Pull(False, runs, not_found(ref))
    return Pull(True, runs)


def _head(ref: Reference) -> str:
    host = "registry-1.docker.io" if ref.host == DOCKER_HUB else ref.host
    return f"https://{host}/v2/{ref.path}/manifests/{ref.suffix[1:]}"


def _pulling(ref: Reference, error: str) -> str:
    return (
        f'failed to pull and unpack image "{ref.full}": '
        f'failed to resolve reference "{ref.full}": {error}'
    )


def not_found(ref: Reference) -> str:
    """The registry has no such repository or tag (containerd: errdefs.ErrNotFound)."""
    return NOT_FOUND_PREFIX + _pulling(ref, f"{ref.full}: not found")


def access_denied(ref: Reference) -> str:
    """A private registry answered 401 to a pull without credentials."""
    return _pulling(ref, ACCESS_DENIED)


def unreachable(ref: Reference) -> str:
    """The node cannot resolve the registry's name (no route out of an air gap)."""
    url = _head(ref)
    host = urlsplit(url).hostname or ref.host
    port = 32768 + int(hashlib.sha256(ref.full.encode()).hexdigest()[:4], 16) % 28000
    lookup = (
        f"dial tcp: lookup {host} on {RESOLVER}:53: "
        f"read udp 127.0.0.1:{port}->{RESOLVER}:53: i/o timeout"
    )
    return _pulling(ref, f'failed to do request: Head "{url}": {lookup}')


# -- pull secrets (pkg/credentialprovider: keyring from secrets, URLsMatch) -----------------


def auth_locations(secrets: list[dict]) -> list[str]:
    """The registry locations the pull secrets hold credentials for."""
    locations: list[str] = []
    for secret in secrets:
        locations += list(_docker_config(secret))
    return locations


def _docker_config(secret: dict) -> dict:
    kind, data = secret.get("type"), secret.get("data") or {}
    if kind == "kubernetes.io/dockerconfigjson":
        raw, wrapped = data.get(".dockerconfigjson"), True
    elif kind == "kubernetes.io/dockercfg":
        raw, wrapped = data.get(".dockercfg"), False
    else:
        return {}
    try:
        parsed = json.loads(base64.b64decode(str(raw or "")) or b"null")
    except (binascii.Error, ValueError):
        return {}
    config = (parsed or {}).get("auths") if wrapped and isinstance(parsed, dict) else parsed
    return config if isinstance(config, dict) else {}


def _location(location: str) -> tuple[str, str]:
    value = location if location.startswith(("https://", "http://")) else "https://" + location
    parts = urlsplit(value)
    path = parts.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return parts.netloc, "" if path in ("", "/") else path


def _hosts_match(glob: str, host: str) -> bool:
    glob_name, _, glob_port = glob.partition(":")
    name, _, port = host.partition(":")
    globs, labels = glob_name.split("."), name.split(".")
    if glob_port != port or len(globs) != len(labels):
        return False
    return all(fnmatch.fnmatchcase(label, g) for g, label in zip(globs, labels, strict=True))


def has_credentials(locations: list[str], ref: Reference) -> bool:
    """Whether a keyring of `locations` has credentials for the reference's repository."""
    target_path = "/" + ref.path
    for location in locations:
        host, path = _location(location)
        hosts = DOCKER_HUB_HOSTS if ref.host == DOCKER_HUB else (ref.host,)
        if any(_hosts_match(host, h) for h in hosts) and target_path.startswith(path):
            return True
    return False
