"""Redis lost or flushed: the database is the truth and the queue is rebuilt from it.

Real Redis (this test's own database number only: FLUSHDB, never FLUSHALL) and real workers.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from submissions.models import Submission
from tests.workers.fleet_support import (
    fast_model,
    online_workers,
    running_on,
    slow_classifier,
    start_worker,
    submit,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
_ = start_worker


def statuses(ids: list[int]) -> dict[str, int]:
    found: dict[str, int] = {}
    for status in Submission.objects.filter(pk__in=ids).values_list("status", flat=True):
        found[status] = found.get(status, 0) + 1
    return found


def test_flushing_redis_with_50_queued_then_reconcile_scores_all_50(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100)
    ids = [submit(alice, task, fast_model(i)).pk for i in range(50)]
    assert queue.count == 50

    queue.connection.flushdb()  # Redis lost: every job is gone, the rows still say "queued"
    assert queue.count == 0
    out = StringIO()
    call_command("reconcile", "--no-wait", stdout=out)

    assert "re-enqueued 50 queued" in out.getvalue()
    assert queue.count == 50
    workers = [start_worker("flush-a"), start_worker("flush-b")]
    wait_for("all 50 scored", lambda: statuses(ids) == {"succeeded": 50}, 240, workers)
    rows = Submission.objects.filter(pk__in=ids)
    assert all(r.attempts == 1 and r.score is not None for r in rows)  # none evaluated twice


def test_redis_flushed_under_running_workers_is_repaired_by_the_workers_themselves(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100, time_limit_s=120)
    worker = start_worker("self-heal")
    slow = submit(alice, task, slow_classifier(400_000))
    wait_for("the slow one running", lambda: running_on(slow, "self-heal", queue), 90, [worker])
    waiting = [submit(alice, task, fast_model(i)).pk for i in range(5)]

    queue.connection.flushdb()  # mid-run: the job, the queue and every heartbeat vanish

    ids = [slow.pk, *waiting]
    wait_for("all 6 scored", lambda: statuses(ids) == {"succeeded": 6}, 180, [worker])
    assert Submission.objects.get(pk=slow.pk).attempts == 1  # the running one was left alone
    assert all(r.attempts == 1 for r in Submission.objects.filter(pk__in=waiting))
    assert "self-heal" in online_workers(queue)  # its heartbeat came back by itself
