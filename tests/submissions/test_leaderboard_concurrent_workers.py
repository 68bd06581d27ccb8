"""Two real workers write results side by side, and the kept leaderboard still equals a rebuild.

A result refreshes only its submitter's entry and adds a chart step in place (no task-wide
lock), so the two workers' transactions overlap; the read models must come out exactly as
``manage.py leaderboard_rebuild`` would write them, on both boards.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from submissions.boards.leaderboard import leaderboard_differences
from submissions.lifecycle.selectors import leaderboard
from submissions.lifecycle.services import submission_succeed
from tests.submissions.test_leaderboard_read_models import (
    assert_in_step,
    boards_refreshed,
    result,
    running,
)
from tests.submissions.test_read_api import scored
from tests.workers.fleet_support import (
    fast_model,
    final,
    online_workers,
    row,
    start_worker,
    submit,
    wait_for,
)

_ = start_worker  # a fixture, used by name
QUICK_TIMING = {"min_time_s": 0, "min_batches": 1, "passes": 1}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("final_selections", [0, 2])
def test_results_from_two_real_workers_leave_the_board_equal_to_a_rebuild(
    start_worker: Any, queue: Any, make_task: Any, final_selections: int
) -> None:
    task = make_task(timing=QUICK_TIMING, final_selections=final_selections)
    users = [get_user_model().objects.create_user(f"racer{i}") for i in range(3)]
    workers = [start_worker("board-a"), start_worker("board-b")]
    wait_for("both workers online", lambda: len(online_workers(queue)) == 2, 60, workers)

    submissions = [submit(user, task, fast_model()) for _ in range(4) for user in users]
    wait_for("all final", lambda: all(final(s) for s in submissions), 180, workers)
    wait_for("the board refreshed", boards_refreshed, 30, workers)

    rows = [row(s) for s in submissions]
    assert [r.status for r in rows] == ["succeeded"] * len(rows), [r.error_message for r in rows]
    assert {r.worker_name for r in rows} == {"board-a", "board-b"}  # both wrote results
    assert leaderboard_differences(task_id=task.pk) == []
    assert_in_step(task)


def _succeed_and_hold(
    submission_id: int, written: threading.Event, release: threading.Event
) -> None:
    """In a thread (its own connection): write a result, then keep its transaction open."""
    try:
        with transaction.atomic():
            submission_succeed(submission_id=submission_id, result=result(0.7))
            written.set()
            release.wait(30)
    finally:
        connection.close()


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite runs one writing transaction at a time"
)
@pytest.mark.django_db(transaction=True)
def test_a_result_does_not_wait_for_another_users_result_still_being_written(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    scored(
        task, operator, 0.95, score_private=0.95
    )  # neither result is a step of the chart (a step waits: rare)
    first, second = running(task, alice), running(task, bob)
    written, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_succeed_and_hold, args=(first.pk, written, release))
    holder.start()
    try:
        assert written.wait(30)
        with transaction.atomic():
            with connection.cursor() as cursor:  # would fail behind a task-wide lock
                cursor.execute("SET LOCAL lock_timeout = '2s'")
            assert submission_succeed(submission_id=second.pk, result=result(0.9))
    finally:
        release.set()
        holder.join(30)
    assert [r.submission.user.username for r in leaderboard(task=task)] == [
        "operator",
        "bob",
        "alice",
    ]
    assert_in_step(task)
