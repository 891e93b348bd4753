"""Which resource.k8s.io versions a cluster serves (and whether it runs Kueue): discovered,
trusted a while, followed."""

from collections.abc import Callable
from typing import TypeVar

from claims.kube.errors import PermanentKubeError
from claims.kube.parsing import ClusterInfo
from claims.kube.resources import (
    KUEUE_GROUP,
    KUEUE_VISIBILITY_GROUP,
    RESOURCE_GROUP,
    RESOURCE_VERSION_PREFERENCE,
    Obj,
)

DISCOVERY_TTL = 60.0  # seconds a discovered version list is trusted

T = TypeVar("T")


class ResourceDiscovery:
    """One cluster's discovery, read through the gateway's `get_json` and kept for
    DISCOVERY_TTL by `clock`."""

    def __init__(self, get_json: Callable[[str], Obj], clock: Callable[[], float]) -> None:
        self._get_json = get_json
        self._clock = clock
        self._info: ClusterInfo | None = None
        self._info_at = 0.0

    def _served_resource_versions(self, group_name: str = RESOURCE_GROUP) -> list[str]:
        try:
            group = self._get_json(f"/apis/{group_name}")
        except PermanentKubeError as e:
            if e.status == 404:
                return []
            raise
        return [v["version"] for v in group.get("versions") or []]

    def discover(self) -> ClusterInfo:
        server_version = self._get_json("/version").get("gitVersion", "")
        served = self._served_resource_versions()
        preferred = next((v for v in RESOURCE_VERSION_PREFERENCE if v in served), None)
        kueue = tuple(self._served_resource_versions(KUEUE_GROUP))
        visibility = tuple(self._served_resource_versions(KUEUE_VISIBILITY_GROUP) if kueue else ())
        info = ClusterInfo(server_version, served, preferred, kueue, visibility)
        self._info, self._info_at = info, self._clock()
        return self._info

    def cached_info(self) -> ClusterInfo:
        if self._info is None or self._clock() - self._info_at >= DISCOVERY_TTL:
            return self.discover()
        return self._info

    def resource_version(self) -> str:
        """The preferred resource.k8s.io version served now, with its group."""
        info = self.cached_info()
        if info.preferred_resource_version is None:
            raise PermanentKubeError(
                f"the cluster does not serve {RESOURCE_GROUP} (DRA is not enabled)",
                404,
                "NotFound",
            )
        return f"{RESOURCE_GROUP}/{info.preferred_resource_version}"

    def served(self, api_version: str) -> str:
        """`api_version` if the cluster serves it, else (for resource.k8s.io, whose versions
        are views of one stored object) the preferred served version."""
        group, _, version = api_version.rpartition("/")
        if group != RESOURCE_GROUP or version in self.cached_info().resource_versions:
            return api_version
        return self.resource_version()

    def versioned(self, api_version: str, attempt: Callable[[str], T]) -> T:
        """Run `attempt` with a served version; when the path itself is gone (the cluster
        stopped serving the version since discovery), discover again and retry once."""
        try:
            return attempt(self.served(api_version))
        except PermanentKubeError as e:
            if not (e.resource_unserved and api_version.startswith(f"{RESOURCE_GROUP}/")):
                raise
        self.discover()
        return attempt(self.served(api_version))
