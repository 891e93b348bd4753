from claims.kube import preflight
from claims.kube.parsing import ClusterInfo, DeviceClassInfo, DeviceInfo


def gpu(node: str | None, driver: str = "gpu.nvidia.com") -> DeviceInfo:
    return DeviceInfo(node, driver, node or "pool", "gpu-0", {"type": "gpu"}, {})


def test_it_requires_kubernetes_1_33_or_newer() -> None:
    old = preflight.check_server_version(ClusterInfo("v1.32.9", ["v1beta1"], "v1beta1"))
    seed = preflight.check_server_version(ClusterInfo("v1.33.5-gke.1", ["v1beta1"], "v1beta1"))
    garbled = preflight.check_server_version(ClusterInfo("", [], None))

    assert (old.ok, seed.ok, garbled.ok) == (False, True, False)
    assert "v1.32.9" in old.detail and "1.33" in old.detail


def test_it_requires_the_dra_api() -> None:
    missing = preflight.check_dra_served(ClusterInfo("v1.34.1", [], None))
    served = preflight.check_dra_served(ClusterInfo("v1.34.1", ["v1", "v1beta1"], "v1"))

    assert not missing.ok
    assert served.ok and "v1, v1beta1" in served.detail


def test_it_requires_a_device_class() -> None:
    assert not preflight.check_device_classes([]).ok
    check = preflight.check_device_classes([DeviceClassInfo("gpu.nvidia.com", [])])
    assert check.ok and check.detail == "gpu.nvidia.com"


def test_it_requires_devices_from_the_nvidia_driver() -> None:
    assert not preflight.check_gpu_devices([gpu("n1", driver="gpu.example.com")]).ok
    assert preflight.check_gpu_devices([gpu("n1")]).ok


def test_it_counts_only_existing_nodes_with_gpus() -> None:
    devices = [gpu("n1"), gpu("n1"), gpu("gone"), gpu(None)]

    check = preflight.check_gpu_nodes(devices, ["n1", "cpu-node"])

    assert check.ok and check.detail == "1: n1"
    assert not preflight.check_gpu_nodes(devices, ["cpu-node"]).ok


def test_it_checks_the_scheduler_can_read_the_served_dra_version() -> None:
    no_v1 = preflight.check_scheduler_dra(ClusterInfo("v1.34.1", ["v1beta2", "v1beta1"], "v1beta2"))
    seed = preflight.check_scheduler_dra(ClusterInfo("v1.33.5", ["v1beta1"], "v1beta1"))
    only_beta2 = preflight.check_scheduler_dra(ClusterInfo("v1.33.5", ["v1beta2"], "v1beta2"))
    ga = preflight.check_scheduler_dra(ClusterInfo("v1.35.0", ["v1"], "v1"))

    assert (no_v1.ok, seed.ok, only_beta2.ok, ga.ok) == (False, True, False, True)
    assert no_v1.detail == (
        "Kubernetes 1.34's scheduler and kubelet use resource.k8s.io/v1, which the cluster does "
        "not serve (it serves v1beta2, v1beta1): no claim can be allocated. "
        "Turn it on with --runtime-config=resource.k8s.io/v1=true."
    )
    assert seed.detail == "v1beta1 (Kubernetes 1.33), served"
