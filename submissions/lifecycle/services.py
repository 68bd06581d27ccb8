"""Workflows over tasks and submissions: create, enqueue, and the one-way status transitions.

The web form and the API both call ``submission_create``; the evaluation job calls the
``submission_*`` transitions. Every transition is a conditional UPDATE, so a late or repeated
call (a retried job, a cancelled run) changes nothing instead of moving status backwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Concat, Right
from django.utils import timezone
from redis.exceptions import RedisError
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from evaluation.inspect import ModelInfo, ModelRejected, check_file_name
from evaluation.runner import EvalResult
from evaluation.timing import TimingProtocol
from plumbing.refusals import Refused
from queueing.queues import class_queue, enqueue_in_one_round_trip, evaluation_redis
from submissions.boards.leaderboard import (
    leaderboard_drain,
    leaderboard_result_pending,
    leaderboard_submissions_changed,
)
from submissions.challenges.registration import registration_check
from submissions.lifecycle.inspection import upload_inspected
from submissions.lifecycle.quotas import quota_and_duplicate, team_id_of
from submissions.lifecycle.settled import submission_settled
from submissions.lifecycle.turns import RERUN_PRIORITY
from submissions.models import DatasetVersion, Submission, Task, Team
from submissions.notifications.services import notification_record
from submissions.tasks.dataset_cache import cached_copy

log = logging.getLogger(__name__)
Status = Submission.Status
# Seconds the rq job may run beyond the bounds of its phases (job_timeout_s): reading the model
# and the dataset, writing progress and the result.
JOB_TIMEOUT_MARGIN_S = 300
# A worker asked to stop finishes its job first (rq ends it at its timeout), then stops its model
# process and deregisters: it must be given the job timeout plus this (compose's
# stop_grace_period, Kubernetes' grace period).
STOP_MARGIN_S = 60


class SubmissionRefused(Refused):
    """An upload is refused; ``field`` names the form/API field, ``message`` says why."""

    def __init__(self, field: str, message: str, url: str = "") -> None:
        super().__init__(message, field=field, url=url)


def _local_copy(upload: UploadedFile) -> tuple[Path, bool]:
    """A path to the upload on local disk (Django's temporary file when there is one)."""
    temporary_path = getattr(upload, "temporary_file_path", None)
    if temporary_path is not None:
        return Path(temporary_path()), False
    fd, name = tempfile.mkstemp(suffix=".onnx")
    with os.fdopen(fd, "wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return Path(name), True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _check_task_open(task: Task) -> None:
    if not task.is_open():
        if task.opens_at and timezone.now() < task.opens_at:
            raise SubmissionRefused(
                "task", f"This task opens for submissions at {task.opens_at:%Y-%m-%d %H:%M} UTC."
            )
        raise SubmissionRefused("task", "This task is closed for submissions.")


def _check_limits(*, user: Any, task: Task, team_id: int | None, sha256: str) -> None:
    """The duplicate check, the quota and the queued limit, from one read of the entrant's
    submissions. Called with the user's row (and their team's) locked, so parallel uploads are
    counted one after another.

    The same file twice for the same task scores the same twice: the refusal points at the
    first one (cancelled and system-failed submissions aside: their file may be sent again).
    The queued limit: an entrant (a user alone, or a whole team) may have only
    ``task.queued_per_user`` submissions queued or running per task, so nobody fills the queue;
    the operator's re-scores are not the entrant's to wait for."""
    quota, duplicate = quota_and_duplicate(user=user, task=task, team_id=team_id, sha256=sha256)
    if duplicate is not None:
        url = Submission(pk=duplicate).get_absolute_url()
        raise SubmissionRefused(
            "file",
            f"You already submitted this exact file to this task as submission {duplicate} "
            f"({url}).",
            url=url,
        )
    message = quota.refusal()
    if message is not None:
        raise SubmissionRefused("file", message)
    if quota.active >= task.queued_per_user:
        who = "Your team already has" if team_id is not None else "You already have"
        raise SubmissionRefused(
            "file",
            f"{who} {quota.active} submission(s) queued or running for this task, the most "
            f"allowed at once ({task.queued_per_user}). Upload again when one has finished, or "
            "cancel one you no longer need.",
        )


def model_file_name(original: str) -> str:
    """The name a model is stored under: the original's safe characters, never a hidden file.

    Storage keeps only letters, digits, ``-``, ``_`` and ``.``; an emoji-only name would come out
    as ``.onnx``, a hidden file. The original name is kept on the row for display.
    """
    stem = re.sub(r"(?u)[^-\w.]", "", Path(original).stem.strip().replace(" ", "_"))
    return f"{stem.lstrip('.') or 'model'}.onnx"


def submission_create(
    *, user: Any, task: Task, upload: UploadedFile, description: str = ""
) -> Submission:
    """Inspect, store and enqueue one uploaded model, or raise SubmissionRefused saying why."""
    _check_task_open(task)
    registration_check(user=user, task=task)  # a challenge's phase: registered uploaders only
    name = os.path.basename(upload.name or "model.onnx")
    try:
        check_file_name(name)
    except ModelRejected as exc:
        raise SubmissionRefused("file", str(exc)) from exc
    path, remove = _local_copy(upload)
    try:
        try:
            info = upload_inspected(path, task.spec())
        except ModelRejected as exc:
            raise SubmissionRefused("file", str(exc)) from exc
        return _store_and_enqueue(
            user=user, task=task, path=path, name=name, info=info, description=description
        )
    finally:
        if remove:
            path.unlink(missing_ok=True)


def _store_and_enqueue(
    *, user: Any, task: Task, path: Path, name: str, info: ModelInfo, description: str
) -> Submission:
    stored: Submission | None = None
    sha256 = _sha256(path)  # before the lock: hashing a large file must not hold the user's row
    try:
        with transaction.atomic():
            # Serialises this user's uploads. NO KEY UPDATE, not UPDATE: a worker writing a
            # leaderboard row for this user takes KEY SHARE on it (the foreign key) while it
            # holds the task's lock, which this insert needs too; FOR UPDATE would deadlock.
            users = get_user_model().objects.select_for_update(no_key=True).filter(pk=user.pk)
            if not users.values("pk").first():
                raise get_user_model().DoesNotExist(f"user {user.pk} is gone")
            # A member's uploads share the team's quota: lock the team too (after the user, as
            # every membership change does), so parallel uploads by members count one by one.
            # The team is read by a statement of its own, after the lock: one that waited for
            # the lock would read with the snapshot it started with, before a team join that
            # held the user's row had committed (PostgreSQL, READ COMMITTED).
            team_id = team_id_of(user=user, task=task)
            if team_id is not None:
                Team.objects.select_for_update(no_key=True).filter(pk=team_id).first()
                if team_id_of(user=user, task=task) != team_id:  # merged while we waited
                    raise SubmissionRefused("file", "Your team changed; please upload again.")
            _check_limits(user=user, task=task, team_id=team_id, sha256=sha256)
            stored = Submission(
                user=user,
                task=task,
                team_id=team_id,
                sha256=sha256,
                size_bytes=path.stat().st_size,
                original_name=name,
                description=description[:500],
                model_info=info.as_dict(),
                job_id=new_job_id(),  # written with the row: enqueued under it after the commit
            )
            stored.set_static_costs(info.costs)
            with path.open("rb") as f:  # streams in chunks to storage
                stored.model_file.save(model_file_name(name), File(f), save=False)
            stored.save()
        created = stored
    except BaseException:
        if stored is not None and stored.model_file.name:
            stored.model_file.delete(save=False)  # the row is gone: leave no orphan file behind
        raise
    # Outside the try: once the row is committed its file belongs to it, whatever the enqueue does.
    _enqueue_on_commit(created.pk, job=_planned_job(task, created.job_id))
    return created


@dataclass(frozen=True)
class _PlannedJob:
    """The job of a submission whose row already holds its id: enqueued without reading it."""

    job_id: str
    device_class: str
    job_timeout: int


def job_timeout_s(*, time_limit_s: int, timing: TimingProtocol, sessions: int = 1) -> int:
    """The rq timeout of an evaluation: the sum of the bounds of its phases, so that rq only
    ever ends a job that overran one of them. Session creation and scoring are bounded by
    the task's time limit each, and scoring gives way to other workers' timings for at most the
    limit again (evaluation/runner.py, GiveWay); then the wait for the device's timing lock and
    the timing itself (the task's protocol); then the margin for loading and saving. Each
    further timing session (``DeviceClass.timing_sessions``) creates a session and runs one
    batch (the limit each) before its own lock wait and timing. A worker asked to stop skips
    the sessions it has not started (workers/jobs.py), so its grace period need only cover the
    first."""
    timing_s = timing.lock_wait_s + timing.max_time_s
    further_s = (sessions - 1) * (2 * time_limit_s + timing_s)
    return math.ceil(3 * time_limit_s + timing_s + further_s) + JOB_TIMEOUT_MARGIN_S


def _planned_job(task: Task, job_id: str) -> _PlannedJob:
    timeout = job_timeout_s(
        time_limit_s=task.time_limit_s,
        timing=task.timing_protocol(),
        sessions=task.device_class.timing_sessions,
    )
    return _PlannedJob(job_id, task.device_class_slug, timeout)


def new_job_id() -> str:
    """An rq job id chosen before the job exists (rq's own ids are uuid4 strings too)."""
    return str(uuid.uuid4())


def _enqueue_job(*, submission_id: int, job: _PlannedJob) -> None:
    enqueue_in_one_round_trip(
        class_queue(job.device_class),
        "workers.jobs.evaluate_submission",
        submission_id,
        job_id=job.job_id,
        job_timeout=job.job_timeout,
        result_ttl=86400,
        failure_ttl=7 * 86400,
    )


def _enqueue_on_commit(submission_id: int, job: _PlannedJob | None = None) -> None:
    """Enqueue after the commit; with Redis down the row stays queued, whole, for recovery.

    Django lets an on_commit hook's exception propagate after the commit, which would answer
    500 for an upload that was in fact stored; recovery enqueues a queued submission that has no
    job once Redis answers again (workers/recovery.py). ``job``: the row already names its job
    (an upload), which is enqueued as planned; without it the row is read and a job id written.
    """

    def enqueue() -> None:
        try:
            if job is None:
                submission_enqueue(submission_id=submission_id)
            else:
                _enqueue_job(submission_id=submission_id, job=job)
        except RedisError as exc:
            if job is not None:  # no such job: the row says "never enqueued", as recovery reads it
                Submission.objects.filter(pk=submission_id, job_id=job.job_id).update(job_id="")
            log.warning(
                "submission %s stays queued without a job: Redis refused the enqueue (%s); "
                "recovery enqueues it when Redis is back",
                submission_id,
                exc,
            )

    transaction.on_commit(enqueue)


def submission_enqueue(*, submission_id: int) -> None:
    """Put a queued submission on its device class's queue; the job carries only its id.

    Only workers of the task's class listen there, and they choose among the jobs fairly
    (submissions/lifecycle/turns.py), so the order of this queue is not the order of the starts."""
    submission = Submission.objects.select_related("task").get(pk=submission_id)
    if submission.status != Status.QUEUED:
        return
    job = _planned_job(submission.task, new_job_id())
    _enqueue_job(submission_id=submission_id, job=job)
    Submission.objects.filter(pk=submission_id).update(job_id=job.job_id)


# What a job reads with its submission: the task's spec needs the device class (requires_gpu).
JOB_START_RELATED = ("task__current_dataset", "task__device_class")


def submission_start(*, submission_id: int, worker_name: str) -> Submission | None:
    """queued → running, one more attempt. None when the submission is no longer queued
    (cancelled, already taken by a duplicate job, done): only one job can move it."""
    claimed = Submission.objects.filter(pk=submission_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        started_at=timezone.now(),
        worker_name=worker_name,
        progress=0.0,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    submissions = Submission.objects.select_related(*JOB_START_RELATED)
    try:
        return submissions.get(pk=submission_id)
    except Submission.DoesNotExist:  # deleted meanwhile
        return None


def submission_set_progress(*, submission_id: int, progress: float) -> None:
    Submission.objects.filter(pk=submission_id, status=Status.RUNNING).update(
        progress=min(max(progress, 0.0), 1.0)
    )


def submission_succeed(
    *,
    submission_id: int,
    result: EvalResult,
    dataset_version_id: int | None = None,
    drain: bool = True,
) -> bool:
    """running → succeeded with the result, its board refresh owed and its notification
    recorded, in one transaction; a second call changes nothing. ``dataset_version_id``: the
    version the job loaded (None: the task had none), which decides whether the result is on the
    board. The leaderboard's read models follow right after the commit, in a transaction of their
    own (``leaderboard.leaderboard_drain``): the score is the submitter's to see without waiting
    for the board. ``drain=False`` leaves that refresh to the caller (the evaluation worker
    refreshes the boards after each job: ``workers.jobs.refresh_boards``)."""
    values = _success_values(result, dataset_version_id)
    with transaction.atomic():
        if not Submission.objects.filter(pk=submission_id, status=Status.RUNNING).update(**values):
            return False
        task_id, run = Submission.objects.values_list("task_id", "runs").get(pk=submission_id)
        leaderboard_result_pending(task_id=task_id, submission_id=submission_id)
        _became_final(submission_id=submission_id, status=Status.SUCCEEDED, run=run)
    if drain:
        leaderboard_drain(task_id=task_id)
    return True


def _success_values(result: EvalResult, dataset_version_id: int | None) -> dict[str, Any]:
    """The columns a success writes, by field name."""
    return {
        "status": Status.SUCCEEDED,
        "dataset_version_id": dataset_version_id,
        "finished_at": timezone.now(),
        "progress": 1.0,
        "error_message": "",
        "score": result.score,
        "score_private": result.score_private,
        "metrics": result.metrics,
        "metrics_private": result.metrics_private,
        "latency_p50_ms": result.latency_p50_ms,
        "latency_p90_ms": result.latency_p90_ms,
        "latency_p95_ms": result.latency_p95_ms,
        "latency_p99_ms": result.latency_p99_ms,
        "latency_mean_ms": result.latency_mean_ms,
        "latency_spread": result.latency_spread,
        "latency_unstable": result.latency_unstable,
        "latency_sessions": result.latency_sessions,
        "latency_session_spread": result.latency_session_spread,
        "energy_per_sample_j": result.energy_per_sample_j,
        "average_power_w": result.average_power_w,
        "timing_exclusive": result.timing_exclusive,
        "timing": result.timing,
        "throughput": result.throughput,
        "peak_memory_bytes": result.peak_memory_bytes,
        "provider": result.provider,
        "device_name": result.device_name,
        "ort_version": result.ort_version,
        "samples_evaluated": result.samples_evaluated,
        "remeasurement": None,  # a new result's own timing ranks until it is re-measured
        "batch_latencies_ms": result.batch_latencies_ms,
        "run_report": result.run_report,
        **(Submission.static_cost_columns(result.costs) if result.costs is not None else {}),
    }


LOG_LIMIT = 20000  # characters of operator log kept per submission, the newest ones


def _became_final(*, submission_id: int, status: str | None = None, run: int | None = None) -> None:
    """Inside the transaction that made ``submission_id`` final: its notification, and, once
    committed, its waiters woken (``settled``)."""
    # Registered first, so run first after the commit: a waiter is woken before the e-mail's
    # job is enqueued.
    transaction.on_commit(lambda: submission_settled(submission_id=submission_id))
    notification_record(submission_id=submission_id, status=status, run=run)


def submission_fail(
    *,
    submission_id: int,
    message: str,
    log_text: str = "",
    by_system: bool = False,
    run_report: dict[str, Any] | None = None,
) -> bool:
    """queued/running → failed with a message for the submitter; final states are left alone.

    ``log_text`` is appended to the operator log, after the earlier attempts' lines.
    ``by_system`` marks failures that are not the model's fault; they do not count in quotas.
    ``run_report``: what onnxruntime said about the model, for the submitter.
    """
    extra = {"run_report": run_report} if run_report is not None else {}
    with transaction.atomic():
        changed = Submission.objects.filter(
            pk=submission_id, status__in=[Status.QUEUED, Status.RUNNING]
        ).update(
            status=Status.FAILED,
            finished_at=timezone.now(),
            error_message=message,
            log=Right(Concat(F("log"), Value(log_text)), LOG_LIMIT),
            failed_by_system=by_system,
            **extra,
        )
        if changed:
            _became_final(submission_id=submission_id)
    return bool(changed)


@dataclass(frozen=True)
class RetryCause:
    """Why an attempt ended without an outcome, and what a second time costs the submitter."""

    log_line: str  # for the operator log; {worker} and {stale_s} are filled in
    message: str  # for the submitter, when it happened on the last allowed attempt
    by_system: bool  # the final failure is not counted in the quota


MAX_ATTEMPTS = 2
# The model process died while its worker lived: the kernel's OOM killer or a crash inside an
# operator, both caused by this model at this batch shape, so the final failure counts.
HORSE_DIED = RetryCause(
    log_line="the evaluation process died",
    message="The evaluation process was killed twice (out of memory or a crash inside the model's "
    "operators). Check the model's memory use at this task's batch shape.",
    by_system=False,
)
# The whole worker went silent (machine restarted, network lost): nothing points at the model.
WORKER_LOST = RetryCause(
    log_line="worker {worker} stopped responding (no heartbeat for {stale_s:g} s)",
    message="The worker evaluating this submission stopped responding twice (its machine was "
    "restarted or lost). This is not a problem with your model and does not count against your "
    "quota; you can submit it again, or an operator can re-run it.",
    by_system=True,
)

# Redis (the queue) went away while the attempt ran and it ended without a result.
QUEUE_LOST = RetryCause(
    log_line="the job queue (Redis) went away during the evaluation",
    message="The evaluation was interrupted twice by an outage of our job queue. This is not a "
    "problem with your model and does not count against your quota; you can submit it again, "
    "or an operator can re-run it.",
    by_system=True,
)


def submission_retry_or_fail(
    *,
    submission_id: int,
    cause: RetryCause,
    attempts: int | None = None,
    worker_name: str | None = None,
    detail: str = "",
) -> str:
    """The one retry rule: a running submission whose attempt ended without an outcome is run
    again, up to MAX_ATTEMPTS in all, then failed with ``cause``'s message and quota rule.

    ``attempts`` and ``worker_name``, when given, must still match the row: a caller that looked
    earlier leaves alone a submission that moved on (finished, or retried elsewhere) since.
    Answers "retried", "failed" or "moved-on".
    """
    with transaction.atomic():
        rows = Submission.objects.select_for_update(no_key=True).filter(
            pk=submission_id, status=Status.RUNNING
        )
        if attempts is not None:
            rows = rows.filter(attempts=attempts)
        if worker_name is not None:
            rows = rows.filter(worker_name=worker_name)
        submission = rows.first()
        if submission is None:
            return "moved-on"
        what = cause.log_line.format(
            worker=submission.worker_name or "?", stale_s=settings.EVAL_HEARTBEAT_STALE_S
        ) + (f" ({detail})" if detail else "")
        # one line per attempt, on a line of its own whatever the log ended with
        line = ("\n" if submission.log and not submission.log.endswith("\n") else "") + (
            f"attempt {submission.attempts}: {what}"
        )
        if submission.attempts < MAX_ATTEMPTS:
            submission.status = Status.QUEUED
            submission.progress = 0.0
            submission.log = (submission.log + line + "; retrying.\n")[-LOG_LIMIT:]
            submission.save(update_fields=["status", "progress", "log"])
            _enqueue_on_commit(submission_id)
            return "retried"
        submission_fail(
            submission_id=submission_id,
            message=cause.message,
            log_text=line + "; giving up.\n",
            by_system=cause.by_system,
        )
        return "failed"


def task_dataset_path(task: Task) -> Path:
    """The task's current dataset on local disk (its version's file; a task without versions:
    its dataset field as it is now)."""
    version = task.current_dataset
    if version is not None:
        return dataset_version_path(version)
    if not task.dataset.name:
        raise ValueError(f"task {task.slug} has no dataset file")
    storage = task.dataset.storage
    if isinstance(storage, FileSystemStorage):  # already on this disk: read it in place
        return Path(storage.path(task.dataset.name))
    return cached_copy(storage, task.dataset.name, settings.EVAL_CACHE_DIR)


def dataset_version_path(version: DatasetVersion) -> Path:
    """One dataset version's file on local disk, copied once into the worker cache from remote
    storage under the version's sha256, and checked against it
    (submissions/tasks/dataset_cache.py)."""
    name, storage = version.file.name, version.file.storage
    if not name:
        raise ValueError(f"dataset version {version.pk} has no file")
    if isinstance(storage, FileSystemStorage):  # already on this disk: read it in place
        return Path(storage.path(name))
    return cached_copy(storage, name, settings.EVAL_CACHE_DIR, sha256=version.sha256 or None)


def _stop_job(job_id: str) -> None:
    """Best effort: take the job off the queue, or tell its worker to kill the model process.

    With Redis down the cancel stands all the same: a job that runs later finds its submission
    not queued, and a running job cannot write its result over "cancelled".
    """
    if not job_id:
        return
    connection = evaluation_redis()
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return
    except RedisError as exc:
        log.warning("could not stop job %s of a cancelled submission: %s", job_id, exc)
        return
    if job.get_status() == JobStatus.STARTED:
        with contextlib.suppress(InvalidJobOperation):  # it finished between the two calls
            send_stop_job_command(connection, job_id)
    else:
        job.cancel()


def submission_cancel(*, submission_id: int, user: Any) -> bool:
    """queued/running → cancelled, by its owner or staff. Idempotent: False when nothing changed.

    The status changes first, so a job that finishes anyway cannot write its result.
    """
    submissions = Submission.objects.filter(
        pk=submission_id, status__in=[Status.QUEUED, Status.RUNNING]
    )
    if not getattr(user, "is_staff", False):
        submissions = submissions.filter(user=user)
    job_id = submissions.values_list("job_id", flat=True).first()
    with transaction.atomic():
        changed = submissions.update(status=Status.CANCELLED, finished_at=timezone.now())
        if changed:
            _became_final(submission_id=submission_id)
    if changed and job_id is not None:
        transaction.on_commit(lambda: _stop_job(job_id))
    return bool(changed)


RESULT_RESET: dict[str, Any] = dict(
    score=None,
    score_private=None,
    metrics={},
    metrics_private={},
    latency_p50_ms=None,
    latency_p90_ms=None,
    latency_p95_ms=None,
    latency_p99_ms=None,
    latency_mean_ms=None,
    latency_spread=None,
    latency_unstable=False,
    latency_sessions=None,
    latency_session_spread=None,
    energy_per_sample_j=None,
    average_power_w=None,
    remeasurement=None,
    run_report={},
    timing_exclusive=None,
    timing={},
    throughput=None,
    peak_memory_bytes=None,
    failed_by_system=False,
    provider="",
    device_name="",
    ort_version="",
    samples_evaluated=None,
    batch_latencies_ms=[],
)


def submissions_requeue(*, submission_ids: list[int], statuses: list[str], priority: int) -> int:
    """Queue finished submissions again from scratch, their results cleared, at ``priority``
    (submissions/lifecycle/turns.py); enqueued after the commit. The caller refreshes the board.
    Returns
    how many moved. A re-run is the same submission again, so quotas count it as before
    (submissions/lifecycle/quotas.py)."""
    moving = list(
        Submission.objects.select_for_update(no_key=True)
        .filter(pk__in=submission_ids, status__in=statuses)
        .values_list("pk", flat=True)
    )
    Submission.objects.filter(pk__in=moving).update(
        status=Status.QUEUED,
        progress=0.0,
        started_at=None,
        finished_at=None,
        attempts=0,
        runs=F("runs") + 1,  # a new run: its final status is a new notification
        worker_name="",
        error_message="",
        job_id="",
        priority=priority,
        dataset_version=None,
        **RESULT_RESET,
    )
    for submission_id in moving:
        _enqueue_on_commit(submission_id)
    return len(moving)


def submission_rerun(*, submission_id: int) -> bool:
    """An operator re-runs a finished submission from scratch. Idempotent while it is queued."""
    with transaction.atomic():
        changed = submissions_requeue(
            submission_ids=[submission_id],
            statuses=list(Submission.FINAL_STATUSES),
            priority=RERUN_PRIORITY,  # an operator's re-run starts before the users' turns
        )
        if changed:
            leaderboard_submissions_changed(submission_ids=[submission_id])
    return bool(changed)


# What a carried copy takes over from the submission it carries: the model and what inspection
# found; the result is the next phase's own.
CARRIED_FIELDS = (
    "user_id",
    "model_file",
    "sha256",
    "size_bytes",
    "original_name",
    "description",
    "model_info",
    "parameters",
    "flops",
    "macs",
    "activations",
    "costs_not_counted",
)


def submission_carry(*, submission: Submission, task: Task) -> Submission:
    """Queue a copy of ``submission`` on ``task`` (the next phase of its challenge), scored on
    that task's data. It is the operator's doing, like a re-score: queued at the re-score
    priority, behind the participants' uploads, and not counted in any quota
    (``quotas.COUNTED``). The copy counts for the uploader's team on ``task``, if any. Call
    inside the caller's transaction; enqueued after the commit."""
    copy = Submission(
        task=task,
        carried_from=submission,
        priority=Submission.RESCORE_PRIORITY,
        team_id=team_id_of(user=submission.user_id, task=task),
        **{name: getattr(submission, name) for name in CARRIED_FIELDS},
    )
    copy.save()
    _enqueue_on_commit(copy.pk)
    return copy
