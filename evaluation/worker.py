"""The GPU worker: an rq Worker that forks one work horse per evaluation.

Start it with ``manage.py rqworker evaluation --worker-class evaluation.worker.EvaluationWorker``.
The parent process never creates an onnxruntime session (CUDA must not be initialised before a
fork); it only watches horses and turns a horse that died (OOM killer, segfault in an operator)
into a retry or a plain failure on the submission, then serves the next job.
"""

from __future__ import annotations

import logging
from typing import Any

import onnxruntime as ort
from django import db
from rq import Queue
from rq.job import Job
from rq.worker import Worker

from evaluation.device import worker_name
from submissions import services

log = logging.getLogger(__name__)


def submission_id_of(job: Job) -> int | None:
    if job.func_name != "evaluation.jobs.evaluate_submission" or not job.args:
        return None
    return int(job.args[0])


class EvaluationWorker(Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("name"):
            kwargs["name"] = worker_name()
        super().__init__(*args, **kwargs)
        # onnxruntime logs every CUDA fallback at error level; warnings are enough.
        ort.set_default_logger_severity(3)

    def fork_work_horse(self, job: Job, queue: Queue) -> None:
        # The horse must open its own database connections, not share the parent's sockets.
        db.connections.close_all()
        super().fork_work_horse(job, queue)

    def handle_work_horse_killed(self, job: Job, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        submission_id = submission_id_of(job)
        if submission_id is None:
            return
        outcome = services.submission_requeue_after_crash(submission_id=submission_id)
        log.warning(
            "work horse for submission %s died (status %s): %s", submission_id, ret_val, outcome
        )
