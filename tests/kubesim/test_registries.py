"""Pulls on an air-gapped cluster: mirrors, pull secrets, and containerd's failure messages."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

import kubesim
from kubesim.cluster.topology import TopologyError, from_dict
from kubesim.kubelet import images
from tests.fixtures.kubesim import api_client, create_namespace, wait_until

AIRGAPPED = Path(kubesim.__file__).parent / "cluster" / "topologies" / "airgapped.yaml"
PRIVATE = "registry.airgap.example/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
CACHE = "mirror.airgap.example/nvcr/nvidia/k8s/cuda-sample:devicequery"
PUBLIC = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DENIED = (
    f'failed to pull and unpack image "{PRIVATE}": failed to resolve reference "{PRIVATE}": '
    "pull access denied, repository does not exist or may require authorization: server "
    "message: insufficient_scope: authorization failed"
)


@pytest.fixture(scope="module")
def airgapped() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(topology=str(AIRGAPPED), speed=50)
    yield handle
    handle.stop()


@pytest.fixture
def core(airgapped: kubesim.Handle) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(airgapped))


@pytest.fixture
def namespace(airgapped: kubesim.Handle) -> str:
    return create_namespace(airgapped, "airgap")


def pull_secret(core: client.CoreV1Api, namespace: str, name: str, host: str) -> None:
    config = {"auths": {host: {"username": "robot", "password": "s3cret"}}}
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=name),
            type="kubernetes.io/dockerconfigjson",
            string_data={".dockerconfigjson": json.dumps(config)},
        ),
    )


def run_pod(core: client.CoreV1Api, namespace: str, image: str, secret: str = "") -> None:
    """The verification Pod: one container on one GPU of a claim made for it."""
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    claim = {"metadata": {"name": "verify"}, "spec": {"devices": {"requests": [request]}}}
    resource = client.ResourceV1Api(core.api_client)
    resource.create_namespaced_resource_claim(namespace, claim)
    # Always: a node keeps what it pulled, and with IfNotPresent a later Pod would run the
    # image an earlier test pulled without asking the registry (and its credentials) again.
    container = {
        "name": "ctr0",
        "image": image,
        "imagePullPolicy": "Always",
        "resources": {"claims": [{"name": "gpu"}]},
    }
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [container],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "verify"}],
    }
    if secret:
        spec["imagePullSecrets"] = [{"name": secret}]
    core.create_namespaced_pod(namespace, {"metadata": {"name": "verify"}, "spec": spec})


def waiting(core: client.CoreV1Api, namespace: str, reason: str) -> Any:
    def check() -> Any:
        pod = core.read_namespaced_pod("verify", namespace)
        statuses = pod.status.container_statuses or []
        state = statuses[0].state.waiting if statuses else None
        return state if state is not None and state.reason == reason else None

    return wait_until(check, timeout=15)


def events(core: client.CoreV1Api, namespace: str) -> list[tuple[str, str, str]]:
    listed = core.list_namespaced_event(namespace).items
    return [(e.type, e.reason, e.message) for e in listed]


def succeeded(core: client.CoreV1Api, namespace: str) -> Any:
    return wait_until(
        lambda: core.read_namespaced_pod("verify", namespace).status.phase == "Succeeded",
        timeout=15,
    )


def test_a_mirror_pull_with_its_secret_runs_the_nvcr_sample(
    airgapped: kubesim.Handle, core: client.CoreV1Api, namespace: str
) -> None:
    pull_secret(core, namespace, "regcred", "registry.airgap.example")
    run_pod(core, namespace, PRIVATE, "regcred")
    succeeded(core, namespace)
    log = core.read_namespaced_pod_log("verify", namespace)
    assert log.splitlines()[-2:] == ["Test PASSED", "Done"]
    assert any(e[1] == "Pulled" and PRIVATE in e[2] for e in events(core, namespace))


def test_a_pull_through_cache_under_a_path_needs_no_secret(
    airgapped: kubesim.Handle, core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, CACHE)
    succeeded(core, namespace)
    assert "Result = PASS" in core.read_namespaced_pod_log("verify", namespace)


def test_a_private_mirror_without_credentials_denies_the_pull(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, PRIVATE)
    assert waiting(core, namespace, "ErrImagePull").message == DENIED
    backing_off = waiting(core, namespace, "ImagePullBackOff")
    assert backing_off.message == f'Back-off pulling image "{PRIVATE}": ErrImagePull: {DENIED}'
    seen = events(core, namespace)
    assert ("Warning", "Failed", f'Failed to pull image "{PRIVATE}": {DENIED}') in seen
    assert ("Warning", "Failed", "Error: ErrImagePull") in seen
    assert ("Normal", "BackOff", f'Back-off pulling image "{PRIVATE}"') in seen
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in seen


def test_a_missing_pull_secret_is_reported_and_the_pull_retried_once_it_exists(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, PRIVATE, "regcred")
    assert waiting(core, namespace, "ImagePullBackOff").message.endswith(DENIED)
    message = (
        "Unable to retrieve some image pull secrets (regcred); attempting to pull the image "
        "may not succeed."
    )
    assert ("Warning", "FailedToRetrieveImagePullSecret", message) in events(core, namespace)
    pull_secret(core, namespace, "regcred", "https://registry.airgap.example/v1/")
    succeeded(core, namespace)


def test_credentials_for_another_host_do_not_help(core: client.CoreV1Api, namespace: str) -> None:
    pull_secret(core, namespace, "other", "mirror.airgap.example")
    run_pod(core, namespace, PRIVATE, "other")
    assert waiting(core, namespace, "ErrImagePull").message == DENIED


def test_a_public_registry_is_unreachable_from_an_air_gap(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, PUBLIC)
    state = waiting(core, namespace, "ErrImagePull")
    prefix = (
        f'failed to pull and unpack image "{PUBLIC}": failed to resolve reference "{PUBLIC}": '
        'failed to do request: Head "https://nvcr.io/v2/nvidia/k8s/cuda-sample/manifests/'
        'vectoradd-cuda12.5.0": dial tcp: lookup nvcr.io on 127.0.0.53:53: read udp 127.0.0.1:'
    )
    assert state.message.startswith(prefix)
    assert state.message.endswith("->127.0.0.53:53: i/o timeout")


def test_an_unknown_tag_on_a_mirror_is_not_found(core: client.CoreV1Api, namespace: str) -> None:
    image = "mirror.airgap.example/nvcr/nvidia/k8s/cuda-sample:nope"
    run_pod(core, namespace, image)
    assert waiting(core, namespace, "ErrImagePull").message == (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )


def test_docker_hub_short_names_resolve_as_containerd_does() -> None:
    ref = images.parse("busybox")
    assert (ref.full, images.parse("docker.io/nginx:1").full) == (
        "docker.io/library/busybox:latest",
        "docker.io/library/nginx:1",
    )
    message = images.unreachable(ref)
    assert 'Head "https://registry-1.docker.io/v2/library/busybox/manifests/latest"' in message
    assert images.has_credentials(["https://index.docker.io/v1/"], ref)


@pytest.mark.parametrize(
    ("location", "matches"),
    [
        ("registry.airgap.example", True),
        ("https://registry.airgap.example", True),
        ("*.airgap.example", True),
        ("registry.airgap.example/nvidia", True),
        ("registry.airgap.example/other", False),
        ("registry.airgap.example:5000", False),
        ("airgap.example", False),
    ],
)
def test_pull_secret_locations_match_as_the_kubelet_keyring_does(
    location: str, matches: bool
) -> None:
    assert images.has_credentials([location], images.parse(PRIVATE)) is matches


def test_the_default_topology_reaches_every_registry() -> None:
    topology = from_dict({"nodes": [{"name": "n"}]})
    assert (topology.offline, topology.registries) == (False, {})
    assert images.pull(topology, PUBLIC, []).ok
    assert images.pull(topology, "registry.airgap.example/x:1", []).error.startswith(
        "rpc error: code = NotFound"
    )


@pytest.mark.parametrize(
    "section",
    [{"registries": ["a"]}, {"registries": {"a": {"mirror": "b"}}}, {"offline": "yes"}],
)
def test_a_bad_registries_section_is_refused(section: dict) -> None:
    with pytest.raises(TopologyError):
        from_dict({"nodes": [{"name": "n"}], **section})
