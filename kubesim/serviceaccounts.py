"""kube-controller-manager's serviceaccount controller: every namespace gets its ServiceAccount
`default` soon after it is created (pkg/controller/serviceaccount). Until then a real API server
refuses Pods in it, which is why the recordings wait for it before creating one."""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any

from kubesim import errors

ACCOUNT = "default"


def _is_default(account: dict) -> bool:
    return account["metadata"]["name"] == ACCOUNT


class ServiceAccountsController:
    def __init__(self, store: Any, kinds: dict) -> None:
        self.store = store
        self.accounts = kinds[("", "serviceaccounts")]
        self._names: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kubesim-sa", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> ServiceAccountsController:
        namespaces, _ = self.store.list(self.accounts_namespaces(), copy=False)
        for namespace in namespaces:
            self._names.put(namespace["metadata"]["name"])
        self._thread.start()
        return self

    def accounts_namespaces(self) -> Any:
        from kubesim.kinds import kind_for

        return kind_for("", "namespaces")

    def stop(self) -> None:
        self._names.put(None)
        self._thread.join(timeout=2)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural == "namespaces" and event == "ADDED":
            self._names.put(obj["metadata"]["name"])
        elif ref.plural == "serviceaccounts" and event == "DELETED" and _is_default(obj):
            self._names.put(obj["metadata"].get("namespace", ""))  # the controller puts it back

    def _run(self) -> None:
        while (name := self._names.get()) is not None:
            self._ensure(name)

    def _ensure(self, namespace: str) -> None:
        try:
            ns = self.store.get(self.accounts_namespaces(), None, namespace, copy=False)
        except errors.ApiError:
            return
        if ns["metadata"].get("deletionTimestamp"):
            return
        if self.store.exists(self.accounts, namespace, ACCOUNT):
            return
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": namespace},
        }
        with contextlib.suppress(errors.ApiError):  # created meanwhile, or namespace gone
            self.store.create(self.accounts, account)
