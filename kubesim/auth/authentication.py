"""Authentication: the admin token (group system:masters), a `--token-auth-file` like the real
one, and ServiceAccount tokens issued by TokenRequest (signed JWTs, checked against the
ServiceAccount they name, as `--service-account-lookup` does)."""

from __future__ import annotations

import base64
import csv
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kubesim.base import errors
from kubesim.registry.store import Store

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"
ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = (ISSUER,)


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    @property
    def privileged(self) -> bool:
        return MASTERS in self.groups


ADMIN = UserInfo("system:admin", groups=(MASTERS, AUTHENTICATED))
# Who a request without credentials is when anonymous requests are allowed (the default).
ANONYMOUS = UserInfo("system:anonymous", groups=("system:unauthenticated",))


def authenticated(name: str, uid: str, groups: list[str] | tuple[str, ...]) -> UserInfo:
    """The user with `system:authenticated` added, as the authenticator chain does."""
    listed = tuple(groups)
    return UserInfo(name, uid, listed if AUTHENTICATED in listed else (*listed, AUTHENTICATED))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)
    return UserInfo(f"{SA_PREFIX}{namespace}:{name}", uid, groups)


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:<ns>:<name>` user name, else None."""
    if not username.startswith(SA_PREFIX):
        return None
    namespace, _, name = username[len(SA_PREFIX) :].partition(":")
    return (namespace, name) if namespace and name and ":" not in name else None


def read_token_file(path: str) -> dict[str, UserInfo]:
    """A static token file: CSV lines `token,user,uid[,"group1,group2"]`."""
    users: dict[str, UserInfo] = {}
    with open(path, newline="") as f:
        for number, record in enumerate(csv.reader(f), start=1):
            if not record or not "".join(record).strip() or record[0].startswith("#"):
                continue
            if len(record) < 3:
                raise ValueError(
                    f"token file '{path}' must have at least 3 columns (token, user name, "
                    f"user uid), found {len(record)} on line {number}"
                )
            groups = (
                [g.strip() for g in record[3].split(",") if g.strip()] if len(record) > 3 else []
            )
            users[record[0]] = authenticated(record[1], record[2], groups)
    return users


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authenticator:
    """Bearer token -> UserInfo (None when no authenticator knows the token: 401)."""

    def __init__(
        self,
        store: Store,
        kinds: dict,
        admin_token: str,
        static: dict[str, UserInfo] | None = None,
        *,
        anonymous: bool = True,
    ) -> None:
        self.store = store
        self.service_accounts = kinds[("", "serviceaccounts")]
        self.admin_token = admin_token
        self.static = dict(static or {})
        self.anonymous = anonymous  # --anonymous-auth: requests without a token
        self._key = secrets.token_bytes(32)

    def __call__(self, authorization: str) -> UserInfo | None:
        """The user; a request without a bearer token is system:anonymous (RBAC decides
        then) unless anonymous requests are off, a token nobody knows is never anonymous."""
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return ANONYMOUS if self.anonymous else None
        if hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return ADMIN
        if token in self.static:
            return self.static[token]
        return self._service_account_token(token)

    # -- ServiceAccount tokens -----------------------------------------------------------

    def issue(self, account: dict, audiences: list[str], seconds: int, now: float) -> str:
        meta = account["metadata"]
        claims = {
            "aud": audiences,
            "exp": int(now) + seconds,
            "iat": int(now),
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": meta["namespace"],
                "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
            },
            "nbf": int(now),
            "sub": f"{SA_PREFIX}{meta['namespace']}:{meta['name']}",
        }
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{header}.{payload}.{self._sign(f'{header}.{payload}')}"

    def _sign(self, signed: str) -> str:
        return _b64(hmac.new(self._key, signed.encode(), hashlib.sha256).digest())

    def _claims(self, token: str) -> dict[str, Any] | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        if not hmac.compare_digest(parts[2], self._sign(f"{parts[0]}.{parts[1]}")):
            return None
        try:
            claims = json.loads(_unb64(parts[1]))
        except ValueError:
            return None
        return claims if isinstance(claims, dict) else None

    def _service_account_token(self, token: str) -> UserInfo | None:
        claims = self._claims(token)
        now = time.time()
        if claims is None or claims.get("iss") != ISSUER or not claims.get("exp", 0) > now:
            return None
        if not set(claims.get("aud") or []) & set(API_AUDIENCES):
            return None
        bound = claims.get("kubernetes.io") or {}
        namespace = bound.get("namespace") or ""
        account = bound.get("serviceaccount") or {}
        try:
            stored = self.store.get(self.service_accounts, namespace, account.get("name") or "")
        except errors.ApiError:
            return None  # deleted: the token stops working
        meta = stored["metadata"]
        if meta.get("uid") != account.get("uid") or meta.get("deletionTimestamp"):
            return None
        return service_account_user(namespace, meta["name"], meta["uid"])


def impersonate(user: UserInfo, headers: Any, allowed: Any) -> UserInfo:
    """Apply Impersonate-User / Impersonate-Group / Impersonate-Uid headers; `allowed(user,
    verb, resource, namespace, name, group)` raises the 403 when the requester may not."""
    name = headers.get("Impersonate-User")
    groups = headers.get_all("Impersonate-Group") or []
    uid = headers.get("Impersonate-Uid") or ""
    if not name:
        if groups or uid:
            raise errors.ApiError(
                500, "InternalError", "Internal error occurred: requested impersonation "
                "of groups or uid without impersonating a user"
            )  # fmt: skip
        return user
    account = split_service_account(name)
    if account:
        allowed(user, "serviceaccounts", account[0], account[1], "")
    else:
        allowed(user, "users", "", name, "")
    for group in groups:
        allowed(user, "groups", "", group, "")
    if uid:
        allowed(user, "uids", "", uid, "authentication.k8s.io")
    if account and not groups:
        return service_account_user(account[0], account[1], uid)
    if name == "system:anonymous":
        return UserInfo(name, uid, tuple(groups))
    return authenticated(name, uid, groups)
