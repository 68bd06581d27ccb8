"""The rq job's timeout (submissions.lifecycle.services.job_timeout_s) bounds an evaluation as a
whole; the task's own limits end it first. Past it, rq raises JobTimeoutException in the
worker, which fails the submission with the time limit (tests/workers/test_time_limits.py)."""

from __future__ import annotations

from typing import Any

import pytest

from submissions.lifecycle import services
from submissions.models import Submission
from tests.workers.fleet_support import fast_model, submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_job_timeout_covers_every_phase_of_a_tasks_own_timing_protocol(
    queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=100, timing={"lock_wait_s": 900, "max_time_s": 120})
    submission = submit(alice, task, fast_model())

    job = queue.fetch_job(Submission.objects.get(pk=submission.pk).job_id)

    # Session creation, scoring and giving way (100 s each), the lock wait and the timing,
    # loading and saving: a job that waits its full 900 s for the device is never cut short.
    assert job.timeout == 3 * 100 + 900 + 120 + services.JOB_TIMEOUT_MARGIN_S


def test_each_further_timing_session_of_the_device_class_adds_its_own_bounds(
    queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=100, timing={"lock_wait_s": 900, "max_time_s": 120})
    task.device_class.timing_sessions = 3
    task.device_class.save()
    submission = submit(alice, task, fast_model())

    job = queue.fetch_job(Submission.objects.get(pk=submission.pk).job_id)

    first = 3 * 100 + 900 + 120
    further = 2 * 100 + 900 + 120  # session creation and one batch, the lock wait, the timing
    assert job.timeout == first + 2 * further + services.JOB_TIMEOUT_MARGIN_S
