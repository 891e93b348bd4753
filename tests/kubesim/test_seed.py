"""The seed's steps, verbatim, against kubesim as the seed's platform and as upstream 1.34."""

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes import client, config, utils

import kubesim

# A copy of ../shared/seed/000_1e8e2eaeb581f209.txt, so the tests run from a clone alone.
SEED = Path(__file__).parent / "data" / "seed-000_1e8e2eaeb581f209.txt"
KUBECTL = shutil.which("kubectl")
PLATFORMS = {
    "seed-1.33-v1beta1": {"served_versions": ("v1beta1",), "k8s_version": "1.33.5"},
    "upstream-1.34": {"served_versions": ("v1", "v1beta2", "v1beta1"), "k8s_version": "1.34.1"},
}
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine")


def seed_commands(kubeconfig: str) -> list[str]:
    """The seed's first three `cat <<EOF | kubectl apply` heredocs, placeholders filled in."""
    text = SEED.read_text()
    heredocs = re.findall(r"^ *(cat <<EOF \| kubectl apply .*?\nEOF)$", text, re.M | re.S)
    filled = [
        h.replace("CLUSTER_KUBECONFIG", kubeconfig)
        .replace("NAMESPACE_NAME", "dra-test")
        .replace("RESOURCE_CLAIM_NAME", "gpu-claim")
        for h in heredocs
    ]
    return filled[:3]


def seed_manifests() -> list[dict]:
    return [
        yaml.safe_load(command.split("\n", 1)[1].rsplit("\nEOF", 1)[0])
        for command in seed_commands("x")
    ]


def kubectl(kubeconfig: str, *args: str) -> str:
    result = subprocess.run(
        [KUBECTL or "kubectl", f"--kubeconfig={kubeconfig}", "-n", "dra-test", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(params=list(PLATFORMS))
def platform(request: pytest.FixtureRequest) -> Iterator[tuple[str, kubesim.Handle]]:
    handle = kubesim.start(speed=20, **PLATFORMS[request.param])
    yield request.param, handle
    handle.stop()


def test_it_reads_the_three_heredocs_of_the_seed() -> None:
    namespace, claim, pod = seed_manifests()
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-test"}}
    assert claim["apiVersion"] == "resource.k8s.io/v1beta1"
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "gpu", "deviceClassName": "gpu.nvidia.com"}
    ]
    assert [c["name"] for c in pod["spec"]["containers"]] == ["ctr0", "ctr1"]


def check_logs(vector_add: str, device_query: str) -> None:
    assert vector_add.splitlines()[-2:] == ["Test PASSED", "Done"]
    assert device_query.splitlines()[-1] == "Result = PASS"
    assert re.search(r'Device 0: "NVIDIA (H100 80GB HBM3|A100-SXM4-40GB)"', device_query)


@needs_kubectl
def test_it_runs_the_seed_with_kubectl(platform: tuple[str, kubesim.Handle]) -> None:
    _, handle = platform
    for command in seed_commands(handle.kubeconfig):
        result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    waited = kubectl(
        handle.kubeconfig,
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/pod1",
        "--timeout=30s",
    )
    assert "condition met" in waited
    check_logs(
        kubectl(handle.kubeconfig, "logs", "pod1", "-c", "ctr0"),
        kubectl(handle.kubeconfig, "logs", "pod1", "-c", "ctr1"),
    )


@needs_kubectl
def test_it_shows_the_allocation_while_pod1_runs() -> None:
    # Slow enough (2 s running) that one kubectl call lands while pod1 runs, even under load.
    handle = kubesim.start(speed=1.5, **PLATFORMS["seed-1.33-v1beta1"])
    try:
        for command in seed_commands(handle.kubeconfig):
            subprocess.run(["bash", "-c", command], check=True, capture_output=True, timeout=60)
        kubectl(
            handle.kubeconfig,
            "wait",
            "--for=jsonpath={.status.phase}=Running",
            "pod/pod1",
            "--timeout=30s",
        )
        both = kubectl(
            handle.kubeconfig, "get", "resourceclaim/gpu-claim", "pod/pod1", "-o", "yaml"
        )
    finally:
        handle.stop()
    claim, pod = yaml.safe_load(both)["items"]
    assert pod["status"]["phase"] == "Running"
    assert claim["apiVersion"] == "resource.k8s.io/v1beta1"
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["request"] == "gpu" and result["driver"] == "gpu.nvidia.com"
    assert result["pool"] == pod["spec"]["nodeName"]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "pod1", "uid": pod["metadata"]["uid"]}
    ]
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    kubernetes_validate.validate(claim, "1.33", strict=True)


def wait_for_phase(core: client.CoreV1Api, phase: str, timeout: float = 10.0) -> client.V1Pod:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod("pod1", "dra-test")
        if pod.status.phase == phase:
            return pod
        time.sleep(0.05)
    raise AssertionError(f"pod1 never reached {phase}")


def test_it_runs_the_seed_with_the_python_client(platform: tuple[str, kubesim.Handle]) -> None:
    name, handle = platform
    api = config.new_client_from_config(handle.kubeconfig)
    for manifest in seed_manifests():
        utils.create_from_dict(api, manifest)
    core = client.CoreV1Api(api)
    pod = wait_for_phase(core, "Succeeded")
    check_logs(
        core.read_namespaced_pod_log("pod1", "dra-test", container="ctr0"),
        core.read_namespaced_pod_log("pod1", "dra-test", container="ctr1"),
    )
    statuses = {s.name: s.state.terminated for s in pod.status.container_statuses}
    assert {n: (t.exit_code, t.reason) for n, t in statuses.items()} == {
        "ctr0": (0, "Completed"),
        "ctr1": (0, "Completed"),
    }
    claim = client.ResourceV1beta1Api(api).read_namespaced_resource_claim("gpu-claim", "dra-test")
    assert claim.spec.devices.requests[0].device_class_name == "gpu.nvidia.com"
    assert claim.status.allocation is None  # pod1 finished, so the claim was deallocated
    if name == "upstream-1.34":
        v1_claim = client.ResourceV1Api(api).read_namespaced_resource_claim("gpu-claim", "dra-test")
        assert v1_claim.spec.devices.requests[0].exactly.count == 1
