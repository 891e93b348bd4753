"""POST /api/v1/claims/preview/ with `alternatives` (issue 25.2): each alternative previewed in
order with its feasibility, which one fits now first, and field errors under each
alternative's index as the claim create API answers them."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from claims.models import Cluster

Api = Callable[[str], APIClient]
GPU = "gpu.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"
URL = "/api/v1/claims/preview/"


def post(api: Api, cluster: Cluster, **body: object) -> tuple[int, dict]:
    response = api("alice").post(URL, {"cluster": cluster.pk, **body}, format="json")
    return response.status_code, response.json()


def test_it_previews_each_alternative_and_names_the_first_that_fits_now(
    api: Api, cluster: Cluster
) -> None:
    alternatives = [
        {"device_class": GPU, "gpu_model": H100, "count": 5},
        {"device_class": GPU, "gpu_model": A100, "count": 2},
        {"device_class": GPU, "all_devices": True},
    ]
    status, preview = post(api, cluster, alternatives=alternatives)

    assert status == 200, preview
    found = preview["alternatives"]
    assert [f"{H100}'" in alt["generated_selector"] for alt in found] == [True, False, False]
    assert [alt["feasibility"]["possible"] for alt in found] == [False, True, True]
    assert [alt["feasibility"]["matching"] for alt in found] == [4, 4, 8]
    assert found[1]["feasibility"]["line"] == "4 devices match, 4 free now, at most 4 on one node"
    # H100 x5 is never possible: the scheduler would take the A100s.
    assert preview["first_fitting_now"] == 2
    # The top is the first alternative's, as without alternatives.
    assert preview["feasibility"] == found[0]["feasibility"]
    assert preview["device_class"] == GPU

    status, none_fits = post(
        api, cluster, alternatives=[{"device_class": GPU, "gpu_model": H100, "count": 5}]
    )
    assert status == 200 and none_fits["first_fitting_now"] is None
    status, flat = post(api, cluster, device_class=GPU, count=2)
    assert status == 200
    assert len(flat["alternatives"]) == 1 and flat["first_fitting_now"] == 1


def test_it_answers_field_errors_per_alternative_index(api: Api, cluster: Cluster) -> None:
    alternatives = [
        {"device_class": GPU, "count": 0},
        {"device_class": GPU, "gpu_model": A100},
        {"device_class": GPU, "gpu_model": "NVIDIA B200"},
        {"device_class": "no-such.example.com"},
    ]
    status, errors = post(api, cluster, alternatives=alternatives, selector="device.(")

    assert status == 400
    assert list(errors["alternatives"]) == ["0", "2", "3"]
    assert list(errors["alternatives"]["0"]) == ["count"]
    assert (
        "No device of this class is a 'NVIDIA B200'" in errors["alternatives"]["2"]["gpu_model"][0]
    )
    assert list(errors["alternatives"]["3"]) == ["device_class"]
    assert errors["selector"][0].startswith("Not a valid CEL expression")

    status, too_many = post(api, cluster, alternatives=[{"device_class": GPU}] * 9)
    assert status == 400 and "At most 8 alternatives" in str(too_many["alternatives"])
    status, missing = post(api, cluster, alternatives=[{"gpu_model": A100}])
    assert status == 400 and "device_class" in missing["alternatives"]["0"]
    status, neither = post(api, cluster)
    assert status == 400 and "device_class" in neither
