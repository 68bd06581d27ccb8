"""The OpenAPI schema and the server agree: Schemathesis runs every operation with every check.

Schemathesis' own engine (what ``schemathesis run`` does) runs its examples, coverage and fuzzing
phases against a real HTTP server running the portal on the test database, as alice with an API
token and as an anonymous client. Every default check runs: no server error, only documented
status codes, content types and response bodies that match the schema, requests that break the
schema refused, requests that fit it accepted, and authentication not ignored. A fixed seed and
derandomized generation make each run the same run; a bounded example count keeps it near a
minute of CI.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from schemathesis.engine import Status, events, from_schema

from accounts.services import api_token_create
from submissions.models import Submission

SEED = 20_261_123
EXAMPLES = 12  # per operation and phase

# Checks whose inputs the schema cannot describe. Schema-valid credentials that are wrong get
# 400, and a schema-valid upload that is not an ONNX model for an open task gets 400 with the
# reason; the fuzzer cannot make up a real password or a real model.
SEMANTIC_REFUSALS = [
    {
        "include-path": path,
        "include-method": "POST",
        "checks": {
            "positive_data_acceptance": {"expected-statuses": ["2xx", 400, 401, 403, 404, 409, 429]}
        },
    }
    for path in ("/api/auth/token/", "/api/submissions/")
] + [
    # A fact sheet's links must be real http(s) URLs (Django's URL validator); the schema's
    # "uri" format admits more ("a:b"), so a schema-valid link may get 400 with the reason.
    {
        "include-path": "/api/tasks/{slug}/fact-sheet/",
        "include-method": "PUT",
        "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", 400, 401, 404]}},
    }
]


@pytest.fixture
def fuzz_world(live_portal: str, alice: Any, make_task: Any, settings: Any, queue: Any) -> Any:
    """Data the fuzzer can hit (a task, a submission) and limits out of its way; alice signs in."""
    settings.RATE_LIMITS = {scope: "1000000/min" for scope in settings.RATE_LIMITS}
    # The token endpoint hashes every password it is sent; a slow hasher is the whole run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    task = make_task(submissions_per_day=1_000_000)
    Submission.objects.create(
        task=task, user=alice, sha256="0" * 64, size_bytes=1, original_name="a.onnx"
    )
    return alice


def sign_in(schema: Any, user: Any) -> None:
    """Every request carries a token of ``user``'s; a new one after the fuzzer has revoked it
    (DELETE /api/auth/tokens/{id}/ with an id it read from GET /api/auth/tokens/)."""

    @schema.auth()
    class FreshToken:
        def get(self, case: Any, ctx: Any) -> str:
            return api_token_create(user=user, name="fuzz").secret

        def set(self, case: Any, data: str, ctx: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Token {data}"}


def fuzz(base_url: str, user: Any = None) -> tuple[list[str], dict[str, set[int]]]:
    """Run every phase over every operation: the failures found, and each operation's answers."""
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": EXAMPLES, "deterministic": True, "database": "none"},
            "operations": SEMANTIC_REFUSALS,
        }
    )
    schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json", config=config)
    if user is not None:
        sign_in(schema, user)
    failures: list[str] = []
    answers: dict[str, set[int]] = {}
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            statuses = answers.setdefault(event.recorder.label, set())
            for interaction in event.recorder.interactions.values():
                if interaction.response is not None:
                    statuses.add(interaction.response.status_code)
            for case_id, checks in event.recorder.checks.items():
                request = event.recorder.interactions[case_id].request
                failures.extend(
                    f"{event.recorder.label} [{check.name}] {request.method} {request.uri}\n"
                    f"  {check.failure_info.failure.title}: {check.failure_info.failure.message}"
                    for check in checks
                    if check.status == Status.FAILURE and check.failure_info is not None
                )
        elif isinstance(event, events.NonFatalError | events.FatalError):
            failures.append(f"{getattr(event, 'label', '?')}: {event.info.format()}")
    return failures, answers


def every_operation(base_url: str) -> set[str]:
    schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json")
    return {result.ok().label for result in schema.get_all_operations()}


def test_the_schema_and_the_server_agree_for_a_signed_in_user(
    fuzz_world: Any, live_portal: str
) -> None:
    failures, answers = fuzz(live_portal, user=fuzz_world)

    assert not failures, "\n\n".join(sorted(set(failures)))
    assert every_operation(live_portal) <= answers.keys() and len(answers) >= 12
    assert 200 in answers["GET /api/auth/tokens/"]  # signed in, not refused all along


def test_the_schema_and_the_server_agree_for_an_anonymous_client(
    fuzz_world: Any, live_portal: str
) -> None:
    failures, answers = fuzz(live_portal)

    assert not failures, "\n\n".join(sorted(set(failures)))
    assert every_operation(live_portal) <= answers.keys()
    assert 200 not in answers["GET /api/auth/tokens/"]
