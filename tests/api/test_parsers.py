"""Bodies the API refuses before reading them: too deeply nested JSON (400), too large (413)."""

from __future__ import annotations

from typing import Any

from claims.api.parsers import json_depth
from claims.models import NamespaceRequest
from claims.policy.limits import JSON_MAX_DEPTH

Api = Any


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_it_measures_nesting_without_counting_brackets_in_strings() -> None:
    assert json_depth('{"a": [1, {"b": "[[[{"}]}') == 3
    assert json_depth('"\\"[["') == 0
    assert json_depth("5") == 0


def test_it_answers_a_body_nested_5000_levels_deep_with_a_400(api: Api) -> None:
    response = api("alice").post(
        "/api/v1/namespace-requests/", nested(5000), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"The JSON body nests 5000 levels deep; at most {JSON_MAX_DEPTH} are "
        "accepted (the API's bodies are flat objects)."
    }


def test_it_reads_a_body_nested_within_the_limit(api: Api, namespace: NamespaceRequest) -> None:
    body = '{"reason": ' + nested(JSON_MAX_DEPTH - 1) + "}"
    url = f"/api/v1/namespace-requests/{namespace.pk}/reject/"
    response = api("carol").post(url, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"reason": ["Not a valid string."]}


def test_it_answers_a_body_over_the_size_limit_with_a_413(api: Api, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"name": "team-a", "cluster": 1, "purpose": "' + "x" * 1000 + '"}'
    response = api("alice").post(
        "/api/v1/namespace-requests/", body, content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json()["detail"] == (
        f"The request body has {len(body)} bytes; this portal accepts at most 1000."
    )


def test_it_answers_a_large_form_encoded_body_with_a_413_too(api: Api, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    data = {"name": "team-a", "cluster": "1", "purpose": "x" * 1000}
    response = api("alice").post("/api/v1/namespace-requests/", data, format="multipart")
    assert response.status_code == 413
