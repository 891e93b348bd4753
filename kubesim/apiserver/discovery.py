"""Legacy discovery documents: /version, /api, /api/v1, /apis, /apis/<group>[/<version>]."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# Resources without a verb upstream has for the rest (a namespace is deleted one at a time).
VERBS_REFUSED = {("", "namespaces"): {"deletecollection"}}
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "token": ["create"],
    "finalize": ["update"],
    "eviction": ["create"],
    "proxy": ["create", "delete", "get", "patch", "update"],
}
# Subresources of another group's kind: (group, version, kind), as upstream lists them.
SUBRESOURCE_KINDS = {
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
    "eviction": ("policy", "v1", "Eviction"),
}
# Subresources whose kind is another of the same group-version.
SUBRESOURCE_OWN_GROUP_KINDS = {
    "pods/binding": "Binding",
    "pods/proxy": "PodProxyOptions",
    "services/proxy": "ServiceProxyOptions",
}
# Served kinds that `kubectl get all` lists, as upstream marks them.
CATEGORY_ALL = ("pods", "services", "deployments", "jobs")
BUILD_DATE = "2025-09-09T19:44:36Z"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


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


def verbs(kind: Any) -> list[str]:
    refused = VERBS_REFUSED.get((kind.group, kind.plural), set())
    return [verb for verb in VERBS if verb not in refused]


def storage_version(group: str, k8s_version: str) -> str:
    """The version a group's objects are stored in: one the release before also knows
    (resource.k8s.io/v1 came in 1.34, so 1.34 stores v1beta2; v1beta2 came in 1.33)."""
    if group != "resource.k8s.io":
        return "v1"
    minor = int(k8s_version.lstrip("v").split(".")[1])
    return "v1beta1" if minor <= 33 else "v1beta2" if minor == 34 else "v1"


def storage_version_hash(kind: Any, k8s_version: str) -> str:
    """apiserver's discovery.StorageVersionHash of the kind's storage group/version/kind."""
    group, _ = kind.storage_key
    stored_as = f"{group}/{storage_version(group, k8s_version)}/{kind.kind}"
    return base64.b64encode(hashlib.sha256(stored_as.encode()).digest()[:8]).decode()


def _resource(kind: Any, k8s_version: str) -> dict[str, Any]:
    resource = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": verbs(kind),
    }
    if kind.short_names:
        resource["shortNames"] = list(kind.short_names)
    if kind.plural in CATEGORY_ALL:
        resource["categories"] = ["all"]
    resource["storageVersionHash"] = storage_version_hash(kind, k8s_version)
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
        resource["kind"] = SUBRESOURCE_OWN_GROUP_KINDS.get(resource["name"], kind.kind)
    resource["verbs"] = SUBRESOURCE_VERBS.get(subresource, ["get"])
    return resource


def resource_list(group_version: str, kinds: list[Any], k8s_version: str) -> dict[str, Any]:
    resources = []
    for kind in sorted(kinds, key=lambda k: k.plural):
        resources.append(_resource(kind, k8s_version))
        resources += [_subresource(kind, sub) for sub in sorted(kind.subresources)]
    document: dict[str, Any] = {"kind": "APIResourceList", "apiVersion": "v1"}
    if group_version == "v1":  # the legacy /api/v1 document has no apiVersion
        del document["apiVersion"]
    return document | {"groupVersion": group_version, "resources": resources}


# -- aggregated discovery (apidiscovery.k8s.io/v2), which kubectl asks for first -----------


def wants_aggregated(accept: str) -> bool:
    """Whether an Accept header asks for the v2 APIGroupDiscoveryList (in JSON)."""
    wanted = {"g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"}
    for media_range in accept.split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type in ("application/json", "*/*") and wanted <= set(params):
            return True
    return False


def _kind_ref(group: str = "", version: str = "", kind: str = "") -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _aggregated_resource(main: dict[str, Any], subresources: list[dict]) -> dict[str, Any]:
    resource = {
        "resource": main["name"],
        "responseKind": _kind_ref(kind=main["kind"]),
        "scope": "Namespaced" if main["namespaced"] else "Cluster",
        "singularResource": main["singularName"],
        "verbs": main["verbs"],
    }
    for key in ("shortNames", "categories"):
        if key in main:
            resource[key] = main[key]
    if subresources:
        resource["subresources"] = [
            {
                "subresource": sub["name"].split("/", 1)[1],
                "responseKind": _kind_ref(
                    sub.get("group", ""), sub.get("version", ""), sub["kind"]
                ),
                "verbs": sub["verbs"],
            }
            for sub in subresources
        ]
    return resource


def aggregated_version(version: str, resource_list: dict[str, Any]) -> dict[str, Any]:
    """One version of a group in v2 form, from its legacy APIResourceList."""
    listed = resource_list["resources"]
    resources = [
        _aggregated_resource(main, [s for s in listed if s["name"].startswith(main["name"] + "/")])
        for main in listed
        if "/" not in main["name"]
    ]
    return {"version": version, "resources": resources, "freshness": "Current"}


def aggregated_list(groups: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The APIGroupDiscoveryList of groups ("" is the core group, served under /api)."""
    items = []
    for group, versions in groups.items():
        items.append({"metadata": {"name": group} if group else {}, "versions": versions})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
