"""Redis down: the task page and its boards, the CSV, the leaderboard API, the workers page and
the queue API still answer from PostgreSQL, which holds their data, and nothing cached is taken
for current; the workers API, whose data is in Redis, answers JSON 503 (issue 37, item 2)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from plumbing.refusal_responses import REDIS_UNAVAILABLE
from tests.submissions.test_read_api import scored
from tests.submissions.test_upload_redis_down import closed_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def board(make_task: Any, alice: Any, bob: Any) -> Any:
    task = make_task()
    now = timezone.now()
    scored(task, alice, 0.9, score_private=0.8, metrics_private={"accuracy": 0.8}, finished_at=now)
    scored(task, bob, 0.7, score_private=0.95, metrics_private={"accuracy": 0.95}, finished_at=now)
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


def test_the_workers_page_and_the_queue_api_answer_from_the_database_while_redis_is_down(
    board: Any, alice: Any, redis_down: None
) -> None:
    page = Client().get("/workers/")
    assert page.status_code == 200
    assert "data-worker-status-unavailable" in page.content.decode()
    cards = Client().get("/workers/cards/")
    assert cards.status_code == 200
    stats = APIClient().get("/api/queue/")
    assert stats.status_code == 200
    body = stats.json()
    assert body["worker_status_unavailable"] is True
    assert (body["workers_online"], body["jobs_in_redis"]) == (None, None)
    assert body["succeeded_24h"] == 2  # the database's part: alice's and bob's results
    assert all(c["workers_online"] is None and not c["warning"] for c in body["device_classes"])


def test_the_workers_api_answers_json_503_while_redis_is_down(redis_down: None) -> None:
    response = APIClient().get("/api/workers/")
    assert response.status_code == 503
    assert response.json() == {"detail": REDIS_UNAVAILABLE}
    assert response["Retry-After"].isdigit()


def test_the_queue_api_says_the_workers_are_known_when_redis_is_up(board: Any) -> None:
    body = APIClient().get("/api/queue/").json()
    assert body["worker_status_unavailable"] is False
    assert body["workers_online"] == 0 and body["jobs_in_redis"] == 0
