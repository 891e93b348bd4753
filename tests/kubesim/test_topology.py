"""The simulated hardware: the default two GPU nodes, YAML topologies, published objects."""

import textwrap
from pathlib import Path

import kubernetes_validate
import pytest

from kubesim.cluster import topology
from kubesim.registry.kinds import kind_for

MIG_EXAMPLE = Path(topology.__file__).parent / "topologies" / "mig-example.yaml"


def test_it_has_four_h100_and_four_a100_by_default() -> None:
    default = topology.load()
    assert default.node_names == ["gpu-node-1", "gpu-node-2"]
    h100, a100 = default.devices_by_node["gpu-node-1"], default.devices_by_node["gpu-node-2"]
    assert [d.name for d in h100] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert {d.product_name for d in h100} == {"NVIDIA H100 80GB HBM3"}
    assert {d.product_name for d in a100} == {"NVIDIA A100-SXM4-40GB"}


def test_it_publishes_the_attributes_of_the_real_driver() -> None:
    device = topology.load().devices_by_node["gpu-node-1"][0]
    attributes = device.attributes()
    assert set(attributes) == {
        "architecture",
        "brand",
        "cudaComputeCapability",
        "cudaDriverVersion",
        "driverVersion",
        "pcieBusID",
        "productName",
        "resource.kubernetes.io/pcieRoot",
        "type",
        "uuid",
    }
    assert attributes["architecture"] == {"string": "Hopper"}
    assert attributes["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attributes["type"] == {"string": "gpu"}
    assert attributes["uuid"]["string"].startswith("GPU-")
    assert device.capacity() == {"memory": {"value": "81559Mi"}}
    a100 = topology.load().devices_by_node["gpu-node-2"][0]
    assert a100.attributes()["cudaComputeCapability"] == {"version": "8.0.0"}
    assert a100.attributes()["architecture"] == {"string": "Ampere"}
    assert a100.capacity() == {"memory": {"value": "40Gi"}}


TOPOLOGIES = sorted((Path(topology.__file__).parent / "topologies").glob("*.yaml"))


@pytest.mark.parametrize(
    ("model", "memory"),
    [
        # nvidia-smi's memory.total (NVML), serialized as the API server prints the quantity.
        ("H100-80GB-HBM3", "81559Mi"),
        ("A100-SXM4-40GB", "40Gi"),  # 40960 MiB
        ("A100-SXM4-80GB", "80Gi"),  # 81920 MiB
        ("H200", "143771Mi"),  # ../shared/reference/real-gpu-output/nvidia-smi-H200.csv
    ],
)
def test_gpus_publish_the_memory_nvml_reports(tmp_path: Path, model: str, memory: str) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(f"nodes:\n  - name: n\n    gpus:\n      - model: {model}\n")
    (device,) = topology.load(path).devices_by_node["n"]
    assert device.capacity() == {"memory": {"value": memory}}


@pytest.mark.parametrize("path", [p for p in TOPOLOGIES if p.name != "reference-1.34.yaml"])
def test_no_topology_publishes_what_driver_v25_8_dropped(path: Path) -> None:
    """index and minor went with driver v25.3 (../shared/reference/dra.md 4.3); only the
    reference topology keeps them, as the recordings of the real cluster hold them."""
    published = topology.load(path).devices()
    assert published
    for device in published:
        assert not {"index", "minor"} & set(device.attributes())
        if not device.mig:
            assert device.capacity()["memory"]["value"] != "80Gi" or "A100" in device.product_name


def test_the_reference_topology_keeps_what_the_recordings_hold() -> None:
    reference = topology.load(Path(topology.__file__).parent / "topologies" / "reference-1.34.yaml")
    slices = [obj for obj in reference.objects if obj["kind"] == "ResourceSlice"]
    devices = [device for piece in slices for device in piece["spec"]["devices"]]
    assert {d["capacity"]["memory"]["value"] for d in devices} == {"81559Mi"}
    assert [d["attributes"]["index"] for d in devices] == [{"int": 0}, {"int": 1}] * 2


def test_it_keeps_uuids_stable_and_distinct() -> None:
    first = [d.uuid for d in topology.load().devices()]
    again = [d.uuid for d in topology.load().devices()]
    assert first == again
    assert len(set(first)) == 8


def test_it_publishes_one_slice_per_node_that_validates() -> None:
    default = topology.load()
    published = topology.slice_object(default, "gpu-node-2", "node-uid")
    assert published["metadata"]["name"].startswith("gpu-node-2-gpu.nvidia.com-")
    assert published["spec"]["pool"] == {
        "name": "gpu-node-2",
        "generation": 1,
        "resourceSliceCount": 1,
    }
    assert published["metadata"]["ownerReferences"][0]["uid"] == "node-uid"
    kubernetes_validate.validate(published, "1.34", strict=True)
    beta = kind_for("resource.k8s.io", "resourceslices").from_storage(published, "v1beta1")
    kubernetes_validate.validate(beta, "1.33", strict=True)


def test_it_installs_the_real_gpu_device_class() -> None:
    (gpu_class,) = topology.device_class_objects(topology.load())
    assert gpu_class["metadata"]["name"] == "gpu.nvidia.com"
    assert gpu_class["spec"]["selectors"] == [
        {
            "cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'gpu'"
            }
        }
    ]
    kubernetes_validate.validate(gpu_class, "1.34", strict=True)


