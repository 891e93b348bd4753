"""Request ids in responses and log records; JSON log lines in production, text in DEBUG."""

from __future__ import annotations

import json
import logging
import logging.config
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from portal.request_id import HEADER, PortalJsonFormatter, RequestIdFilter, request_id

ROOT = Path(__file__).resolve().parents[2]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(RequestIdFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def collected() -> object:
    handler = Collect()
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


@pytest.mark.django_db
def test_it_makes_up_a_request_id_and_returns_it(client: Client) -> None:
    first = client.get("/accounts/login/")
    second = client.get("/accounts/login/")
    assert re.fullmatch(r"[0-9a-f]{32}", first[HEADER])
    assert first[HEADER] != second[HEADER]


@pytest.mark.django_db
def test_it_keeps_the_request_id_the_caller_sent(client: Client) -> None:
    response = client.get("/accounts/login/", HTTP_X_REQUEST_ID="edge-4f2a:17")
    assert response[HEADER] == "edge-4f2a:17"


@pytest.mark.django_db
def test_it_replaces_a_request_id_that_could_forge_log_lines(client: Client) -> None:
    response = client.get("/accounts/login/", HTTP_X_REQUEST_ID='x" level=ERROR\nfake')
    assert re.fullmatch(r"[0-9a-f]{32}", response[HEADER])


def test_it_puts_the_request_id_on_the_log_records_of_the_request(
    client: Client, alice: User, collected: Collect
) -> None:
    client.force_login(alice)
    response = client.get("/claims/999999/", HTTP_X_REQUEST_ID="req-404-check")
    assert response.status_code == 404
    ids = {getattr(record, "request_id", None) for record in collected.records}
    assert ids == {"req-404-check"}, [r.getMessage() for r in collected.records]


def test_it_writes_one_json_object_per_record_with_the_request_id() -> None:
    formatter = PortalJsonFormatter()
    record = logging.LogRecord(
        "claims.worker.sync", logging.WARNING, __file__, 1, "cluster %s slow", ("a",), None
    )
    token = request_id.set("abc123")
    try:
        RequestIdFilter().filter(record)
    finally:
        request_id.reset(token)
    line = json.loads(formatter.format(record))
    assert line["level"] == "WARNING" and line["logger"] == "claims.worker.sync"
    assert line["message"] == "cluster a slow" and line["request_id"] == "abc123"
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line["time"])


def test_it_marks_records_outside_a_request() -> None:
    record = logging.LogRecord("claims.worker.tasks", logging.INFO, __file__, 1, "tick", (), None)
    RequestIdFilter().filter(record)
    assert record.request_id == "-"


def log_line_of_a_fresh_process(debug: str, log_format: str = "") -> str:
    """What a portal process prints for one warning, with settings from its environment."""
    env = {**os.environ, "DEBUG": debug, "LOG_FORMAT": log_format, "SECRET_KEY": "x" * 50}
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('claims.test').warning('hello %s', 'there')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_it_logs_json_in_production_and_text_in_debug() -> None:
    production = json.loads(log_line_of_a_fresh_process("False"))
    assert production["message"] == "hello there" and production["request_id"] == "-"
    text = log_line_of_a_fresh_process("True")
    assert text.endswith("WARNING claims.test [-] hello there")
    forced = json.loads(log_line_of_a_fresh_process("True", "json"))
    assert forced["logger"] == "claims.test"
