"""Every Kubernetes name the portal makes, always a valid DNS-1123 label, never colliding.

In the manner of kubespawner's slugs: a readable slug of what the user typed, plus a short
stable hash of the whole input whenever the slug had to change it or cut it, so two inputs
that share a prefix (or differ only in characters a label cannot hold) get different names.
"""

from __future__ import annotations

import hashlib
import re

MAX_LABEL = 63
HASH_LENGTH = 8
_INVALID = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def is_dns_label(name: str) -> bool:
    return len(name) <= MAX_LABEL and _LABEL.fullmatch(name) is not None


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def _slug(text: str) -> str:
    slug = _DASHES.sub("-", _INVALID.sub("-", text.lower()))
    return slug.strip("-")


def label(text: str, *, suffix: str = "", max_length: int = MAX_LABEL) -> str:
    """A DNS-1123 label for `text` ending in `suffix` (a valid label tail such as
    "-verify-7"), at most max_length characters.

    The text is kept as it is when it is already a label and fits; otherwise it is slugged,
    cut, and given a hash of the original text so the result stays unique.
    """
    room = max_length - len(suffix)
    if is_dns_label(text) and len(text) <= room:
        return text + suffix
    keep = room - HASH_LENGTH - 1
    slug = _slug(text)[:keep].rstrip("-")
    tail = short_hash(text)
    return f"{slug}-{tail}{suffix}" if slug else f"x{tail}{suffix}"


def verification_pod_name(claim_name: str, run_id: int) -> str:
    """The Pod of one verification run: `<claim>-verify-<run id>`, unique per run."""
    return label(claim_name, suffix=f"-verify-{run_id}")


def user_slug(username: str) -> str:
    """The part of a name that stands for a portal user (usernames may hold '@', '.', '_')."""
    return label(username, max_length=40)


def access_service_account_name(username: str) -> str:
    """The ServiceAccount whose tokens go into a user's downloaded kubeconfig."""
    return label(f"gpu-portal-{user_slug(username)}")


def access_role_binding_name(username: str) -> str:
    """The RoleBinding granting a user (and their ServiceAccount) the access ClusterRole."""
    return label(f"gpu-portal-{user_slug(username)}")


# A GPU's short model in its product name: H100, A100, L40S, GH200, B200...
_GPU_MODEL = re.compile(r"\b([A-Za-z]{1,3}[0-9]{2,4}[A-Za-z]?)\b")


def alternative_names(wanted: list[str]) -> list[str]:
    """Names for the alternatives of a prioritized list (subrequests: DNS labels, unique):
    the short model of each one's GPU model or MIG profile (`h100`, `mig-1g-5gb`), else
    `alt-<position>`, which also stands in for a name taken already."""
    found: list[str] = []
    for position, text in enumerate(wanted, start=1):
        name = _alternative_name(text)
        found.append(name if name and name not in found else f"alt-{position}")
    return found


def _alternative_name(text: str) -> str:
    if not text:
        return ""
    if "." in text or text[:1].isdigit():  # a MIG profile such as 1g.10gb
        return label(f"mig-{_slug(text)}", max_length=30)
    model = _GPU_MODEL.search(text.replace("NVIDIA", " "))
    return model.group(1).lower() if model else ""
