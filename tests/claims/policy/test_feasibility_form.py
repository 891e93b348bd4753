"""The claim form's feasibility and errors (issue 20): one statement per claim, each problem
once and next to its field, in words a person can act on. kubesim's default cluster has 2
nodes with 4 H100 each."""

from __future__ import annotations

import html
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from claims.domain import services
from claims.models import Cluster, NamespaceRequest
from claims.policy import feasibility
from tests.claims.web.test_views_requests import field_errors

CLASS = "gpu.nvidia.com"
BROKEN = "device.driver =="
NOTHING_THAT_BIG = "200Gi"


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(
        user=alice, cluster=cluster, name=f"form-{uuid.uuid4().hex[:6]}"
    )


@pytest.fixture
def web(alice: User) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def post(web: Client, view: str, namespace: NamespaceRequest, **fields: Any) -> str:
    data = {
        "namespace_request": namespace.pk,
        "name": "train",
        "device_class": CLASS,
        "count": 1,
        "selector": "",
        "submission_token": uuid.uuid4().hex,
    }
    return html.unescape(web.post(reverse(view), data | fields).content.decode())


def preview(web: Client, namespace: NamespaceRequest, **fields: Any) -> str:
    return post(web, "claim-preview", namespace, **fields)


def submit(web: Client, namespace: NamespaceRequest, **fields: Any) -> str:
    return post(web, "claim-request", namespace, **fields)


def statement(content: str) -> str:
    found = re.search(r'id="feasibility-line"[^>]*>(.*?)</p>', content, re.S)
    assert found, "no feasibility statement"
    return found.group(1)


def check(content: str, field: str) -> str:
    found = re.search(rf'<div id="{field}-check"[^>]*>(.*?)</div>', content, re.S)
    assert found, f"no live check of {field}"
    return found.group(1)


def test_it_states_a_claims_feasibility_once(web: Client, namespace: NamespaceRequest) -> None:
    for content in (preview(web, namespace), submit(web, namespace, name="Not A Name")):
        assert content.count('id="feasibility-line"') == 1
        assert 'id="claim-feasibility"' not in content
        assert "devices match" not in content  # the second, different line
        assert statement(content).startswith(
            "Can be satisfied: up to 4 devices of class gpu.nvidia.com on one node. "
            "Free now: 4 on gpu-node-"
        )


def test_it_flags_a_count_of_0_on_the_count_field_never_as_satisfiable(
    web: Client, namespace: NamespaceRequest
) -> None:
    previewed = preview(web, namespace, count=0)
    submitted = submit(web, namespace, count=0)

    assert "Can be satisfied" not in previewed + submitted
    assert statement(previewed).startswith("Cannot be satisfied with this count")
    assert check(previewed, "count") == (
        '<ul class="errorlist" id="id_count_error"><li>Ask for at least 1 device.</li></ul>'
    )
    assert "Ask for at least 1 device." in field_errors(submitted, "count")
    assert submitted.count("Ask for at least 1 device.") == 1


def test_it_never_reads_a_selector_that_does_not_compile_as_satisfiable(
    web: Client, namespace: NamespaceRequest, cluster: Cluster
) -> None:
    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=1, selector=BROKEN)
    previewed = preview(web, namespace, selector=BROKEN)
    submitted = submit(web, namespace, selector=BROKEN)

    assert not found.possible and not found.selector_valid
    assert "Can be satisfied" not in previewed + submitted
    assert statement(previewed) == (
        "Cannot be satisfied: the selector is not valid CEL, so no device can match it."
    )
    assert "Not a valid CEL expression at line 1, column 17" in check(previewed, "selector")
    assert "Not a valid CEL expression at line 1, column 17" in field_errors(submitted, "selector")
    assert check(previewed, "count") == ""  # nothing wrong with the count


def test_it_says_a_count_too_big_for_one_node_once(
    web: Client, namespace: NamespaceRequest
) -> None:
    refusal = (
        "At most 4 devices of class gpu.nvidia.com sit on one node; "
        "this cluster cannot give 5 to one claim."
    )
    for content in (preview(web, namespace, count=5), submit(web, namespace, count=5)):
        assert content.count("cannot give 5") == 1
        assert refusal in check(content, "count")
        assert statement(content).startswith(
            "Cannot be satisfied with this count: up to 4 devices of class gpu.nvidia.com "
            "on one node."
        )


def test_it_says_plainly_that_no_device_matches(
    web: Client, namespace: NamespaceRequest, cluster: Cluster
) -> None:
    previewed = preview(web, namespace, min_memory=NOTHING_THAT_BIG)
    submitted = submit(web, namespace, min_memory=NOTHING_THAT_BIG)
    selector = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=1, selector=selector)

    assert statement(previewed) == (
        "Cannot be satisfied: no device of class gpu.nvidia.com matches the model, memory, "
        "MIG profile or selector."
    )
    assert "at most 0" not in (previewed + submitted).lower()
    assert check(previewed, "count") == check(submitted, "count") == ""
    assert "No device in the cluster matches" in field_errors(submitted, "min_memory")
    assert found.line() == (
        "No device of class gpu.nvidia.com matches the model, memory, MIG profile or selector"
    )
    assert found.count_problem() is None


def test_it_points_at_the_cel_as_typed_next_to_the_picks(
    web: Client, namespace: NamespaceRequest
) -> None:
    previewed = preview(web, namespace, min_memory="40Gi", selector=BROKEN)
    submitted = submit(web, namespace, min_memory="40Gi", selector=BROKEN)

    for shown in (check(previewed, "selector"), field_errors(submitted, "selector")):
        assert "Not a valid CEL expression at line 1, column 17: it ends too soon" in shown
        assert "expecting" not in shown and "mismatched input" not in shown


def test_it_wraps_long_error_text_inside_the_red_box() -> None:
    css = Path(settings.BASE_DIR, "static", "css", "portal.css").read_text()
    rules = re.findall(r"([^{}]+)\{([^}]*)\}", css)
    wrapped = [
        selectors
        for selectors, body in rules
        if "overflow-wrap: anywhere" in body.replace("  ", " ")
    ]
    assert any(".form-errors" in selectors for selectors in wrapped)
    assert any("ul.errorlist li" in selectors for selectors in wrapped)
