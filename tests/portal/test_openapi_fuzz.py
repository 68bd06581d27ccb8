"""Schemathesis fuzzes every operation of our OpenAPI schema: no input may cause a server error.

Requests go through the real WSGI application (every middleware, authentication, throttles,
the services) against the test database, as alice with an API token and as an anonymous client,
with inputs that fit the schema (positive) and inputs that break it (negative).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from portal.accounts.services import api_token_create
from submissions.models import Submission

EXAMPLES = 15  # per operation and mode
FUZZ = hypothesis_settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # write no example database into the working tree
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def fuzz_world(transactional_db: Any, alice: Any, make_task: Any, settings: Any) -> dict[str, str]:
    """Data the fuzzer can hit (a task, a submission, a token) and limits out of its way.

    transactional_db: the WSGI handler closes the connection after each request, as in
    production, which a test wrapped in one transaction would not survive.
    """
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]  # schemathesis' WSGI host
    settings.RATE_LIMITS = {scope: "1000000/min" for scope in settings.RATE_LIMITS}
    task = make_task(submissions_per_day=1_000_000)
    Submission.objects.create(
        task=task, user=alice, sha256="0" * 64, size_bytes=1, original_name="a.onnx"
    )
    return {"Authorization": f"Token {api_token_create(user=alice, name='fuzz').secret}"}


def fuzz_every_operation(headers: dict[str, str]) -> tuple[list[str], int]:
    """Run every operation in both modes; the failures found and how many operations ran."""
    # The handler is built here, after the test's settings (no HTTPS redirect, generous rates).
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @FUZZ
            def run(case: Any) -> None:
                case.call_and_validate(headers=headers, checks=[not_a_server_error])

            try:
                run()
            except Unsatisfiable:
                continue  # negative mode: nothing in this operation's inputs can be made invalid
            except Exception as exc:  # collect them all: one report for every operation
                failures.append(f"{operation.label} [{mode.value}]: {exc}")
    return failures, operations


def test_no_input_makes_a_server_error_for_a_signed_in_user(fuzz_world: dict[str, str]) -> None:
    failures, operations = fuzz_every_operation(fuzz_world)
    assert operations >= 11
    assert not failures, "\n\n".join(failures)


def test_no_input_makes_a_server_error_for_an_anonymous_client(
    fuzz_world: dict[str, str],
) -> None:
    failures, _ = fuzz_every_operation({})
    assert not failures, "\n\n".join(failures)
