"""The OpenAPI schema and the server agree, mismatch by mismatch (the fuzzer found each one).

tests/portal/test_openapi_fuzz.py sweeps every operation; these name the cases it found, so a
regression reads as a sentence rather than as a fuzzer report.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema() -> dict[str, Any]:
    return APIClient().get("/api/schema/?format=json").json()


def documented(schema: dict[str, Any], method: str, path: str) -> set[str]:
    return set(schema["paths"][path][method]["responses"])


@pytest.mark.parametrize(
    "method, path, codes",
    [
        ("get", "/api/tasks/{slug}/leaderboard/", {"200", "400", "401", "404", "429"}),
        ("get", "/api/workers/", {"200", "400", "401", "429"}),
        ("get", "/api/submissions/", {"200", "400", "401", "429"}),
        ("post", "/api/submissions/", {"201", "400", "401", "429", "503"}),  # 503: busy
        ("get", "/api/tasks/{slug}/quota/", {"200", "401", "404", "429"}),
        ("post", "/api/auth/token/", {"200", "400", "409", "429"}),
        ("delete", "/api/auth/tokens/{id}/", {"204", "401", "404", "429"}),
    ],
)
def test_the_schema_lists_every_status_the_operation_answers(
    schema: dict[str, Any], method: str, path: str, codes: set[str]
) -> None:
    assert documented(schema, method, path) == codes


def test_private_scores_are_optional_in_the_schema_since_they_are_left_out_until_revealed(
    schema: dict[str, Any],
) -> None:
    submission = schema["components"]["schemas"]["Submission"]
    assert {"score_private", "metrics_private"} <= set(submission["properties"])
    assert not {"score_private", "metrics_private"} & set(submission["required"])


def test_the_schema_says_text_fields_take_no_nul_and_the_server_refuses_one(
    schema: dict[str, Any], alice: Any, make_task: Any
) -> None:
    form = schema["components"]["schemas"]["SubmissionCreateRequest"]["properties"]
    assert form["description"]["pattern"] == "^[^\\u0000]*$"
    make_task()
    client = APIClient()
    client.force_authenticate(alice)

    response = client.post(
        "/api/submissions/",
        {"task": "digits", "file": b"", "description": "a\x00b"},
        format="multipart",
    )

    assert response.status_code == 400
    assert "description" in response.json()


@pytest.mark.parametrize(
    "query, field",
    [
        ("board=", "board"),
        ("page=1&page=2", "page"),
        ("page_size=10&page_size=20", "page_size"),
        ("page=null", "page"),
        ("page_size=0", "page_size"),
    ],
)
def test_the_leaderboard_refuses_blank_repeated_and_mistyped_parameters(
    make_task: Any, query: str, field: str
) -> None:
    make_task()
    response = APIClient().get(f"/api/tasks/digits/leaderboard/?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {field}


@pytest.mark.parametrize(
    "query", ["history=", "history=null", "history=1&history=2", "history=-1", "history=2001"]
)
def test_the_workers_api_refuses_a_bad_history(query: str, queue: Any) -> None:
    response = APIClient().get(f"/api/workers/?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {"history"}


@pytest.mark.parametrize(
    "query, field",
    [
        ("offset=null", "offset"),
        ("offset=AAA", "offset"),
        ("offset=1&offset=2", "offset"),
        ("limit=0", "limit"),
        ("limit=", "limit"),
    ],
)
def test_my_submissions_refuse_bad_paging(alice: Any, query: str, field: str) -> None:
    client = APIClient()
    client.force_authenticate(alice)
    response = client.get(f"/api/submissions/?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {field}


def test_unknown_query_parameters_are_ignored(alice: Any, make_task: Any, queue: Any) -> None:
    make_task()
    client = APIClient()
    client.force_authenticate(alice)
    for path in ("/api/tasks/digits/leaderboard/", "/api/workers/", "/api/submissions/"):
        assert client.get(f"{path}?_=123").status_code == 200
