"""A work horse killed by rq after its job timeout is a time-limit failure, not a crash to retry.

The watchdog stops runs at the task's limit, but cannot reach onnxruntime while it loads or
optimises a model; rq then kills the horse once the job timeout
(submissions.lifecycle.services.job_timeout_s)
has passed.
The kill itself is what rq's monitor does; these tests hand the worker's hook a real job.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rq.utils import now

from submissions.lifecycle import services
from submissions.models import Submission
from tests.workers.fleet_support import fast_model, submit
from workers.worker import EvaluationWorker

pytestmark = pytest.mark.django_db(transaction=True)
SIGKILLED = 9


def running_job(queue: Any, alice: Any, make_task: Any, *, ran_for_s: float) -> tuple[int, Any]:
    submission = submit(alice, make_task(time_limit_s=5), fast_model())
    assert services.submission_start(submission_id=submission.pk, worker_name="w") is not None
    job = queue.fetch_job(Submission.objects.get(pk=submission.pk).job_id)
    job.started_at = now() - timedelta(seconds=ran_for_s)
    return submission.pk, job


def test_a_horse_killed_after_its_job_timeout_fails_with_the_time_limit_and_no_retry(
    queue: Any, alice: Any, make_task: Any
) -> None:
    timing = 10 + 10  # the tests' timing protocol: lock wait, most time spent timing
    timeout = 3 * 5 + timing + services.JOB_TIMEOUT_MARGIN_S
    submission_id, job = running_job(queue, alice, make_task, ran_for_s=timeout + 60)
    assert job.timeout == timeout
    EvaluationWorker([queue], connection=queue.connection, name="w").handle_work_horse_killed(
        job, 0, SIGKILLED, None
    )
    row = Submission.objects.get(pk=submission_id)
    assert row.status == "failed" and row.attempts == 1
    assert row.error_message.startswith(
        f"Time limit exceeded: the evaluation was still running after {timeout} s"
    )
    assert not row.failed_by_system  # the model's doing: it counts like any failing model


def test_a_horse_killed_early_is_retried_once(queue: Any, alice: Any, make_task: Any) -> None:
    submission_id, job = running_job(queue, alice, make_task, ran_for_s=2)
    EvaluationWorker([queue], connection=queue.connection, name="w").handle_work_horse_killed(
        job, 0, SIGKILLED, None
    )
    assert Submission.objects.get(pk=submission_id).status == "queued"


def test_the_job_timeout_covers_every_phase_of_a_tasks_own_timing_protocol(
    queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=100, timing={"lock_wait_s": 900, "max_time_s": 120})
    submission = submit(alice, task, fast_model())

    job = queue.fetch_job(Submission.objects.get(pk=submission.pk).job_id)

    # Session creation, scoring and giving way (100 s each), the lock wait and the timing, loading
    # and saving: a horse that waits its full 900 s for the device is never killed as an overrun.
    assert job.timeout == 3 * 100 + 900 + 120 + services.JOB_TIMEOUT_MARGIN_S
