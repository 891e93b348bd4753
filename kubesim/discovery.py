"""Legacy discovery documents: /version, /api, /api/v1, /apis, /apis/<group>[/<version>]."""

from __future__ import annotations

from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "token": ["create"],
}
# Subresources of another group's kind: (group, version, kind), as upstream lists them.
SUBRESOURCE_KINDS = {"token": ("authentication.k8s.io", "v1", "TokenRequest")}
# Served kinds that `kubectl get all` lists, as upstream marks them.
CATEGORY_ALL = ("pods",)
BUILD_DATE = "2025-09-09T19:44:36Z"


def version_document(k8s_version: str) -> dict[str, Any]:
    major, minor, *_ = k8s_version.lstrip("v").split(".")
    document = {"major": major, "minor": minor}
    if int(minor) >= 33:
        document |= {
            "emulationMajor": major,
            "emulationMinor": minor,
            "minCompatibilityMajor": major,
            "minCompatibilityMinor": str(int(minor) - 1),
        }
    return document | {
        "gitVersion": f"v{k8s_version.lstrip('v')}",
        "gitCommit": "0" * 40,
        "gitTreeState": "clean",
        "buildDate": BUILD_DATE,
        "goVersion": "go1.24.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_version(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_group(group: str, versions: list[str]) -> dict[str, Any]:
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [_group_version(group, version) for version in versions],
        "preferredVersion": _group_version(group, versions[0]),
    }


def api_group_list(groups: dict[str, list[str]]) -> dict[str, Any]:
    listed = [api_group(group, versions) for group, versions in groups.items() if versions]
    for group in listed:
        del group["kind"], group["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}


def _resource(kind: Any) -> dict[str, Any]:
    resource = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": VERBS,
    }
    if kind.short_names:
        resource["shortNames"] = list(kind.short_names)
    if kind.plural in CATEGORY_ALL:
        resource["categories"] = ["all"]
    return resource


def _subresource(kind: Any, subresource: str) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "name": f"{kind.plural}/{subresource}",
        "singularName": "",
        "namespaced": kind.namespaced,
    }
    if subresource in SUBRESOURCE_KINDS:
        group, version, other = SUBRESOURCE_KINDS[subresource]
        resource |= {"group": group, "version": version, "kind": other}
    else:
        resource["kind"] = "Binding" if subresource == "binding" else kind.kind
    resource["verbs"] = SUBRESOURCE_VERBS.get(subresource, ["get"])
    return resource


def resource_list(group_version: str, kinds: list[Any]) -> dict[str, Any]:
    resources = []
    for kind in sorted(kinds, key=lambda k: k.plural):
        resources.append(_resource(kind))
        resources += [_subresource(kind, sub) for sub in sorted(kind.subresources)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
