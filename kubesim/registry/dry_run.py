"""`dryRun=All` on a create, as the registry's DryRunnableStorage answers it.

Validation, defaulting and admission have run; the storage step is replaced: the key is read
first (a name already taken is 409 AlreadyExists, as in a real create), and the answer is
the would-be object with the system fields a create sets (uid, creationTimestamp,
generation) but no resourceVersion, since nothing was written. No watch event follows.
"""

from __future__ import annotations

from typing import Any

from kubesim.base import errors
from kubesim.registry.store import fill_system_fields, with_uid


def would_create(api: Any, target: Any, storage: dict[str, Any]) -> dict[str, Any]:
    meta = storage.setdefault("metadata", {})
    kind = target.kind
    try:
        api.store.get(kind, meta.get("namespace") or None, meta.get("name", ""))
    except errors.ApiError as error:
        if error.code != 404:
            raise
    else:
        raise errors.already_exists(kind.group, kind.plural, meta.get("name", ""))
    fill_system_fields(kind, meta)
    with_uid(kind, storage)
    meta.pop("resourceVersion", None)
    return storage
