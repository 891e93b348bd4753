"""Extended resources backed by DRA (DRAExtendedResource, alpha in 1.34, taken as on).

A Pod that asks for `nvidia.com/gpu: 1` the device-plugin way gets its devices through a
claim the scheduler makes for it, when a DeviceClass names that resource in
`spec.extendedResourceName` (or by the implicit `deviceclass.resource.kubernetes.io/<class>`)
and the node does not publish it in its allocatable. As upstream's DynamicResources plugin
(pkg/scheduler/framework/plugins/dynamicresources, v1.34): one claim per Pod,
generateName `<pod>-extended-resources-`, annotated and owned by the Pod, one request
`container-<i>-request-<j>` per container and resource, and the Pod's
`status.extendedResourceClaimStatus` mapping containers to requests.
"""

from typing import Any

from kubesim.controllers.allocator import Candidate, DeviceId, allocate

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
NATIVE_DOMAIN = "kubernetes.io"


def is_extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName, enough for request keys the API server accepted."""
    domain, slash, _ = name.partition("/")
    native = not slash or domain == NATIVE_DOMAIN or domain.endswith("." + NATIVE_DOMAIN)
    return not native and not name.startswith("requests.")


def class_mapping(classes: dict[str, dict]) -> dict[str, str]:
    """extended.DeviceClassMapping: resource name -> class. An explicit name given by two
    classes goes to the one created later, on a tie the one whose name sorts first."""
    mapping = {IMPLICIT_PREFIX + name: name for name in classes}
    chosen: dict[str, tuple[str, str]] = {}
    for name, device_class in classes.items():
        resource = (device_class.get("spec") or {}).get("extendedResourceName")
        if not resource:
            continue
        created = (device_class.get("metadata") or {}).get("creationTimestamp") or ""
        best = chosen.get(resource)
        if best is None or created > best[0] or (created == best[0] and name < best[1]):
            chosen[resource] = (created, name)
    mapping.update({resource: name for resource, (_, name) in chosen.items()})
    return mapping


def _containers(pod: dict) -> list[dict]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _requests(container: dict) -> dict[str, Any]:
    return ((container.get("resources") or {}).get("requests")) or {}


def _count(quantity: Any) -> int:
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def pod_extended_requests(pod: dict) -> dict[str, int]:
    """The Pod's non-zero extended resource requests (containers summed; an init container
    counts when it asks for more, as resourcehelper.PodRequests)."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, quantity in _requests(container).items():
            if is_extended(name):
                total[name] = total.get(name, 0) + _count(quantity)
    for container in spec.get("initContainers") or []:
        for name, quantity in _requests(container).items():
            if is_extended(name):
                total[name] = max(total.get(name, 0), _count(quantity))
    return {name: count for name, count in total.items() if count}


def node_needs(
    pod: dict, allocatable: dict[str, Any], mapping: dict[str, str]
) -> tuple[dict[str, int], list[str]]:
    """(resources this node must give through DRA, resources it cannot give at all)."""
    through_dra, missing = {}, []
    for name, count in sorted(pod_extended_requests(pod).items()):
        if name in allocatable:
            continue  # a device plugin's: NodeResourcesFit counts it
        if name in mapping:
            through_dra[name] = count
        else:
            missing.append(name)
    return through_dra, missing


def device_requests(pod: dict, resources: dict[str, int], mapping: dict[str, str]) -> list[dict]:
    """createDeviceRequests: one ExactCount request per container and resource."""
    requests = []
    for resource in sorted(resources):
        for index, container in enumerate(_containers(pod)):
            asked = _requests(container)
            count = _count(asked.get(resource, 0))
            if not count:
                continue
            position = sorted(asked).index(resource)
            exact = {
                "deviceClassName": mapping[resource],
                "allocationMode": "ExactCount",
                "count": count,
            }
            requests.append({"name": f"container-{index}-request-{position}", "exactly": exact})
    return requests


def claim_for(pod: dict, requests: list[dict]) -> dict:
    """The special claim as PreBind creates it (storage form, before the name is generated)."""
    metadata = pod["metadata"]
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{metadata['name']}-extended-resources-",
            "namespace": metadata["namespace"],
            "ownerReferences": [owner],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": requests}},
    }


def request_mappings(claim: dict, pod: dict) -> list[dict]:
    """createRequestMappings: which container's which resource each request serves."""
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    names = {request["name"] for request in requests}
    mappings = []
    for index, container in enumerate(_containers(pod)):
        for position, resource in enumerate(sorted(_requests(container))):
            request = f"container-{index}-request-{position}"
            if request in names:
                mappings.append(
                    {
                        "containerName": container["name"],
                        "resourceName": resource,
                        "requestName": request,
                    }
                )
    return mappings


def fit(
    pod: dict,
    resources: dict[str, int],
    mapping: dict[str, str],
    devices: list[Candidate],
    classes: dict[str, dict],
    taken: set[DeviceId],
) -> tuple[dict, list[dict]] | None:
    """The node's variant of the special claim and its devices (after the user claims' in
    `taken`), or None when they do not fit."""
    claim = claim_for(pod, device_requests(pod, resources, mapping))
    results = allocate(claim, classes, devices, taken)
    return None if results is None else (claim, results)
