"""kube-controller-manager's serviceaccount controller: every namespace gets its ServiceAccount
`default` soon after it is created (pkg/controller/serviceaccount). Until then a real API server
refuses Pods in it, which is why the recordings wait for it before creating one."""

from __future__ import annotations

import contextlib
from typing import Any

from kubesim.base import errors
from kubesim.base.workqueue import NameQueueController

ACCOUNT = "default"


def _is_default(account: dict) -> bool:
    return account["metadata"]["name"] == ACCOUNT


class ServiceAccountsController(NameQueueController):
    thread_name = "kubesim-sa"

    def __init__(self, store: Any, kinds: dict) -> None:
        self.accounts = kinds[("", "serviceaccounts")]
        super().__init__(store)

    def initial_names(self) -> list[str]:
        namespaces, _ = self.store.list(self.accounts_namespaces(), copy=False)
        return [namespace["metadata"]["name"] for namespace in namespaces]

    def accounts_namespaces(self) -> Any:
        from kubesim.registry.kinds import kind_for

        return kind_for("", "namespaces")

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural == "namespaces" and event == "ADDED":
            self.enqueue(obj["metadata"]["name"])
        elif ref.plural == "serviceaccounts" and event == "DELETED" and _is_default(obj):
            self.enqueue(obj["metadata"].get("namespace", ""))  # the controller puts it back

    def sync(self, name: str) -> None:
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
