"""Workflows over tasks and submissions: create, enqueue, and the one-way status transitions.

The web form and the API both call ``submission_create``; the evaluation job calls the
``submission_*`` transitions. Every transition is a conditional UPDATE, so a late or repeated
call (a retried job, a cancelled run) changes nothing instead of moving status backwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import django_rq
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from evaluation.inspect import ModelRejected, inspect_model
from evaluation.runner import EvalResult
from submissions.dataset_cache import cached_copy
from submissions.leaderboard import leaderboard_submissions_changed
from submissions.models import Submission, Task
from submissions.quotas import quota_get, submissions_counted

log = logging.getLogger(__name__)
Status = Submission.Status
# Seconds the rq job may run beyond the task's own limit: loading, scoring, saving.
JOB_TIMEOUT_MARGIN_S = 300


@dataclass
class SubmissionRefused(Exception):
    """An upload is refused; ``field`` names the form/API field, ``message`` says why."""

    field: str
    message: str
    url: str = ""  # where the refusal points, e.g. the first copy of a duplicate upload

    def __str__(self) -> str:
        return self.message


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


def _check_quota(*, user: Any, task: Task) -> None:
    """Called with the user's row locked, so parallel uploads are counted one after another."""
    message = quota_get(user=user, task=task).refusal()
    if message is not None:
        raise SubmissionRefused("file", message)


def _check_duplicate(*, user: Any, task: Task, sha256: str) -> None:
    """The same file twice for the same task scores the same twice: point at the first one.

    Cancelled and system-failed submissions are ignored: their file may be sent again.
    """
    first = (
        submissions_counted(user=user, task=task)
        .filter(sha256=sha256)
        .order_by("created_at", "id")
        .first()
    )
    if first is not None:
        url = first.get_absolute_url()
        raise SubmissionRefused(
            "file",
            f"You already submitted this exact file to this task as submission {first.pk} ({url}).",
            url=url,
        )


def submission_create(
    *, user: Any, task: Task, upload: UploadedFile, description: str = ""
) -> Submission:
    """Inspect, store and enqueue one uploaded model, or raise SubmissionRefused saying why."""
    _check_task_open(task)
    name = os.path.basename(upload.name or "model.onnx")
    if not name.lower().endswith(".onnx"):
        raise SubmissionRefused("file", "Upload a file with the .onnx extension.")
    path, remove = _local_copy(upload)
    try:
        try:
            info = inspect_model(path, task.spec())
        except ModelRejected as exc:
            raise SubmissionRefused("file", str(exc)) from exc
        return _store_and_enqueue(
            user=user, task=task, path=path, name=name, info=info.as_dict(), description=description
        )
    finally:
        if remove:
            path.unlink(missing_ok=True)


def _store_and_enqueue(
    *, user: Any, task: Task, path: Path, name: str, info: dict[str, Any], description: str
) -> Submission:
    stored: Submission | None = None
    sha256 = _sha256(path)  # before the lock: hashing a large file must not hold the user's row
    try:
        with transaction.atomic():
            # Serialises this user's uploads. NO KEY UPDATE, not UPDATE: a worker writing a
            # leaderboard row for this user takes KEY SHARE on it (the foreign key) while it
            # holds the task's lock, which this insert needs too; FOR UPDATE would deadlock.
            get_user_model().objects.select_for_update(no_key=True).get(pk=user.pk)
            _check_duplicate(user=user, task=task, sha256=sha256)
            _check_quota(user=user, task=task)
            stored = Submission(
                user=user,
                task=task,
                sha256=sha256,
                size_bytes=path.stat().st_size,
                original_name=name,
                description=description[:500],
                model_info=info,
            )
            with path.open("rb") as f:
                stored.model_file.save(name, File(f), save=False)  # streams in chunks to storage
            stored.save()
            submission_id = stored.pk
            transaction.on_commit(lambda: submission_enqueue(submission_id=submission_id))
            return stored
    except BaseException:
        if stored is not None and stored.model_file.name:
            stored.model_file.delete(save=False)  # the row is gone: leave no orphan file behind
        raise


def submission_enqueue(*, submission_id: int) -> None:
    """Put a queued submission on the evaluation queue; the job carries only its id."""
    submission = Submission.objects.select_related("task").get(pk=submission_id)
    if submission.status != Status.QUEUED:
        return
    queue = django_rq.get_queue(settings.EVALUATION_QUEUE)
    job = queue.enqueue(
        "evaluation.jobs.evaluate_submission",
        submission_id,
        job_timeout=submission.task.time_limit_s + JOB_TIMEOUT_MARGIN_S,
        result_ttl=86400,
        failure_ttl=7 * 86400,
    )
    Submission.objects.filter(pk=submission_id).update(job_id=job.id)


def submission_start(*, submission_id: int, worker_name: str) -> Submission | None:
    """queued → running. None when the submission is no longer queued (cancelled, already done)."""
    updated = Submission.objects.filter(pk=submission_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        started_at=timezone.now(),
        worker_name=worker_name,
        progress=0.0,
        attempts=F("attempts") + 1,
    )
    if not updated:
        return None
    return Submission.objects.select_related("task").get(pk=submission_id)


def submission_set_progress(*, submission_id: int, progress: float) -> None:
    Submission.objects.filter(pk=submission_id, status=Status.RUNNING).update(
        progress=min(max(progress, 0.0), 1.0)
    )


