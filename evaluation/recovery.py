"""Recovery: nothing stays ``queued`` or ``running`` without a process working on it.

Run by every worker on its heartbeat (at most once per ``EVAL_RECOVERY_INTERVAL_S`` across the
fleet, one at a time under a Redis lock) and by ``manage.py reconcile``. The database is the
truth; Redis is checked against it:

- a ``queued`` submission whose job is missing from Redis (Redis lost, flushed, or the job ended
  without starting it), or that never got a job (Redis was down at upload time; given a few
  seconds, since uploads are enqueued just after their commit), is enqueued again. A duplicate
  job is harmless: only one horse can move the submission from queued to running, the other
  finds it "not queued" and does nothing;
- a ``running`` submission that no online worker claims in its heartbeat, continuously for
  ``EVAL_HEARTBEAT_STALE_S``, lost its worker or work horse: it is run once more, and failed with
  a plain message (``failed_by_system``) when that happens again. The wait is measured by
  recovery itself (first seen unclaimed → still unclaimed later), so a Redis that just lost every
  heartbeat is given time for the live workers to publish theirs again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from redis import Redis
from redis.exceptions import LockError
from rq import Queue
from rq.job import Job, JobStatus

from evaluation import heartbeat
from submissions import services
from submissions.models import Submission

Status = Submission.Status
LOCK_KEY = f"{heartbeat.PREFIX}:recovery:lock"
DUE_KEY = f"{heartbeat.PREFIX}:recovery:due"
SUSPECTS_KEY = f"{heartbeat.PREFIX}:recovery:suspects"
UNJOBBED_KEY = f"{heartbeat.PREFIX}:recovery:unjobbed"
UNJOBBED_GRACE_S = 5.0
MAX_ATTEMPTS = 2
LOCK_TIMEOUT_S = 20
WORKER_LOST_MESSAGE = (
    "The worker evaluating this submission stopped responding twice (its machine was restarted "
    "or lost). This is not a problem with your model and does not count against your quota; "
    "you can submit it again, or an operator can re-run it."
)
ALIVE_JOB_STATUSES = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


@dataclass
class ReconcileReport:
    enqueued: list[int] = field(default_factory=list)  # queued, job missing: enqueued again
    retried: list[int] = field(default_factory=list)  # running, worker gone: queued again
    failed: list[int] = field(default_factory=list)  # running, worker gone a second time
    suspects: list[int] = field(default_factory=list)  # running, unclaimed, not long enough yet
    skipped: bool = False  # another process holds the recovery lock

    @property
    def changed(self) -> bool:
        return bool(self.enqueued or self.retried or self.failed)

    def __str__(self) -> str:
        if self.skipped:
            return "skipped: another recovery is running"
        return (
            f"re-enqueued {len(self.enqueued)} queued submission(s) without a job; "
            f"retried {len(self.retried)} and failed {len(self.failed)} running submission(s) "
            f"whose worker is gone; {len(self.suspects)} running submission(s) unclaimed, "
            "waiting to see whether their worker comes back"
        )


def _connection() -> Redis:
    import django_rq

    return django_rq.get_connection(settings.EVALUATION_QUEUE)


def reconcile_if_due(connection: Redis) -> ReconcileReport | None:
    """The periodic run: only the first worker to ask in each interval does the work."""
    interval_ms = max(100, int(settings.EVAL_RECOVERY_INTERVAL_S * 1000))
    if not connection.set(DUE_KEY, "1", nx=True, px=interval_ms):
        return None
    return reconcile(connection=connection, blocking=False)


def reconcile(*, connection: Redis | None = None, blocking: bool = True) -> ReconcileReport:
    connection = connection or _connection()
    # Every transition below is conditional, so two overlapping runs would be safe, only
    # wasteful: the lock is short-lived so that a worker killed while holding it (kill -9 has
    # no finally) delays the next run by seconds, not minutes.
    lock = connection.lock(
        LOCK_KEY, timeout=LOCK_TIMEOUT_S, blocking_timeout=LOCK_TIMEOUT_S + 5 if blocking else None
    )
    if not lock.acquire(blocking=blocking):
        return ReconcileReport(skipped=True)
    try:
        report = ReconcileReport()
        _enqueue_orphaned_queued(connection, report, keep_lock=lock.reacquire)
        _recover_unclaimed_running(connection, report)
        return report
    finally:
        with contextlib.suppress(LockError):  # expired (a long run) or Redis flushed meanwhile
            lock.release()


def _job_alive(job: Job | None, waiting: set[str], claimed: bool) -> bool:
    if job is None:
        return False
    status = job.get_status(refresh=False)
    if status == JobStatus.QUEUED:
        return job.id in waiting  # a job hash can survive the loss of the queue list itself
    if status == JobStatus.STARTED:
        return claimed  # dequeued by a worker that is still alive and says so
    return status in ALIVE_JOB_STATUSES


def _waiting_job_ids(connection: Redis) -> set[str]:
    queue = Queue(settings.EVALUATION_QUEUE, connection=connection)
    with connection.pipeline(transaction=True) as pipe:
        pipe.lrange(queue.key, 0, -1)
        pipe.lrange(queue.intermediate_queue_key, 0, -1)
        listed, moving = pipe.execute()
    return {heartbeat.text(job_id) for job_id in [*listed, *moving]}


def _enqueue_orphaned_queued(
    connection: Redis, report: ReconcileReport, keep_lock: Callable[[], Any]
) -> None:
    queued = list(
        Submission.objects.filter(status=Status.QUEUED)
        .order_by("created_at", "id")
        .values_list("id", "job_id")
    )
    if not queued:
        return
    # The order of these reads matters: a job leaves the queue list for rq's intermediate list
    # (one snapshot of both), is marked started and dropped from the intermediate list in one
    # transaction, and a worker claims its submission in the heartbeat before that. Reading the
    # lists, then the jobs, then the claims cannot miss a live job in between.
    waiting = _waiting_job_ids(connection)
    jobs = Job.fetch_many([job_id or "-" for _, job_id in queued], connection=connection)
    claims = heartbeat.live_claims(connection)
    unjobbed = _unjobbed_long_enough(connection, [i for i, job_id in queued if not job_id])
    for (submission_id, job_id), job in zip(queued, jobs, strict=True):
        if not job_id and submission_id not in unjobbed:
            continue  # probably between its commit and its enqueue: look again next time
        if not _job_alive(job, waiting, submission_id in claims):
            services.submission_enqueue(submission_id=submission_id)
            report.enqueued.append(submission_id)
            if len(report.enqueued) % 200 == 0:  # about 2 s of work: a big rebuild keeps the lock
                keep_lock()


def _unjobbed_long_enough(connection: Redis, ids: list[int]) -> set[int]:
    """Queued submissions seen without any job id for UNJOBBED_GRACE_S, over several runs.

    A new upload or a re-run is committed first and enqueued just after (on commit), so an
    empty job id is normal for a moment; it only means "never enqueued" (Redis was down at
    upload time) when it lasts.
    """
    raw: dict[Any, Any] = connection.hgetall(UNJOBBED_KEY)  # type: ignore[assignment]
    seen = {int(heartbeat.text(k)): float(v) for k, v in raw.items()}
    now = time.time()
    first_seen = {i: seen.get(i, now) for i in ids}
    with connection.pipeline() as pipe:
        pipe.delete(UNJOBBED_KEY)
        if first_seen:
            pipe.hset(UNJOBBED_KEY, mapping=first_seen)  # type: ignore[arg-type]
            pipe.expire(UNJOBBED_KEY, 3600)
        pipe.execute()
    return {i for i, t in first_seen.items() if now - t >= UNJOBBED_GRACE_S}


def _recover_unclaimed_running(connection: Redis, report: ReconcileReport) -> None:
    stale_s = settings.EVAL_HEARTBEAT_STALE_S
    running = Submission.objects.filter(status=Status.RUNNING)
    claims = heartbeat.live_claims(connection)
    raw_seen: dict[Any, Any] = connection.hgetall(SUSPECTS_KEY)  # type: ignore[assignment]
    seen = {heartbeat.text(k): float(v) for k, v in raw_seen.items()}
    now = time.time()
    still_suspect: dict[str, float] = {}
    for submission_id, attempts in running.values_list("id", "attempts"):
        if submission_id in claims:
            continue
        key = f"{submission_id}:{attempts}"
        first_seen = seen.get(key, now)
        if now - first_seen < stale_s:
            still_suspect[key] = first_seen
            report.suspects.append(submission_id)
            continue
        outcome = _retry_or_fail(submission_id=submission_id, attempts=attempts)
        if outcome == "retried":
            report.retried.append(submission_id)
        elif outcome == "failed":
            report.failed.append(submission_id)
    with connection.pipeline() as pipe:
        pipe.delete(SUSPECTS_KEY)
        if still_suspect:
            pipe.hset(SUSPECTS_KEY, mapping=still_suspect)  # type: ignore[arg-type]
            pipe.expire(SUSPECTS_KEY, int(stale_s * 10) + 60)
        pipe.execute()


def _retry_or_fail(*, submission_id: int, attempts: int) -> str:
    """running → queued once more, or → failed; only if nothing moved it since we looked."""
    with transaction.atomic():
        submission = (
            Submission.objects.select_for_update(no_key=True)
            .filter(pk=submission_id, status=Status.RUNNING, attempts=attempts)
            .first()
        )
        if submission is None:
            return "moved-on"
        line = (
            f"\nattempt {attempts}: worker {submission.worker_name or '?'} stopped responding "
            f"(no heartbeat for {settings.EVAL_HEARTBEAT_STALE_S:g} s)"
        )
        if attempts < MAX_ATTEMPTS:
            Submission.objects.filter(pk=submission_id, status=Status.RUNNING).update(
                status=Status.QUEUED, progress=0.0, log=submission.log + line + "; retrying.\n"
            )
            transaction.on_commit(lambda: services.submission_enqueue(submission_id=submission_id))
            return "retried"
        services.submission_fail(
            submission_id=submission_id,
            message=WORKER_LOST_MESSAGE,
            log_text=submission.log + line + "; giving up.\n",
            by_system=True,
        )
        return "failed"
