"""Pages of the list endpoints: a capped page size, and the schema says what is accepted."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from claims.models import ClaimRequest, NamespaceRequest
from claims.policy.limits import API_MAX_PAGE_SIZE


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
    assert len(response.json()["results"]) == 1


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


def many_claims(namespace: NamespaceRequest, how_many: int) -> None:
    """Half pending (with feasibility to show), half in use with an allocation."""
    ClaimRequest.objects.bulk_create(
        ClaimRequest(
            namespace_request=namespace,
            owner=namespace.owner,
            name=f"c{i:03d}",
            device_class="gpu.nvidia.com",
            count=1,
            state="pending" if i % 2 else "in_use",
            allocation=None if i % 2 else {"node": "n", "devices": [], "reserved_for": []},
        )
        for i in range(how_many)
    )


def test_it_reads_cursor_pages_newest_first_without_a_count(
    api: Any, namespace: NamespaceRequest
) -> None:
    many_claims(namespace, 25)
    client = api("alice")
    first = client.get("/api/v1/claims/?cursor=&page_size=10").json()
    assert "count" not in first
    assert first["previous"] is None
    names = [claim["name"] for claim in first["results"]]
    assert names == [f"c{i:03d}" for i in range(24, 14, -1)]
    seen = names
    page = first
    while page["next"]:
        page = client.get(page["next"]).json()
        seen += [claim["name"] for claim in page["results"]]
    assert sorted(seen) == sorted(f"c{i:03d}" for i in range(25))


def test_it_keeps_the_filters_on_cursor_pages(api: Any, namespace: NamespaceRequest) -> None:
    many_claims(namespace, 9)
    page = api("alice").get("/api/v1/claims/?cursor=&page_size=2&state=pending").json()
    assert "state=pending" in page["next"]
    assert {claim["state"] for claim in page["results"]} == {"pending"}


def test_it_serves_up_to_a_thousand_a_page(api: Any, claim: ClaimRequest) -> None:
    assert API_MAX_PAGE_SIZE == 1000
    response = api("alice").get("/api/v1/claims/?cursor=&page_size=100000")
    assert response.status_code == 200
    assert len(response.json()["results"]) == 1


@pytest.mark.parametrize("cursor", ["nonsense", "cD1hYmM=", "cD05OTk5OTk5OTk5OTk5OTk5OTk5OQ=="])
def test_it_answers_404_for_a_cursor_it_did_not_make(
    api: Any, claim: ClaimRequest, cursor: str
) -> None:
    response = api("alice").get(f"/api/v1/claims/?cursor={cursor}")
    assert response.status_code == 404


def test_it_refuses_an_ordering_on_cursor_pages(api: Any, claim: ClaimRequest) -> None:
    response = api("alice").get("/api/v1/claims/?cursor=&ordering=name")
    assert response.status_code == 400
    assert "ordering" in response.json()


@pytest.mark.parametrize("query", ["", "?cursor="])
def test_it_lists_a_page_of_claims_in_a_few_queries(
    api: Any, namespace: NamespaceRequest, django_assert_max_num_queries: Any, query: str
) -> None:
    many_claims(namespace, 60)
    client = api("carol")
    with django_assert_max_num_queries(8):
        results = client.get(f"/api/v1/claims/{query}").json()["results"]
    assert len(results) == 50
    assert any(claim["feasibility"] for claim in results)


def test_it_walks_numbered_pages_without_repeating_or_losing_a_row(
    api: Any, namespace: NamespaceRequest
) -> None:
    many_claims(namespace, 25)
    client = api("alice")
    page = client.get("/api/v1/claims/?page_size=10&ordering=name").json()
    assert page["previous"] is None and "count" not in page
    seen = [claim["name"] for claim in page["results"]]
    while page["next"]:
        page = client.get(page["next"]).json()
        assert page["previous"] is not None
        seen += [claim["name"] for claim in page["results"]]
    assert seen == [f"c{i:03d}" for i in range(25)]
    assert "page=2" in page["previous"] and "ordering=name" in page["previous"]
    second = client.get(page["previous"]).json()
    assert second["results"][0]["name"] == "c010"


def test_it_links_the_second_page_back_to_the_first_without_a_page_number(
    api: Any, namespace: NamespaceRequest
) -> None:
    many_claims(namespace, 3)
    second = api("alice").get("/api/v1/claims/?page=2&page_size=2&ordering=name").json()
    assert [claim["name"] for claim in second["results"]] == ["c002"]
    assert second["next"] is None
    assert second["previous"] == "http://testserver/api/v1/claims/?ordering=name&page_size=2"


@pytest.mark.parametrize("page", ["0", "-1", "abc", "²", "99999999999", "3", "last"])
def test_it_answers_404_for_a_page_it_does_not_have(
    api: Any, namespace: NamespaceRequest, page: str
) -> None:
    many_claims(namespace, 3)
    response = api("alice").get(f"/api/v1/claims/?page_size=2&page={page}")
    assert response.status_code == 404


def test_it_answers_an_empty_first_page(api: Any, db: None) -> None:
    page = api("alice").get("/api/v1/claims/").json()
    assert page == {"next": None, "previous": None, "results": []}


LISTS = [
    "claims",
    "namespace-requests",
    "runs",
    "events",
    "audit",
    "teams",
    "clusters",
    "approval-rules",
]


@pytest.mark.parametrize("path", [f"/api/v1/{name}/" for name in LISTS])
@pytest.mark.parametrize("query", ["", "?page_size=1", "?cursor="])
def test_it_reads_a_list_page_without_counting_the_list(
    api: Any, namespace: NamespaceRequest, path: str, query: str
) -> None:
    many_claims(namespace, 12)
    client = api("carol")
    if path == "/api/v1/claims/" and query == "?page_size=1":
        query = "?page=3&page_size=5"  # a page further on (OFFSET), still no count
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path + query)
    assert response.status_code == 200
    counted = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counted == []