def test_it_reads_a_yaml_topology_that_replaces_the_default(tmp_path: Path) -> None:
    path = tmp_path / "one-node.yaml"
    path.write_text(
        textwrap.dedent(
            """
            nodes:
              - name: lab-1
                labels: {zone: a}
                gpus:
                  - {model: A100-SXM4-80GB, count: 2}
            images: [nvcr.io/nvidia/k8s/cuda-sample:devicequery]
            """
        )
    )
    lab = topology.load(path)
    assert lab.node_names == ["lab-1"]
    assert [d.product_name for d in lab.devices()] == ["NVIDIA A100-SXM4-80GB"] * 2
    assert lab.images == ("nvcr.io/nvidia/k8s/cuda-sample:devicequery",)
    assert topology.node_object(lab, "lab-1")["metadata"]["labels"]["zone"] == "a"


def test_it_reads_the_pull_time_and_size_of_each_image(tmp_path: Path) -> None:
    path = tmp_path / "pulls.yaml"
    path.write_text(
        textwrap.dedent(
            """
            nodes: [{name: lab-1}]
            image_pull_seconds: 20
            images:
              - busybox:1.36
              - {image: "nvcr.io/nvidia/k8s/cuda-sample:devicequery", pull_seconds: 45, size: 7}
            """
        )
    )
    lab = topology.load(path)
    assert lab.images == ("busybox:1.36", "nvcr.io/nvidia/k8s/cuda-sample:devicequery")
    assert lab.image_pull_seconds_of("docker.io/library/busybox:1.36") == 20
    assert lab.image_pull_seconds_of("nvcr.io/nvidia/k8s/cuda-sample:devicequery") == 45
    assert lab.image_sizes == {"nvcr.io/nvidia/k8s/cuda-sample:devicequery": 7}
    default = topology.load(None)
    assert default.image_pull_seconds_of(default.images[0]) == topology.DEFAULT_PULL_SECONDS > 0


def test_it_adds_mig_devices_and_their_class() -> None:
    mig = topology.load(MIG_EXAMPLE)
    assert mig.has_mig()
    names = [c["metadata"]["name"] for c in topology.device_class_objects(mig)]
    assert names == ["gpu.nvidia.com", "mig.nvidia.com"]
    slices = mig.devices_by_node["mig-node-1"]
    migs = [d for d in slices if d.mig]
    assert len(migs) == 7 and migs[0].name == "gpu-0-mig-19-0-1"
    assert migs[0].attributes()["profile"] == {"string": "1g.5gb"}
    assert (
        migs[0].attributes()["parentUUID"]["string"] == migs[6].attributes()["parentUUID"]["string"]
    )
    assert migs[0].capacity()["memory"] == {"value": "4864Mi"}
    assert [d.name for d in slices if not d.mig] == ["gpu-1"]
    kubernetes_validate.validate(topology.slice_object(mig, "mig-node-1", "u"), "1.34", strict=True)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("nodes: []", "non-empty `nodes:`"),
        ("nodes: [{gpus: []}]", "needs a `name`"),
        ("nodes: [{name: a, gpus: [{model: V100}]}]", "unknown GPU model 'V100'"),
        ("nodes: [{name: a, gpus: [{model: H100-80GB-HBM3, mig: [9g.99gb]}]}]", "MIG profile"),
        ("{nodes: [{name: a}], image_pull_seconds: -1}", "`image_pull_seconds:` must be"),
        ("{nodes: [{name: a}], images: [{name: x}]}", "every `images:` entry"),
        ("{nodes: [{name: a}], images: [{image: x, pull_seconds: soon}]}", "pull_seconds"),
        ("{nodes: [{name: a}], images: [{image: x, size: big}]}", "size` must be"),
    ],
)
def test_it_explains_a_bad_topology(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(topology.TopologyError, match=problem.replace("[", r"\[")):
        topology.load(path)
