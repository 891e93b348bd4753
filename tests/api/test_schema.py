"""The OpenAPI schema, Swagger UI, and schemathesis over every operation: no 5xx, no answer
that contradicts the schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.http import FileResponse
from django.test import Client
from hypothesis import HealthCheck, settings
from knox.models import AuthToken
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from claims.domain import services
from claims.models import ClaimRequest, Cluster, Team, VerificationRun
from portal.wsgi import application
from tests.api.conftest import started_run
from tests.fixtures.workloads import BATCH, seeded_profile

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
schema.config.generation.update(max_examples=10, deterministic=True, database="none")
# The coverage phase tries every boundary of every parameter (hundreds of calls per
# operation); the examples and fuzzing phases, bounded above, keep this under a minute.
schema.config.phases.coverage.enabled = False
# What the answers must satisfy. Not checked: that every schema-valid body is accepted (the
# services refuse e.g. a name Kubernetes would refuse) and that every odd query string is
# refused (unknown or repeated query parameters are ignored, as DRF does).
RESPONSE_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def test_it_serves_a_valid_openapi_3_schema(client: Client) -> None:
    response = client.get("/api/schema/?format=json")
    document = response.json()
    assert document["openapi"].startswith("3.")
    assert "/api/v1/claims/{id}/approve/" in document["paths"]


def test_it_describes_list_pages_without_a_count(client: Client) -> None:
    document = client.get("/api/schema/?format=json").json()
    ok = document["paths"]["/api/v1/claims/"]["get"]["responses"]["200"]
    page = ok["content"]["application/json"]["schema"]
    page = document["components"]["schemas"][page["$ref"].rsplit("/", 1)[-1]]
    assert set(page["properties"]) == {"next", "previous", "results"}
    assert page["required"] == ["results"]


def test_it_builds_the_schema_without_warnings(tmp_path: Path) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))


def test_it_documents_every_operation_with_an_example(client: Client) -> None:
    document = client.get("/api/schema/?format=json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            ok = operation["responses"].get("200") or operation["responses"].get("201")
            content = next(iter(ok["content"].values()))
            assert "schema" in content, f"{method} {path}"
            assert "examples" in content, f"response of {method} {path}"
            if method == "post" and "requestBody" in operation:
                body = operation["requestBody"]["content"]["application/json"]
                assert "examples" in body, f"request of {method} {path}"


def test_it_serves_swagger_ui_without_a_cdn(client: Client) -> None:
    page = client.get("/api/docs/").content.decode()
    assert "/api/docs/assets/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower()
    asset = client.get("/api/docs/assets/swagger-ui-bundle.js")
    assert isinstance(asset, FileResponse)
    assert b"SwaggerUIBundle" in b"".join(asset.streaming_content)


@pytest.fixture
def keep_test_connection() -> Iterator[None]:
    """Called through WSGI, Django would close the test's connection after each request;
    the test client prevents it the same way."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def token_of_alice(
    keep_test_connection: None, alice: User, carol: User, cluster: Cluster, settings: Any
) -> str:
    # Give the fuzzer objects to find (ids 1, 2, ...) and no long-poll to sit in.
    started_run(alice, carol, cluster, "fuzz")
    settings.API_LONG_POLL_MAX_SECONDS = 0
    return AuthToken.objects.create(user=alice, expiry=None)[1]


@schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_it_answers_every_operation_without_5xx_or_schema_violations(
    case: schemathesis.Case, token_of_alice: str
) -> None:
    headers = {"Authorization": f"Token {token_of_alice}"}
    case.call_and_validate(headers=headers, checks=RESPONSE_CHECKS)


def real_ids(run: VerificationRun) -> dict[str, int]:
    claim = run.claim
    return {
        "clusters": claim.namespace_request.cluster_id,
        "namespace-requests": claim.namespace_request_id,
        "claims": claim.pk,
        "runs": run.pk,
        "teams": Team.objects.get(members=claim.owner).pk,
        "workload-profiles": seeded_profile(BATCH).pk,
        "workloads": services.workload_start(
            user=claim.owner, claim_request=claim, profile=seeded_profile(BATCH)
        ).pk,
    }


def test_it_matches_the_schema_with_real_objects(
    keep_test_connection: None, alice: User, carol: User, cluster: Cluster, settings: Any
) -> None:
    """Every GET on alice's own objects answers 200 with a body the schema describes."""
    settings.API_LONG_POLL_MAX_SECONDS = 0
    run = started_run(alice, carol, cluster, "real")
    Team.objects.create(name="vision").members.add(alice)
    ids = real_ids(run)
    token = AuthToken.objects.create(user=alice, expiry=None)[1]
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        if operation.method.upper() != "GET":
            continue
        kind = operation.path.split("/")[3]
        parameters = {"id": ids.get(kind, 0), "container": "ctr0"}
        wanted = {p.name for p in operation.path_parameters}
        case = operation.Case(path_parameters={k: parameters[k] for k in wanted}, query={})
        response = case.call(headers={"Authorization": f"Token {token}"})
        assert response.status_code == 200, operation.label
        case.validate_response(response, checks=RESPONSE_CHECKS)


def test_it_answers_options_without_an_error(api: Any, claim: ClaimRequest) -> None:
    response = api("alice").options("/api/v1/claims/")
    assert response.status_code == 200
    assert response.json()["name"]


def test_it_documents_cancelling_a_run(client: Client) -> None:
    paths = client.get("/api/schema/?format=json").json()["paths"]
    cancel = paths["/api/v1/runs/{id}/"]["delete"]
    assert "Cancel a run still going" in cancel["description"]
    assert {"200", "401", "404", "409"} <= set(cancel["responses"])
    example = cancel["responses"]["200"]["content"]["application/json"]["examples"]
    assert example["Cancelled"]["value"]["state_message"] == "Cancelled by alice."
    assert "Pods of its verification runs" in paths["/api/v1/claims/{id}/"]["delete"]["description"]
