"""The seed's kubectl loop: namespace, the v1 ResourceClaim, pod1, wait for Succeeded, logs."""

from __future__ import annotations

import subprocess

import yaml

from bench.flow_steps import check_log, step


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr}")
    return result.stdout


def seed_manifests(namespace: str) -> tuple[str, str]:
    """The seed's ResourceClaim (in resource.k8s.io/v1) and pod1, in the given namespace."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": "gpu-claim"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    images = {
        "ctr0": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "ctr1": "nvcr.io/nvidia/k8s/cuda-sample:devicequery",
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": namespace},
        "spec": {
            "restartPolicy": "OnFailure",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            "containers": [
                {"name": name, "image": image, "resources": {"claims": [{"name": "gpu"}]}}
                for name, image in images.items()
            ],
        },
    }
    return yaml.safe_dump(claim), yaml.safe_dump(pod)


def kubectl_flow(kubeconfig: str, namespace: str) -> None:
    claim, pod = seed_manifests(namespace)
    with step(namespace, "create namespace"):
        kubectl(kubeconfig, "create", "namespace", namespace)
    with step(namespace, "apply claim, apply pod"):
        kubectl(kubeconfig, "apply", "-f", "-", stdin=claim)
        kubectl(kubeconfig, "apply", "-f", "-", stdin=pod)
    jsonpath = "--for=jsonpath={.status.phase}=Succeeded"
    with step(namespace, "wait Succeeded"):
        kubectl(kubeconfig, "-n", namespace, "wait", jsonpath, "pod/pod1", "--timeout=120s")
    with step(namespace, "logs"):
        for container in ("ctr0", "ctr1"):
            log = kubectl(kubeconfig, "-n", namespace, "logs", "pod1", "-c", container)
            check_log(container, log)
