"""A new result's board refresh runs after its commit (``leaderboard.leaderboard_drain``): one
process drains a task at a time, no result is left behind when another holds the drain, and a
result whose process died before its refresh is drained by recovery."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from submissions.boards import leaderboard as leaderboard_module
from submissions.boards.cache import board_version
from submissions.boards.leaderboard import (
    _entrant_slot,
    leaderboard_differences,
    leaderboard_drain,
    leaderboard_rebuild,
)
from submissions.lifecycle.selectors import leaderboard, leaderboard_best_over_time
from submissions.lifecycle.services import submission_succeed
from submissions.models.boards import LeaderboardPending
from tests.builders import linear_classifier
from tests.submissions.test_leaderboard_concurrent_workers import QUICK_TIMING
from tests.submissions.test_leaderboard_read_models import assert_in_step, result, running
from tests.submissions.test_read_api import scored
from tests.workers.fleet_support import fast_model, row, submit
from workers import jobs, recovery

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite has no drain lock",
)
DRAIN_SLOT = -3


def _names(task: Any) -> list[str]:
    return [r.submission.user.username for r in leaderboard(task=task)]


@pytest.mark.django_db
def test_a_result_is_refreshed_right_after_its_commit_and_leaves_nothing_pending(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    first, second = running(task, alice), running(task, bob)
    assert submission_succeed(submission_id=first.pk, result=result(0.6))
    assert submission_succeed(submission_id=second.pk, result=result(0.9))
    assert _names(task) == ["bob", "alice"]
    assert not LeaderboardPending.objects.exists()
    assert_in_step(task)


class _Holder:
    """Another process's connection, in a thread: takes a lock, holds it until told to."""

    def __init__(self, sql: str, args: list[int]) -> None:
        self.taken, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(sql, args))

    def _run(self, sql: str, args: list[int]) -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql, args)
                self.taken.set()
                self.release.wait(30)
        finally:
            connection.close()  # a session lock goes with its connection, as when a process dies

    def __enter__(self) -> _Holder:
        self.thread.start()
        assert self.taken.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(30)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_result_whose_process_died_before_its_refresh_is_listed_then_drained_by_recovery(
    make_task: Any, alice: Any, bob: Any, queue: Any
) -> None:
    task = make_task()
    assert submission_succeed(submission_id=running(task, bob).pk, result=result(0.5))
    late = running(task, alice)
    # Another process holds the drain and dies (its connection closes) before it looks again.
    with _Holder("SELECT pg_advisory_lock(%s, %s)", [task.pk, DRAIN_SLOT]):
        assert submission_succeed(submission_id=late.pk, result=result(0.9))
    assert _names(task) == ["bob"]  # the score is alice's to see; the board has not moved yet
    differences = leaderboard_differences(task_id=task.pk)
    assert differences[0].startswith(
        f"{task.slug} result of submission {late.pk}: its board refresh has not run yet"
    )
    assert len(differences) > 1  # and the rows a refresh would write

    LeaderboardPending.objects.update(created_at=timezone.now() - timedelta(seconds=10))
    recovery.reconcile(connection=queue.connection)
    assert _names(task) == ["alice", "bob"]
    assert not LeaderboardPending.objects.exists()
    assert_in_step(task)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_result_that_finds_the_drain_taken_is_refreshed_by_the_process_holding_it(
    make_task: Any, alice: Any, bob: Any
) -> None:
    """The holder looks again after letting go: no result waits for recovery."""
    task = make_task()
    first, second = running(task, alice), running(task, bob)
    covered: list[int] = []

    def first_result() -> None:  # its own connection: another worker
        try:
            covered.append(int(submission_succeed(submission_id=first.pk, result=result(0.6))))
        finally:
            connection.close()

    # Alice's refresh blocks on her entrant's lock (held here), holding the drain meanwhile.
    with _Holder("SELECT pg_advisory_xact_lock(%s, %s)", [task.pk, _entrant_slot(f"u{alice.pk}")]):
        drainer = threading.Thread(target=first_result)
        drainer.start()
        _wait_until(lambda: LeaderboardPending.objects.filter(submission=first).exists())
        _wait_until(_drain_taken(task.pk))
        assert submission_succeed(submission_id=second.pk, result=result(0.9))
        assert LeaderboardPending.objects.filter(submission=second).exists()  # left to alice's
        assert leaderboard_drain(task_id=task.pk) == 0  # the drain is taken: returns at once
    drainer.join(30)
    assert covered == [1]
    assert not LeaderboardPending.objects.exists()
    assert _names(task) == ["bob", "alice"]
    assert_in_step(task)


def _drain_taken(task_id: int) -> Any:
    def taken() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = %s AND objid = %s",
                [task_id, DRAIN_SLOT & 0xFFFFFFFF],
            )
            return bool(cursor.fetchone()[0])

    return taken


