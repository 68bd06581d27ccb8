"""Reading tasks, submissions and leaderboards through the API."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from submissions.boards.leaderboard import leaderboard_submissions_changed
from submissions.models import Submission

pytestmark = pytest.mark.django_db


def scored(task: Any, user: Any, score: float, **fields: Any) -> Submission:
    values: dict[str, Any] = {"status": "succeeded", "metrics": {"accuracy": score}, **fields}
    submission = Submission.objects.create(
        task=task,
        user=user,
        sha256="0" * 64,
        size_bytes=1,
        original_name="m.onnx",
        score=score,
        **values,
    )
    # Made directly rather than through submission_succeed: update the leaderboard as it does.
    leaderboard_submissions_changed(submission_ids=[submission.pk])
    return submission


def test_task_list_and_detail_show_the_fixed_batch_shape(make_task: Any) -> None:
    make_task()
    tasks = APIClient().get("/api/tasks/").json()
    assert [t["slug"] for t in tasks] == ["digits"]
    detail = APIClient().get("/api/tasks/digits/").json()
    assert detail["batch_shape"] == [16, 1, 8, 8]
    assert detail["metric"] == "accuracy" and detail["higher_is_better"] is True
    assert "dataset" not in detail  # the hidden data is never exposed


def test_hidden_task_is_invisible_to_participants(make_task: Any, alice: Any) -> None:
    make_task(is_hidden=True)
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get("/api/tasks/").json() == []
    assert client.get("/api/tasks/digits/").status_code == 404


def test_submission_list_shows_only_my_own(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task()
    mine = scored(task, alice, 0.5)
    scored(task, bob, 0.9)
    client = APIClient()
    client.force_authenticate(alice)
    listing = client.get("/api/submissions/").json()
    assert [s["id"] for s in listing["results"]] == [mine.id]
    assert client.get(f"/api/submissions/{mine.id}/").status_code == 200


def test_someone_elses_submission_is_404(make_task: Any, alice: Any, bob: Any) -> None:
    theirs = scored(make_task(), bob, 0.9)
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get(f"/api/submissions/{theirs.id}/").status_code == 404


def test_submission_detail_needs_authentication(make_task: Any, alice: Any) -> None:
    mine = scored(make_task(), alice, 0.5)
    assert APIClient().get(f"/api/submissions/{mine.id}/").status_code == 401


def test_leaderboard_api_ranks_best_per_user(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task()
    scored(task, alice, 0.5)
    scored(task, alice, 0.8)
    scored(task, bob, 0.7)
    board = APIClient().get("/api/tasks/digits/leaderboard/").json()
    assert [(r["rank"], r["user"], r["score"], r["entries"]) for r in board["rows"]] == [
        (1, "alice", 0.8, 2),
        (2, "bob", 0.7, 1),
    ]


def test_hidden_leaderboard_is_404_for_participants(make_task: Any, alice: Any) -> None:
    make_task(leaderboard="hidden")
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get("/api/tasks/digits/leaderboard/").status_code == 404


def test_absurd_pagination_is_clamped_not_a_server_error(make_task: Any, alice: Any) -> None:
    # Found by the schema fuzzer: an offset beyond 64 bits made PostgreSQL raise (a 500).
    scored(make_task(), alice, 0.5)
    client = APIClient()
    client.force_authenticate(alice)
    huge = str(10**30)
    response = client.get("/api/submissions/", {"offset": huge, "limit": huge}, secure=True)
    assert response.status_code == 200
    assert response.json()["results"] == []
    board = APIClient().get("/api/tasks/digits/leaderboard/", {"page": huge}, secure=True)
    assert board.status_code == 400
    page = APIClient().get("/tasks/digits/", {"page": huge}, secure=True)
    assert page.status_code == 200
