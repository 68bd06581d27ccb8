"""Redis down: the task page and its boards, the CSV and the leaderboard API still answer from
PostgreSQL, which holds their data; nothing cached is taken for current (issue 37, item 2)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.submissions.test_read_api import scored
from tests.submissions.test_upload_redis_down import closed_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def board(make_task: Any, alice: Any, bob: Any) -> Any:
    task = make_task()
    scored(task, alice, 0.9, score_private=0.8, metrics_private={"accuracy": 0.8})
    scored(task, bob, 0.7, score_private=0.95, metrics_private={"accuracy": 0.95})
    return task


@pytest.fixture
def redis_down(settings: Any) -> None:
    """The cache and the queues point at a real Redis URL whose port refuses connections."""
    url = f"redis://127.0.0.1:{closed_port()}/0"
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "LOCATION": url},
    }
    settings.RQ_QUEUES = {name: {**queue, "URL": url} for name, queue in settings.RQ_QUEUES.items()}


def test_the_task_page_and_both_boards_answer_while_redis_is_down(
    board: Any, operator: Any, redis_down: None
) -> None:
    page = Client().get("/tasks/digits/")
    assert page.status_code == 200
    text = page.content.decode()
    assert text.index("alice") < text.index("bob")  # ranked by the public score
    client = Client()
    client.force_login(operator)
    private = client.get("/tasks/digits/?board=private")
    assert private.status_code == 200
    shown = private.content.decode()
    assert shown.index("bob") < shown.index("alice")  # ranked by the private score


def test_the_csv_and_the_api_answer_while_redis_is_down(board: Any, redis_down: None) -> None:
    table = Client().get("/tasks/digits/leaderboard.csv")
    assert table.status_code == 200
    rows = list(csv.DictReader(io.StringIO(table.content.decode())))
    assert [r["user"] for r in rows] == ["alice", "bob"]
    api = APIClient().get("/api/tasks/digits/leaderboard/")
    assert api.status_code == 200
    assert [r["user"] for r in api.json()["rows"]] == ["alice", "bob"]


def test_no_etag_matches_while_the_board_version_cannot_be_read(
    board: Any, redis_down: None
) -> None:
    first = APIClient().get("/api/tasks/digits/leaderboard/")
    again = APIClient().get("/api/tasks/digits/leaderboard/", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 200  # never a 304 for a version nobody could read
