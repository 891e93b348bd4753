"""The claim form's alternatives (DRA's prioritized list): rows after the first, their
feasibility in the live preview, and their errors next to the right row's field."""

from __future__ import annotations

import copy
import html
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.urls import reverse

from claims.domain import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from tests.claims.web.test_views import GPU_CLASS, INVENTORY, client_for, h100, htmx_client_for
from tests.claims.web.test_views_requests import claim_form_data, field_errors

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


def a100(index: int) -> dict[str, Any]:
    device = copy.deepcopy(h100(index, node="gpu-node-2"))
    device["attributes"]["productName"] = A100
    device["capacity"] = {"memory": "40Gi"}
    return device


@pytest.fixture
def cluster(db: None) -> Cluster:
    inventory = copy.deepcopy(INVENTORY)
    inventory["devices"] = [h100(0), h100(1), a100(2), a100(3)]
    inventory["device_counts"] = {GPU_CLASS: 4, "mig.nvidia.com": 0}
    return Cluster.objects.create(
        name="kubesim",
        simulated=True,
        resource_versions=["v1", "v1beta2", "v1beta1"],
        preferred_resource_version="v1",
        inventory=inventory,
    )


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(user=alice, cluster=cluster, name="alice-ml")


def with_alternative(namespace: NamespaceRequest, **rows: object) -> dict[str, object]:
    return claim_form_data(namespace, gpu_model=H100, **rows)


def test_it_offers_one_alternative_row_at_a_time_and_keeps_one_request_by_default(
    namespace: NamespaceRequest,
) -> None:
    content = client_for(namespace.owner).get(reverse("claim-request")).content.decode()
    assert "Add an alternative" in content
    assert 'id="alternative-2"' in content and 'id="alternative-8"' in content
    assert 'id="alternative-9"' not in content
    assert " open>" not in content  # every row closed until the user adds one
    preview = htmx_client_for(namespace.owner).post(
        reverse("claim-preview"), claim_form_data(namespace)
    )
    assert "exactly:" in html.unescape(preview.content.decode())


def test_it_submits_a_claim_with_an_alternative(namespace: NamespaceRequest) -> None:
    data = with_alternative(
        namespace, alt2_device_class=GPU_CLASS, alt2_gpu_model=A100, alt2_count=2
    )
    response = client_for(namespace.owner).post(reverse("claim-request"), data)

    assert response.status_code == 302
    claim = ClaimRequest.objects.get()
    assert claim.gpu_model == H100
    (alternative,) = claim.further_alternatives
    assert (alternative["gpu_model"], alternative["count"]) == (A100, 2)
    assert f"productName == '{A100}'" in alternative["selector"]
    page = client_for(namespace.owner).get(reverse("claim", args=[claim.pk])).content.decode()
    assert A100 in html.unescape(page)
    dashboard = client_for(namespace.owner).get(reverse("dashboard")).content.decode()
    assert "else 1 alternative" in dashboard


def test_it_shows_an_alternatives_error_next_to_the_field_of_its_row(
    namespace: NamespaceRequest,
) -> None:
    data = with_alternative(
        namespace,
        alt2_device_class=GPU_CLASS,
        alt2_gpu_model=A100,
        alt4_device_class=GPU_CLASS,
        alt4_gpu_model="NVIDIA B200",
        alt4_count=1,
    )
    response = client_for(namespace.owner).post(reverse("claim-request"), data)

    assert response.status_code == 200
    content = html.unescape(response.content.decode())
    assert "No device of this class is a 'NVIDIA B200'" in field_errors(content, "alt4_gpu_model")
    assert "errorlist" not in field_errors(content, "alt2_gpu_model")
    assert "errorlist" not in field_errors(content, "gpu_model")
    assert 'id="alternative-4" open' in content
    assert not ClaimRequest.objects.exists()


def test_it_says_a_count_no_node_has_next_to_its_rows_count(namespace: NamespaceRequest) -> None:
    data = with_alternative(
        namespace, alt2_device_class=GPU_CLASS, alt2_gpu_model=A100, alt2_count=3
    )
    content = client_for(namespace.owner).post(reverse("claim-request"), data).content.decode()
    assert "cannot give 3 to one claim" in html.unescape(field_errors(content, "alt2_count"))


def test_the_preview_shows_each_alternative_and_the_first_that_fits_now(
    namespace: NamespaceRequest, alice: User
) -> None:
    taken = [
        {"request": "gpu", "driver": GPU_CLASS, "pool": "gpu-node-1", "device": f"gpu-{n}"}
        for n in (0, 1)
    ]
    ClaimRequest.objects.create(
        namespace_request=namespace,
        owner=alice,
        name="other",
        device_class=GPU_CLASS,
        count=2,
        state="in_use",
        allocation={"node": "gpu-node-1", "devices": taken},
    )
    data = with_alternative(namespace, alt2_device_class=GPU_CLASS, alt2_gpu_model=A100)
    response = htmx_client_for(namespace.owner).post(reverse("claim-preview"), data)

    content = html.unescape(response.content.decode())
    assert f"Alternative 1 ({H100}): Can be satisfied" in content
    assert "Free now: 0" in content
    assert f"Alternative 2 ({A100}): Can be satisfied" in content
    assert f"The first that fits now: alternative 2 ({A100})." in content
    manifest = yaml.safe_load(content.split('<pre id="manifest-yaml">')[1].split("</pre>")[0])
    (request,) = manifest["spec"]["devices"]["requests"]
    assert [sub["name"] for sub in request["firstAvailable"]] == ["h100", "a100"]