def submission_succeed(*, submission_id: int, result: EvalResult) -> bool:
    """running → succeeded with the result, in one UPDATE; a second call changes nothing.
    The leaderboard's read models move in the same transaction."""
    with transaction.atomic():
        changed = Submission.objects.filter(pk=submission_id, status=Status.RUNNING).update(
            status=Status.SUCCEEDED,
            finished_at=timezone.now(),
            progress=1.0,
            error_message="",
            score=result.score,
            score_private=result.score_private,
            metrics=result.metrics,
            metrics_private=result.metrics_private,
            latency_p50_ms=result.latency_p50_ms,
            latency_p95_ms=result.latency_p95_ms,
            latency_p99_ms=result.latency_p99_ms,
            throughput=result.throughput,
            peak_memory_bytes=result.peak_memory_bytes,
            provider=result.provider,
            device_name=result.device_name,
            ort_version=result.ort_version,
            samples_evaluated=result.samples_evaluated,
            batch_latencies_ms=result.batch_latencies_ms,
        )
        if changed:
            leaderboard_submissions_changed(submission_ids=[submission_id])
    return bool(changed)


def submission_fail(
    *, submission_id: int, message: str, log_text: str = "", by_system: bool = False
) -> bool:
    """queued/running → failed with a message for the submitter; final states are left alone.

    ``by_system`` marks failures that are not the model's fault; they do not count in quotas.
    """
    return bool(
        Submission.objects.filter(
            pk=submission_id, status__in=[Status.QUEUED, Status.RUNNING]
        ).update(
            status=Status.FAILED,
            finished_at=timezone.now(),
            error_message=message,
            log=log_text[-20000:],
            failed_by_system=by_system,
        )
    )


def submission_requeue_after_crash(*, submission_id: int, max_attempts: int = 2) -> str:
    """The work horse died mid-run: run it once more, or fail it with a plain message."""
    with transaction.atomic():
        submission = (
            Submission.objects.select_for_update(no_key=True)
            .filter(pk=submission_id, status=Status.RUNNING)
            .first()
        )
        if submission is None:
            return "not-running"
        if submission.attempts < max_attempts:
            submission.status = Status.QUEUED
            submission.progress = 0.0
            submission.log += (
                f"\nattempt {submission.attempts}: the evaluation process died; retrying.\n"
            )
            submission.save(update_fields=["status", "progress", "log"])
            transaction.on_commit(lambda: submission_enqueue(submission_id=submission_id))
            return "requeued"
        submission.status = Status.FAILED
        submission.finished_at = timezone.now()
        submission.error_message = (
            "The evaluation process was killed twice (out of memory or a crash inside the model's "
            "operators). Check the model's memory use at this task's batch shape."
        )
        submission.save(update_fields=["status", "finished_at", "error_message"])
        return "failed"


def task_dataset_path(task: Task) -> Path:
    """The task's dataset on local disk, copied once per version into the worker cache from
    remote storage (see submissions/dataset_cache.py)."""
    if not task.dataset.name:
        raise ValueError(f"task {task.slug} has no dataset file")
    storage = task.dataset.storage
    if isinstance(storage, FileSystemStorage):  # already on this disk: read it in place
        return Path(storage.path(task.dataset.name))
    return cached_copy(storage, task.dataset.name, settings.EVAL_CACHE_DIR)


def _stop_job(job_id: str) -> None:
    """Best effort: take the job off the queue, or tell its worker to kill the work horse."""
    if not job_id:
        return
    connection = django_rq.get_connection(settings.EVALUATION_QUEUE)
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return
    if job.get_status() == JobStatus.STARTED:
        with contextlib.suppress(InvalidJobOperation):  # it finished between the two calls
            send_stop_job_command(connection, job_id)
    else:
        job.cancel()


def submission_cancel(*, submission_id: int, user: Any) -> bool:
    """queued/running → cancelled, by its owner or staff. Idempotent: False when nothing changed.

    The status changes first, so a work horse that finishes anyway cannot write its result.
    """
    submissions = Submission.objects.filter(
        pk=submission_id, status__in=[Status.QUEUED, Status.RUNNING]
    )
    if not getattr(user, "is_staff", False):
        submissions = submissions.filter(user=user)
    job_id = submissions.values_list("job_id", flat=True).first()
    changed = submissions.update(status=Status.CANCELLED, finished_at=timezone.now())
    if changed and job_id is not None:
        transaction.on_commit(lambda: _stop_job(job_id))
    return bool(changed)


RESULT_RESET: dict[str, Any] = dict(
    score=None,
    score_private=None,
    metrics={},
    metrics_private={},
    latency_p50_ms=None,
    latency_p95_ms=None,
    latency_p99_ms=None,
    throughput=None,
    peak_memory_bytes=None,
    failed_by_system=False,
    provider="",
    device_name="",
    ort_version="",
    samples_evaluated=None,
    batch_latencies_ms=[],
)


def submission_rerun(*, submission_id: int) -> bool:
    """An operator re-runs a finished submission from scratch. Idempotent while it is queued."""
    with transaction.atomic():
        changed = Submission.objects.filter(
            pk=submission_id, status__in=list(Submission.FINAL_STATUSES)
        ).update(
            status=Status.QUEUED,
            progress=0.0,
            started_at=None,
            finished_at=None,
            attempts=0,
            worker_name="",
            error_message="",
            job_id="",
            **RESULT_RESET,
        )
        if changed:
            leaderboard_submissions_changed(submission_ids=[submission_id])
            transaction.on_commit(lambda: submission_enqueue(submission_id=submission_id))
    return bool(changed)
