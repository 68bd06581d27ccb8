"""Pollers of the board: the page, the API and the CSV answer 304 while the board is unchanged,
and a new result (or an edit of the task) is seen on the very next request, never a cached
stale board."""

from __future__ import annotations

from typing import Any

import pytest

from submissions.admin.services import task_leaderboard_freeze
from submissions.lifecycle.services import submission_succeed
from tests.submissions.test_leaderboard_read_models import result, running
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

URLS = ["/tasks/digits/", "/api/tasks/digits/leaderboard/", "/tasks/digits/leaderboard.csv"]


@pytest.mark.parametrize("url", URLS)
def test_an_unchanged_board_answers_304_and_a_new_result_changes_it(
    client: Any, make_task: Any, alice: Any, bob: Any, url: str
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"]
    again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304 and again.content == b""

    pending = running(task, alice)
    assert submission_succeed(submission_id=pending.pk, result=result(0.9))
    after = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert after.status_code == 200 and after["ETag"] != first["ETag"]
    assert b"alice" in after.content and b"alice" not in first.content


def test_the_cached_page_follows_an_operators_freeze(
    client: Any, make_task: Any, alice: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.5)
    assert b"data-frozen" not in client.get(URLS[0]).content
    task_leaderboard_freeze(task_ids=[task.pk])
    assert b"data-frozen" in client.get(URLS[0]).content


def test_the_viewers_own_row_is_not_shown_to_another_viewer(
    client: Any, make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    client.force_login(bob)
    mine = client.get(URLS[0]).content.decode()
    client.force_login(alice)
    theirs = client.get(URLS[0]).content.decode()
    assert "chip-you" in mine and "chip-you" not in theirs
