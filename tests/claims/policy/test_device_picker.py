"""The device picker: choices from what kubesim's ResourceSlices publish, turned into CEL that
the DRA CEL environment compiles and the claim manifests the API schemas accept."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from hypothesis import given
from hypothesis import strategies as st

import dracel
import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.kube import manifests
from claims.models import Cluster, NamespaceRequest
from claims.policy import device_picker, feasibility
from claims.policy.device_picker import Options, Picks
from tests.fixtures.portal import register_cluster

GPU = "gpu.nvidia.com"
MIG = "mig.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"
MIG_TOPOLOGY = "kubesim/cluster/topologies/mig-example.yaml"


@pytest.fixture(scope="module")
def mig_kubesim() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=20, topology=MIG_TOPOLOGY)
    yield handle
    handle.stop()


@pytest.fixture
def mig_cluster(db: None, mig_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(mig_kubesim, name="mig")
    gateways.forget_gateways()


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(
        user=alice, cluster=cluster, name=f"pick-{uuid.uuid4().hex[:6]}"
    )


def test_it_writes_one_clause_per_pick_and_the_cluster_compiles_it() -> None:
    picks = Picks(gpu_model=H100, min_memory="40Gi", mig_profile="1g.5gb")

    selector = device_picker.selector_for(picks, GPU)

    assert selector == (
        f"device.attributes['gpu.nvidia.com'].productName == '{H100}' && "
        "device.attributes['gpu.nvidia.com'].profile == '1g.5gb' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    )
    assert dracel.compile_error(selector) is None
    assert device_picker.selector_for(Picks(), GPU) == ""


def test_it_keeps_what_the_user_wrote_as_a_clause_of_its_own() -> None:
    written = "device.attributes['gpu.nvidia.com'].brand == 'Nvidia' || false"
    generated = device_picker.selector_for(Picks(min_memory="80Gi"))

    selector = device_picker.combined(generated, written)

    assert selector == f"{generated} && ({written})"
    assert dracel.compile_error(selector) is None
    assert device_picker.combined("", f" {written} ") == written
    assert device_picker.combined(generated, "") == generated


@given(st.text(min_size=1, max_size=64).filter(lambda text: "\x00" not in text))
def test_it_quotes_any_model_name_so_the_cel_matches_exactly_that_name(model: str) -> None:
    selector = device_picker.selector_for(Picks(gpu_model=model), GPU)
    device = {"attributes": {"productName": model}, "capacity": {"memory": "80Gi"}}

    assert dracel.compile_error(selector) is None
    assert dracel.matches(selector, dracel.device_activation(GPU, device))
    other = {"attributes": {"productName": model + "x"}, "capacity": {}}
    assert not dracel.matches(selector, dracel.device_activation(GPU, other))


def test_it_offers_the_models_and_memory_sizes_the_cluster_publishes(cluster: Cluster) -> None:
    offered = device_picker.options(cluster.inventory, GPU)

    # What the devices publish, NVML's figure: an H100 80GB HBM3 has 81559Mi, not 80Gi.
    assert offered == Options(domain=GPU, models=[A100, H100], memories=["81559Mi", "40Gi"])
    assert device_picker.options(cluster.inventory, "no.such.class") == Options()


def test_it_offers_the_mig_profiles_of_the_mig_class(mig_cluster: Cluster) -> None:
    offered = device_picker.options(mig_cluster.inventory, MIG)

    assert offered.profiles == ["1g.5gb"]
    assert offered.models == [A100]
    assert device_picker.options(mig_cluster.inventory, GPU).profiles == []


@pytest.mark.parametrize(
    ("picks", "matching", "on_one_node"),
    [
        (Picks(gpu_model=H100), 4, 4),
        (Picks(min_memory="60Gi"), 4, 4),
        (Picks(min_memory="40Gi"), 8, 4),
        (Picks(min_memory="81Gi"), 0, 0),
        (Picks(min_memory="81559Mi"), 4, 4),  # the size the picker offers for an H100
        (Picks(min_memory="80Gi"), 0, 0),  # more than an H100 80GB has, as on a real cluster
        (Picks(gpu_model=A100, min_memory="80Gi"), 0, 0),
    ],
)
def test_the_generated_cel_selects_the_devices_the_picks_describe(
    cluster: Cluster, picks: Picks, matching: int, on_one_node: int
) -> None:
    selector = device_picker.selector_for(picks, GPU)

    found = feasibility.assess(cluster=cluster, device_class=GPU, count=1, selector=selector)

    assert found.selector_evaluated
    assert (found.matching, found.max_on_one_node) == (matching, on_one_node)


def test_a_mig_pick_selects_the_slices_of_that_profile(mig_cluster: Cluster) -> None:
    selector = device_picker.selector_for(Picks(mig_profile="1g.5gb"), GPU)

    found = feasibility.assess(cluster=mig_cluster, device_class=MIG, count=7, selector=selector)

    assert found.line() == "7 devices match, 7 free now, at most 7 on one node"
    assert found.possible


@pytest.mark.parametrize(("version", "k8s"), [("v1beta1", "1.33"), ("v1beta1", "1.34")])
def test_the_claim_with_picker_cel_is_a_valid_v1beta1_claim(version: str, k8s: str) -> None:
    assert_valid_claim(version, k8s)


def test_the_claim_with_picker_cel_is_a_valid_v1_claim() -> None:
    assert_valid_claim("v1", "1.34")


def assert_valid_claim(version: str, k8s: str) -> None:
    picks = Picks(gpu_model=H100, min_memory="40Gi")
    selector = device_picker.combined(device_picker.selector_for(picks), "device.driver != ''")
    manifest = manifests.resource_claim_manifest(
        api_version=version,
        namespace="team-a",
        name="picked",
        device_class=GPU,
        count=2,
        selector=selector,
        labels={"gpu-portal.io/claim-request": "1"},
    )
    kubernetes_validate.validate(manifest, k8s, strict=True)
    request = manifest["spec"]["devices"]["requests"][0]
    assert (request.get("exactly") or request)["selectors"] == [{"cel": {"expression": selector}}]


@pytest.mark.parametrize(
    ("picks", "field", "words"),
    [
        (Picks(min_memory="lots"), "min_memory", "'lots' is not a memory size"),
        (Picks(gpu_model="NVIDIA B200"), "gpu_model", f"Known: {A100}, {H100}."),
        (Picks(mig_profile="1g.5gb"), "mig_profile", "this class has no MIG devices"),
    ],
)
def test_it_says_which_pick_the_cluster_cannot_honour(
    cluster: Cluster, picks: Picks, field: str, words: str
) -> None:
    problems = device_picker.problems(picks, device_picker.options(cluster.inventory, GPU))

    assert list(problems) == [field]
    assert words in problems[field]


def test_a_claim_stores_its_picks_and_carries_their_cel(
    alice: User, namespace: NamespaceRequest
) -> None:
    claim = submit(alice, namespace, gpu_model=H100, min_memory="40Gi", count=2)

    claim.refresh_from_db()
    assert (claim.gpu_model, claim.min_memory, claim.mig_profile) == (H100, "40Gi", "")
    assert claim.selector == device_picker.selector_for(Picks(H100, "40Gi"), GPU)


def test_a_pick_nothing_matches_is_an_error_next_to_the_picker(
    alice: User, namespace: NamespaceRequest
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit(alice, namespace, min_memory="100Gi")

    assert list(refused.value.message_dict) == ["min_memory"]
    assert "No device in the cluster matches this selector" in str(refused.value)
    assert not namespace.claim_requests.exists()


def submit(user: User, ns: NamespaceRequest, **fields: Any) -> Any:
    values = {"name": f"c-{uuid.uuid4().hex[:6]}", "device_class": GPU, "count": 1} | fields
    return services.claim_request_submit(user=user, namespace_request=ns, **values)