def _wait_until(condition: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.django_db
def test_a_rebuild_covers_the_pending_results_and_forgets_them(make_task: Any, alice: Any) -> None:
    task = make_task()
    with transaction.atomic():
        submission = running(task, alice)
        LeaderboardPending.objects.create(task=task, submission=submission)
        submission.status, submission.score, submission.score_private = "succeeded", 0.7, 0.3
        submission.save()
    assert leaderboard_differences(task_id=task.pk) != []
    leaderboard_rebuild(task_id=task.pk)
    assert not LeaderboardPending.objects.exists()
    assert _names(task) == ["alice"]
    assert_in_step(task)
    assert leaderboard_drain(task_id=task.pk) == 0


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_results_is_refreshed_once_by_the_last_job_of_the_queue(
    run_worker: Any, queue: Any, alice: Any, bob: Any, make_task: Any, monkeypatch: Any
) -> None:
    """Each job sees jobs still waiting and leaves its result (none is older than the lag,
    set long here so the test does not depend on the machine's speed); the last job finds the
    queue empty and refreshes all six results at once."""
    monkeypatch.setattr(jobs, "BOARD_LAG_S", 600.0)
    task = make_task(submissions_per_day=100, timing=QUICK_TIMING)
    submissions = [submit(user, task, fast_model()) for _ in range(3) for user in (alice, bob)]
    before = board_version(task_id=task.pk)

    run_worker()  # one job after another, in queue order

    rows = [row(s) for s in submissions]
    assert [r.status for r in rows] == ["succeeded"] * 6, [r.error_message for r in rows]
    assert not LeaderboardPending.objects.exists()
    assert board_version(task_id=task.pk) - before == 2  # one refresh: its write and its commit
    assert_in_step(task)


@pytest.mark.django_db
def test_one_drain_of_several_results_places_each_on_the_chart_by_its_own_time(
    make_task: Any, alice: Any, bob: Any, django_user_model: Any
) -> None:
    """The drain reads the chart's steps once for all its results: a result made between two
    steps is judged against the step before it, not the last one."""
    carol = django_user_model.objects.create_user("carol")
    task = make_task()
    start = timezone.now() - timedelta(hours=3)
    scored(task, alice, 0.5, created_at=start)
    scored(task, bob, 0.8, created_at=start + timedelta(hours=2))
    between = running(task, carol, created_at=start + timedelta(hours=1))
    latest = running(task, alice)
    assert submission_succeed(submission_id=between.pk, result=result(0.6), drain=False)
    assert submission_succeed(submission_id=latest.pk, result=result(0.7), drain=False)
    assert LeaderboardPending.objects.count() == 2

    assert leaderboard_drain(task_id=task.pk) == 2

    steps = [(s.username, s.score) for s in leaderboard_best_over_time(task=task)]
    assert steps == [("alice", 0.5), ("carol", 0.6), ("bob", 0.8)]  # 0.7 came after 0.8
    assert _names(task) == ["bob", "alice", "carol"]
    assert_in_step(task)


@pytest.mark.django_db
def test_a_drain_takes_its_pending_results_in_bounded_batches_until_none_is_left(
    make_task: Any, alice: Any, bob: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(leaderboard_module, "DRAIN_BATCH", 2)
    task = make_task()
    for i, user in enumerate([alice, bob, alice, bob, alice]):
        mine = running(task, user)
        assert submission_succeed(submission_id=mine.pk, result=result(0.5 + i / 10), drain=False)

    with CaptureQueriesContext(connection) as queries:
        assert leaderboard_drain(task_id=task.pk) == 5
    forgotten = [
        q for q in queries.captured_queries if "DELETE FROM" in q["sql"] and "pending" in q["sql"]
    ]
    assert len(forgotten) == 3  # three batches: 2, 2 and 1
    reads = [
        q for q in queries.captured_queries if 'FROM "submissions_leaderboardpending"' in q["sql"]
    ]
    # Each batch's read, and the look after the release; no empty batch after the short one.
    assert len([q for q in reads if q["sql"].startswith("SELECT")]) == 4
    assert not LeaderboardPending.objects.exists()
    assert _names(task) == ["alice", "bob"]
    assert_in_step(task)


@pytest.mark.django_db(transaction=True)
def test_the_queues_last_job_refreshes_the_board_even_when_its_own_model_fails(
    run_worker: Any, queue: Any, alice: Any, make_task: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(jobs, "BOARD_LAG_S", 600.0)  # only the last job refreshes
    task = make_task(timing=QUICK_TIMING)
    good = submit(alice, task, fast_model())
    rng = np.random.default_rng(0)
    bias = np.zeros(10)
    bias[2] = np.nan
    bad = submit(alice, task, linear_classifier(rng.normal(size=(64, 10)), bias))

    run_worker()

    assert row(good).status == "succeeded"
    assert row(bad).status == "failed" and "NaN" in row(bad).error_message
    assert not LeaderboardPending.objects.exists()
    assert _names(task) == ["alice"]
    assert_in_step(task)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_drain_that_does_not_look_again_leaves_a_result_committed_during_it_to_the_next(
    make_task: Any, alice: Any, bob: Any
) -> None:
    """A worker's drain while jobs wait in its queue takes what is pending and stops: it does
    not chase the results other workers commit meanwhile, one refresh each."""
    task = make_task()
    first, second = running(task, alice), running(task, bob)
    assert submission_succeed(submission_id=first.pk, result=result(0.6), drain=False)
    covered: list[int] = []

    def drain() -> None:  # its own connection: another worker
        try:
            covered.append(leaderboard_drain(task_id=task.pk, look_again=False))
        finally:
            connection.close()

    # The drain reads alice's pending result, then blocks on her entrant's lock (held here).
    with _Holder("SELECT pg_advisory_xact_lock(%s, %s)", [task.pk, _entrant_slot(f"u{alice.pk}")]):
        drainer = threading.Thread(target=drain)
        drainer.start()
        _wait_until(_drain_taken(task.pk))
        assert submission_succeed(submission_id=second.pk, result=result(0.9), drain=False)
    drainer.join(30)
    assert covered == [1]
    assert list(LeaderboardPending.objects.values_list("submission_id", flat=True)) == [second.pk]
    assert _names(task) == ["alice"]

    assert leaderboard_drain(task_id=task.pk) == 1  # the next drain covers it
    assert _names(task) == ["bob", "alice"]
    assert_in_step(task)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_queues_last_job_waits_for_a_drain_in_flight_instead_of_leaving_its_result(
    make_task: Any, alice: Any, queue: Any
) -> None:
    """After the queue's last job the worker's refresh waits for another process's drain (which
    may not look again) and then covers its result itself; while jobs wait it does not wait,
    even for a result past the lag."""
    task = make_task()
    mine = running(task, alice)
    assert submission_succeed(submission_id=mine.pk, result=result(0.7), drain=False)
    with _Holder("SELECT pg_advisory_lock(%s, %s)", [task.pk, DRAIN_SLOT]) as holder:
        LeaderboardPending.objects.update(created_at=timezone.now() - timedelta(seconds=10))
        queue.enqueue("builtins.print")  # a job waits: the drain is taken, the refresh goes on
        started = time.monotonic()
        jobs.refresh_boards(queue.connection, queue.name)
        assert time.monotonic() - started < 1.0
        assert LeaderboardPending.objects.filter(submission=mine).exists()

        queue.empty()  # the last job: it waits until the holder lets go of the drain
        letting_go = threading.Timer(0.5, holder.release.set)
        letting_go.start()
        started = time.monotonic()
        jobs.refresh_boards(queue.connection, queue.name)
        assert time.monotonic() - started >= 0.4
    assert not LeaderboardPending.objects.exists()
    assert _names(task) == ["alice"]
    assert_in_step(task)


@pytest.mark.django_db(transaction=True)
def test_a_worker_with_jobs_waiting_looks_for_stale_results_at_most_every_quarter_second(
    make_task: Any, alice: Any, queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a burst the look for results pending past the lag is a query a job: a worker looks
    at most every ``STALE_LOOK_EVERY_S``, and still drains a stale result when it looks."""
    task = make_task()
    mine = running(task, alice)
    assert submission_succeed(submission_id=mine.pk, result=result(0.7), drain=False)
    LeaderboardPending.objects.update(created_at=timezone.now() - timedelta(seconds=10))
    queue.enqueue("builtins.print")  # a job waits
    with CaptureQueriesContext(connection) as first:
        jobs.refresh_boards(queue.connection, queue.name)
    assert first.captured_queries  # it looked, and drained the stale result
    assert not LeaderboardPending.objects.exists()
    assert _names(task) == ["alice"]

    theirs = running(task, alice)
    assert submission_succeed(submission_id=theirs.pk, result=result(0.8), drain=False)
    LeaderboardPending.objects.update(created_at=timezone.now() - timedelta(seconds=10))
    with CaptureQueriesContext(connection) as again:
        jobs.refresh_boards(queue.connection, queue.name)  # at once: no look
    assert again.captured_queries == []
    assert LeaderboardPending.objects.filter(submission=theirs).exists()

    monkeypatch.setattr(jobs, "_stale_looked_at", time.monotonic() - jobs.STALE_LOOK_EVERY_S)
    jobs.refresh_boards(queue.connection, queue.name)  # the interval over: it looks again
    assert not LeaderboardPending.objects.exists()
    assert_in_step(task)
