"""Pages of the list endpoints: a capped page size, and the schema says what is accepted."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from claims.limits import API_MAX_PAGE_SIZE
from claims.models import ClaimRequest


@pytest.mark.parametrize("size", ["0", "-1", "abc", ""])
def test_it_refuses_a_page_size_that_is_not_a_positive_number(
    api: Any, claim: ClaimRequest, size: str
) -> None:
    response = api("alice").get(f"/api/v1/claims/?page_size={size}")
    assert response.status_code == 400
    assert response.json() == {"page_size": ["A whole number, 1 or more."]}


def test_it_caps_the_page_size(api: Any, claim: ClaimRequest) -> None:
    response = api("alice").get("/api/v1/claims/?page_size=100000")
    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_it_documents_what_the_parameters_accept(client: Client) -> None:
    paths = client.get("/api/schema/?format=json").json()["paths"]

    def schema_of(path: str, name: str) -> dict[str, Any]:
        parameters = paths[path]["get"]["parameters"]
        return next(p["schema"] for p in parameters if p["name"] == name)

    assert schema_of("/api/v1/claims/", "page_size")["minimum"] == 1
    assert f"at most {API_MAX_PAGE_SIZE}" in next(
        p["description"]
        for p in paths["/api/v1/claims/"]["get"]["parameters"]
        if p["name"] == "page_size"
    )
    assert schema_of("/api/v1/claims/{id}/", "wait")["minimum"] == 0
    assert schema_of("/api/v1/runs/{id}/logs/{container}/", "since")["minimum"] == 0
    assert schema_of("/api/v1/claims/", "cluster")["type"] == "integer"


@pytest.mark.parametrize(
    "query",
    ["/api/v1/clusters/?simulated=maybe", "/api/v1/claims/?cluster=1.5", "/api/v1/events/?since="],
)
def test_it_refuses_a_filter_value_of_the_wrong_type(
    api: Any, claim: ClaimRequest, query: str
) -> None:
    assert api("alice").get(query).status_code == 400
