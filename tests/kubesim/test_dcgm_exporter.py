"""kubesim's dcgm-exporters: NVIDIA's text and DRA labels, values following what runs."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

import kubesim
from tests.fixtures.kubesim import api_client, create_namespace, wait_until

TRAIN_IMAGE = "ghcr.io/gpu-portal/train-sim:1.0"
# dcgm-exporter's renderer (internal/pkg/rendermetrics/render_metrics.go): these, in order.
DEVICE_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname"]
DRA_LABELS = {
    "container",
    "dra_claim_name",
    "dra_claim_namespace",
    "dra_device_name",
    "dra_driver_name",
    "dra_pool_name",
    "namespace",
    "pod",
}


def scrape(handle: kubesim.Handle, node: str = "gpu-node-1") -> str:
    with urllib.request.urlopen(handle.dcgm_exporter_urls[node], timeout=10) as response:
        return response.read().decode()


def samples(handle: kubesim.Handle, name: str, node: str = "gpu-node-1") -> list[Any]:
    return [
        sample
        for family in text_string_to_metric_families(scrape(handle, node))
        for sample in family.samples
        if sample.name == name
    ]


def claimed(handle: kubesim.Handle, name: str, claim: str) -> list[Any]:
    return [s for s in samples(handle, name) if s.labels.get("dra_claim_name") == claim]


def run_on_gpu(
    handle: kubesim.Handle, namespace: str, name: str, image: str, args: list[str]
) -> None:
    """A ResourceClaim for one GPU of gpu-node-1 and a Pod whose container uses it."""
    api = api_client(handle)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", claim
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": "gpu-node-1"},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "args": args,
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    client.CoreV1Api(api).create_namespaced_pod(namespace, pod)


def test_it_serves_dcgm_exporters_text_for_every_gpu_of_a_node(kubesim_private) -> None:
    text = scrape(kubesim_private)
    assert (
        "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n"
        in text
    )
    assert "# TYPE DCGM_FI_DEV_FB_USED gauge\n" in text
    first = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    names = [
        pair.split("=")[0] for pair in first[first.index("{") + 1 : first.index("}")].split(",")
    ]
    assert names == [*DEVICE_LABELS, "DCGM_FI_DRIVER_VERSION"]
    activity = samples(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert len(activity) == 4 and all(s.value == 0 for s in activity)  # idle GPUs
    sample = activity[0]
    assert sample.labels["pci_bus_id"].startswith("00000000:")
    assert sample.labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert sample.labels["device"] == "nvidia0" and sample.labels["hostname"] == "gpu-node-1"
    assert all(s.value == 0 for s in samples(kubesim_private, "DCGM_FI_DEV_XID_ERRORS"))


def test_it_gives_an_unknown_node_404(kubesim_private) -> None:
    url = kubesim_private.dcgm_exporter_urls["gpu-node-1"].replace("gpu-node-1", "nowhere")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=10)
    assert caught.value.code == 404


def test_it_loads_a_claimed_gpu_as_train_sim_asks_and_labels_it_with_the_claim(
    kubesim_private,
) -> None:
    namespace = create_namespace(kubesim_private)
    args = ["--steps", "1000", "--step-seconds", "100", "--load", "0.6"]
    run_on_gpu(kubesim_private, namespace, "train", TRAIN_IMAGE, args)
    busy = wait_until(
        lambda: [
            s
            for s in claimed(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "train")
            if s.value > 0
        ],
        timeout=30,
    )
    assert busy[0].value == pytest.approx(0.6)
    assert set(busy[0].labels) >= DRA_LABELS
    labels = busy[0].labels
    assert (labels["dra_claim_namespace"], labels["namespace"], labels["pod"]) == (
        namespace,
        namespace,
        "train",
    )
    assert (labels["container"], labels["dra_driver_name"], labels["dra_pool_name"]) == (
        "main",
        "gpu.nvidia.com",
        "gpu-node-1",
    )
    (used,) = claimed(kubesim_private, "DCGM_FI_DEV_FB_USED", "train")
    (free,) = claimed(kubesim_private, "DCGM_FI_DEV_FB_FREE", "train")
    assert 0.5 < used.value / (used.value + free.value) < 0.65  # 0.1 + 0.8 x load
    (power,) = claimed(kubesim_private, "DCGM_FI_DEV_POWER_USAGE", "train")
    assert 72 < power.value < 700
    others = [
        s
        for s in samples(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        if "dra_claim_name" not in s.labels
    ]
    assert len(others) == 3 and all(s.value == 0 for s in others)

    client.CoreV1Api(api_client(kubesim_private)).delete_namespaced_pod(
        "train", namespace, grace_period_seconds=0
    )
    wait_until(
        lambda: not claimed(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "train"), timeout=30
    )
    assert all(s.value == 0 for s in samples(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"))


def test_it_bursts_while_a_cuda_sample_runs_and_idles_after() -> None:
    with kubesim.start(speed=1) as handle:  # the sample runs 3 s: long enough to see
        namespace = create_namespace(handle)
        run_on_gpu(
            handle, namespace, "vadd", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", []
        )
        wait_until(
            lambda: any(
                s.value > 0.5 for s in claimed(handle, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "vadd")
            ),
            timeout=30,
        )
        wait_until(
            lambda: all(s.value == 0 for s in samples(handle, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")),
            timeout=30,
        )


def test_it_plays_an_exporter_without_dra_labels_and_raises_an_xid(kubesim_private) -> None:
    namespace = create_namespace(kubesim_private)
    run_on_gpu(
        kubesim_private,
        namespace,
        "train",
        TRAIN_IMAGE,
        ["--steps", "1000", "--step-seconds", "100"],
    )
    wait_until(
        lambda: any(
            s.value > 0 for s in claimed(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "train")
        ),
        timeout=30,
    )
    kubesim_private.admin("POST", "/_kubesim/dcgm", {"draLabels": False})
    activity = samples(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert not any("dra_claim_name" in s.labels for s in activity)
    assert sorted(s.value for s in activity)[-1] == pytest.approx(0.85)  # train-sim's default

    kubesim_private.admin(
        "POST", "/_kubesim/dcgm/xid", {"node": "gpu-node-1", "device": "gpu-2", "xid": 79}
    )
    xids = {s.labels["gpu"]: s.value for s in samples(kubesim_private, "DCGM_FI_DEV_XID_ERRORS")}
    assert xids == {"0": 0, "1": 0, "2": 79, "3": 0}
    with pytest.raises(urllib.error.HTTPError) as caught:
        kubesim_private.admin(
            "POST", "/_kubesim/dcgm/xid", {"node": "gpu-node-1", "device": "gpu-9", "xid": 79}
        )
    assert caught.value.code == 400


def hold_on_gpu(handle: kubesim.Handle, namespace: str, name: str) -> dict[str, Any]:
    """A ResourceClaim for one GPU of gpu-node-1, reserved by a running Pod whose container
    does not use it (nothing runs on the GPU, no pod-resources entry names it); gives the
    allocation as the portal keeps it (claims/worker/sync.py), with the ResourceSlice's
    attributes of the device."""
    api = api_client(handle)
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "resource.k8s.io",
        "v1",
        namespace,
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            },
        },
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": "gpu-node-1"},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [
                {
                    "name": "main",
                    "image": TRAIN_IMAGE,
                    "args": ["--steps", "1000", "--step-seconds", "100", "--load", "0.5"],
                }
            ],
        },
    }
    client.CoreV1Api(api).create_namespaced_pod(namespace, pod)

    def allocated() -> list[dict[str, Any]]:
        found = custom.get_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaims", name
        )
        return ((found.get("status") or {}).get("allocation") or {}).get("devices", {}).get(
            "results"
        ) or []

    (result,) = wait_until(allocated, timeout=30)
    slices = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    (device,) = [
        device
        for item in slices["items"]
        if item["spec"]["pool"]["name"] == result["pool"]
        for device in item["spec"].get("devices") or []
        if device["name"] == result["device"]
    ]
    attributes = {key: next(iter(value.values())) for key, value in device["attributes"].items()}
    return {
        "node": result["pool"],
        "devices": [
            {**result, "node": result["pool"], "attributes": attributes, "capacity": {}},
        ],
        "reserved_for": [],
    }


def test_a_gpu_held_but_unused_has_its_series_without_dra_labels(kubesim_private) -> None:
    namespace = create_namespace(kubesim_private)
    allocation = hold_on_gpu(kubesim_private, namespace, "held")
    uuid = allocation["devices"][0]["attributes"]["uuid"]
    assert uuid.startswith("GPU-")

    def series() -> list[Any]:
        return [s for s in samples(kubesim_private, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")]

    # dcgm-exporter keeps every GPU's series; no container uses this one, so no DRA labels.
    wait_until(lambda: any(s.labels["UUID"] == uuid for s in series()), timeout=30)
    (held,) = [s for s in series() if s.labels["UUID"] == uuid]
    assert not DRA_LABELS & set(held.labels) and held.value == 0
    assert held.labels["hostname"] == "gpu-node-1"
