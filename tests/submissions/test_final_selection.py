"""Final-submission selection: participants choose up to the task's limit of finals (API, the
submission page, My submissions), never more even under concurrent requests, never after the
task closes; the private board ranks each participant's finals only, and says so."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from submissions.boards.leaderboard import leaderboard_differences
from submissions.lifecycle.finals import SelectionRefused, submission_select
from submissions.models import Submission
from tests.submissions.admin_support import task_change_data
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def private_rows() -> list[dict[str, Any]]:
    response = APIClient().get("/api/tasks/digits/leaderboard/?board=private")
    assert response.status_code == 200, response.content
    return response.json()["rows"]


@pytest.fixture
def finals_task(make_task: Any) -> Any:
    return make_task(final_selections=2, private_revealed=True)


def test_selecting_up_to_the_limit_through_the_api_and_no_more(
    finals_task: Any, alice: Any
) -> None:
    a, b, c = (scored(finals_task, alice, s, score_private=s) for s in (0.7, 0.8, 0.9))
    assert api(alice).post(f"/api/submissions/{a.pk}/select/").json()["selected"] is True
    assert api(alice).post(f"/api/submissions/{b.pk}/select/").status_code == 200
    refused = api(alice).post(f"/api/submissions/{c.pk}/select/")
    assert refused.status_code == 409
    assert "At most 2 final submissions" in refused.json()["detail"]
    assert api(alice).delete(f"/api/submissions/{a.pk}/select/").json()["selected"] is False
    assert api(alice).post(f"/api/submissions/{c.pk}/select/").status_code == 200
    assert set(Submission.objects.filter(selected=True).values_list("pk", flat=True)) == {
        b.pk,
        c.pk,
    }


def test_a_task_without_a_limit_takes_no_selection(make_task: Any, alice: Any) -> None:
    s = scored(make_task(), alice, 0.9)
    refused = api(alice).post(f"/api/submissions/{s.pk}/select/")
    assert refused.status_code == 409 and "takes no selection of finals" in refused.json()["detail"]


def test_only_a_submission_that_succeeded_can_be_a_final(finals_task: Any, alice: Any) -> None:
    failed = scored(finals_task, alice, 0.9, status="failed")
    refused = api(alice).post(f"/api/submissions/{failed.pk}/select/")
    assert refused.status_code == 409
    assert (
        refused.json()["detail"]
        == f"Only a submission that succeeded can be a final; #{failed.pk} is failed."
    )


def test_someone_elses_submission_is_not_found(finals_task: Any, alice: Any, bob: Any) -> None:
    theirs = scored(finals_task, bob, 0.9)
    assert api(alice).post(f"/api/submissions/{theirs.pk}/select/").status_code == 404
    assert not Submission.objects.get(pk=theirs.pk).selected


def test_finals_no_longer_change_once_the_task_closes(finals_task: Any, alice: Any) -> None:
    kept, other = scored(finals_task, alice, 0.9), scored(finals_task, alice, 0.8)
    submission_select(user=alice, submission_id=kept.pk)
    finals_task.closes_at = timezone.now() - timedelta(minutes=1)
    finals_task.save()
    for method, pk in (("post", other.pk), ("delete", kept.pk)):
        refused = getattr(api(alice), method)(f"/api/submissions/{pk}/select/")
        assert refused.status_code == 409 and "can no longer change" in refused.json()["detail"]
    assert list(Submission.objects.filter(selected=True)) == [kept]


def test_the_private_board_ranks_selected_finals_and_falls_back_to_the_best_public_scores(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task(final_selections=1, private_revealed=True)
    # alice's best public submission is weak on the private rows; her other one is strong.
    public_best = scored(task, alice, 0.9, score_private=0.5)
    private_best = scored(task, alice, 0.6, score_private=0.95)
    scored(task, bob, 0.8, score_private=0.7)
    rows = private_rows()
    assert [(r["user"], r["score"], r["final"]) for r in rows] == [
        ("bob", 0.7, "best by public score"),
        ("alice", 0.5, "best by public score"),
    ]
    assert rows[1]["submission_id"] == public_best.pk
    submission_select(user=alice, submission_id=private_best.pk)
    assert [(r["user"], r["score"], r["final"]) for r in private_rows()] == [
        ("alice", 0.95, "selected"),
        ("bob", 0.7, "best by public score"),
    ]
    board = APIClient().get("/api/tasks/digits/leaderboard/?board=private").json()
    assert "selected final submission only" in board["finals"]
    public = APIClient().get("/api/tasks/digits/leaderboard/").json()
    assert public["finals"] == "" and public["rows"][0]["final"] == ""
    page = Client().get("/tasks/digits/?board=private").content.decode()
    assert "ranks each participant&#x27;s selected final submission only" in page
    assert leaderboard_differences(task_id=task.pk) == []


def test_read_models_equal_a_rebuild_through_selections_and_new_results(
    finals_task: Any, alice: Any, bob: Any
) -> None:
    mine = [scored(finals_task, alice, s, score_private=1 - s) for s in (0.5, 0.6, 0.7)]
    scored(finals_task, bob, 0.65, score_private=0.4)
    assert leaderboard_differences(task_id=finals_task.pk) == []
    submission_select(user=alice, submission_id=mine[0].pk)
    assert leaderboard_differences(task_id=finals_task.pk) == []
    submission_select(user=alice, submission_id=mine[0].pk, selected=False)
    assert leaderboard_differences(task_id=finals_task.pk) == []
    assert [r["score"] for r in private_rows() if r["user"] == "alice"] == [pytest.approx(0.4)]
    # A new best public score pushes her finals' best (public 0.6, private 0.4) out.
    scored(finals_task, alice, 0.95, score_private=0.1)
    assert leaderboard_differences(task_id=finals_task.pk) == []
    assert [r["score"] for r in private_rows() if r["user"] == "alice"] == [pytest.approx(0.3)]


def test_my_submissions_saves_exactly_the_ticked_finals(finals_task: Any, alice: Any) -> None:
    a, b, c = (scored(finals_task, alice, s, score_private=s) for s in (0.7, 0.8, 0.9))
    client = Client()
    client.force_login(alice)
    page = client.get("/submissions/").content.decode()
    assert f'data-final="{a.pk}"' in page and "Selected 0 of 2" in page
    client.post("/tasks/digits/finals/", {"final": [a.pk, b.pk]})
    assert {s.pk for s in Submission.objects.filter(selected=True)} == {a.pk, b.pk}
    answer = client.post("/tasks/digits/finals/", {"final": [a.pk, b.pk, c.pk]}, follow=True)
    assert "At most 2 final submissions" in answer.content.decode()
    assert {s.pk for s in Submission.objects.filter(selected=True)} == {a.pk, b.pk}  # unchanged
    client.post("/tasks/digits/finals/", {"final": [c.pk]})
    assert {s.pk for s in Submission.objects.filter(selected=True)} == {c.pk}
    assert leaderboard_differences(task_id=finals_task.pk) == []


def test_the_submission_page_checkbox_selects_and_unselects(finals_task: Any, alice: Any) -> None:
    s = scored(finals_task, alice, 0.9, score_private=0.9)
    client = Client()
    client.force_login(alice)
    assert "data-final-select" in client.get(s.get_absolute_url()).content.decode()
    page = client.post(f"/submissions/{s.pk}/select/", {"selected": "on"}, follow=True)
    assert f"Submission {s.pk} is now one of your finals." in page.content.decode()
    assert Submission.objects.get(pk=s.pk).selected
    client.post(f"/submissions/{s.pk}/select/", {})
    assert not Submission.objects.get(pk=s.pk).selected


@pytest.mark.django_db(transaction=True)
def test_twenty_parallel_selections_against_a_limit_of_two_select_exactly_two(
    make_task: Any, alice: Any
) -> None:
    """Each thread has its own PostgreSQL connection; the row lock on the participant makes the
    limit hold however the requests interleave."""
    task = make_task(final_selections=2)
    ids = [scored(task, alice, 0.5 + i / 100).pk for i in range(20)]
    start = threading.Barrier(len(ids))
    outcomes: list[str] = []

    def select(pk: int) -> None:
        try:
            start.wait()
            submission_select(user=alice, submission_id=pk)
            outcomes.append("selected")
        except SelectionRefused:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=select, args=(pk,)) for pk in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused"] * 18 + ["selected"] * 2
    assert Submission.objects.filter(selected=True).count() == 2
    assert leaderboard_differences(task_id=task.pk) == []


def test_changing_the_limit_in_the_admin_re_ranks_the_private_board(
    make_task: Any, alice: Any, operator: Any
) -> None:
    task = make_task(private_revealed=True)
    scored(task, alice, 0.9, score_private=0.5)
    scored(task, alice, 0.6, score_private=0.95)
    assert [r["score"] for r in private_rows()] == [0.95]  # no limit: her best private score
    client = Client()
    client.force_login(operator)
    data = task_change_data(client, task.pk, final_selections=1)
    answer = client.post(f"/admin/submissions/task/{task.pk}/change/", data)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert [r["score"] for r in private_rows()] == [0.5]  # her best 1 by public score
    assert leaderboard_differences(task_id=task.pk) == []
