"""Recovery: nothing stays ``queued`` or ``running`` without a process working on it.

Run by every worker on its heartbeat (at most once per ``EVAL_RECOVERY_INTERVAL_S`` across the
fleet, one at a time under a Redis lock) and by ``manage.py reconcile``. The database is the
truth; Redis is checked against it:

- a ``queued`` submission whose job is missing from Redis (Redis lost, flushed, or the job ended
  without starting it), or that never got a job (Redis was down at upload time; given a few
  seconds, since uploads are enqueued just after their commit), is enqueued again. A duplicate
  job is harmless: only one job can move the submission from queued to running, the other
  finds it "not queued" and does nothing;
- a ``running`` submission that no online worker claims in its heartbeat, continuously for
  ``EVAL_HEARTBEAT_STALE_S``, lost its worker: ``submission_retry_or_fail`` (the
  one retry rule, in submissions/lifecycle/services.py) runs it once more or fails it. The wait is
  measured
  by recovery itself (first seen unclaimed → still unclaimed later), so a Redis that just lost every
  heartbeat is given time for the live workers to publish theirs again.
- a result whose board refresh is still pending after ``PENDING_STALE_S`` (its process died
  between the result and the refresh) gets it
  (``submissions.boards.leaderboard.leaderboard_drain``).
- a task with ``remeasure_finalists_at_close`` that has closed gets its finalists re-measured
  (the close has no event of its own: this sweep is its hook), and a re-measurement whose job is
  gone (its worker lost, Redis flushed) is resumed (``submissions.boards.finalists``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from redis import Redis
from redis.exceptions import LockError, RedisError
from rq import Queue
from rq.job import Job, JobStatus

from queueing import heartbeat
from queueing.queues import queue_name
from submissions.boards import finalists
from submissions.boards.leaderboard import leaderboard_drain_stale
from submissions.lifecycle import services
from submissions.models import Submission
from submissions.notifications.services import notifications_sweep

log = logging.getLogger(__name__)
Status = Submission.Status
LOCK_KEY = f"{heartbeat.PREFIX}:recovery:lock"
DUE_KEY = f"{heartbeat.PREFIX}:recovery:due"
SUSPECTS_KEY = f"{heartbeat.PREFIX}:recovery:suspects"
UNJOBBED_KEY = f"{heartbeat.PREFIX}:recovery:unjobbed"
UNJOBBED_GRACE_S = 5.0
PENDING_STALE_S = 2.0  # a result's own process refreshes its board within milliseconds
LOCK_TIMEOUT_S = 20
Clock = Callable[[], float]  # seconds since the epoch; tests pass one they can move
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
    from queueing.queues import evaluation_redis

    return evaluation_redis()


def reconcile_if_due(connection: Redis, clock: Clock = time.time) -> ReconcileReport | None:
    """The periodic run: only the first worker to ask in each interval does the work."""
    interval_ms = max(100, int(settings.EVAL_RECOVERY_INTERVAL_S * 1000))
    if not connection.set(DUE_KEY, "1", nx=True, px=interval_ms):
        return None
    return reconcile(connection=connection, blocking=False, clock=clock)


def reconcile(
    *, connection: Redis | None = None, blocking: bool = True, clock: Clock = time.time
) -> ReconcileReport:
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
        _enqueue_orphaned_queued(connection, report, keep_lock=lock.reacquire, now=clock())
        _recover_unclaimed_running(connection, report, now=clock())
        _sweep_notifications()
        _drain_stale_boards()
        _finalists(connection, now=clock())
        return report
    finally:
        with contextlib.suppress(LockError):  # expired (a long run) or Redis flushed meanwhile
            lock.release()


def _sweep_notifications() -> None:
    """Pending notifications (Redis was down when they were recorded) go on their queue again.
    Only enqueued here: the notifier sends them, never an evaluation worker."""
    try:
        swept = notifications_sweep()
    except RedisError as exc:
        log.warning("pending notifications not swept: %s", exc)
        return
    if swept:
        log.info("enqueued %d pending notification(s) again", len(swept))


def _drain_stale_boards() -> None:
    """Board refreshes owed for results whose process died between the result and its refresh
    (``submissions.boards.leaderboard.leaderboard_drain``)."""
    try:
        drained = leaderboard_drain_stale(older_than_s=PENDING_STALE_S)
    except DatabaseError as exc:  # a deadlock or a lost connection: the next run tries again
        log.warning("pending board refreshes not drained: %s", exc)
        return
    for task_id, count in drained.items():
        if count:
            log.info("refreshed the board of task %s for %d pending result(s)", task_id, count)


# A campaign's job is enqueued right after its commit: younger ones are left alone.
FINALISTS_GRACE_S = 5.0


def _finalists(connection: Redis, now: float) -> None:
    """Start the finalists' re-measurement of tasks that closed, and resume campaigns whose job
    is neither waiting nor run by a live worker."""
    try:
        finalists.finalists_remeasure_closed()
        campaigns = finalists.finalist_campaigns_unfinished(older_than_s=FINALISTS_GRACE_S)
        if not campaigns:
            return
        waiting = _waiting_job_ids(connection, sorted({c for _, _, c in campaigns}))
        states = {s.name: s for s in heartbeat.read_states(connection)}
        jobs = Job.fetch_many([job_id or "-" for _, job_id, _ in campaigns], connection=connection)
        for (campaign_id, _, _), job in zip(campaigns, jobs, strict=True):
            if not _campaign_job_alive(job, waiting, states, now):
                log.warning("finalist campaign %s lost its job: resumed", campaign_id)
                finalists.finalist_campaign_resume(campaign_id=campaign_id)
    except (DatabaseError, RedisError) as exc:  # the next run tries again
        log.warning("finalists' re-measurements not looked after: %s", exc)


def _campaign_job_alive(
    job: Job | None, waiting: set[str], states: dict[str, heartbeat.WorkerState], now: float
) -> bool:
    if job is None:
        return False
    status = job.get_status(refresh=False)
    if status == JobStatus.QUEUED:
        return job.id in waiting
    if status == JobStatus.STARTED:
        state = states.get(job.worker_name or "")
        return state is not None and heartbeat.is_online(state, now)
    return status in ALIVE_JOB_STATUSES


def _job_alive(job: Job | None, waiting: set[str], claimed: bool, queue: str) -> bool:
    if job is None:
        return False
    status = job.get_status(refresh=False)
    if status == JobStatus.QUEUED and job.origin != queue:
        return False  # the task moved to another device class: no worker of it will look there
    if status == JobStatus.QUEUED:
        return job.id in waiting  # a job hash can survive the loss of the queue list itself
    if status == JobStatus.STARTED:
        return claimed  # dequeued by a worker that is still alive and says so
    return status in ALIVE_JOB_STATUSES


def _waiting_job_ids(connection: Redis, classes: list[str]) -> set[str]:
    """Job ids in every device class's queue (and rq's intermediate lists), in one snapshot."""
    queues = [Queue(queue_name(c), connection=connection) for c in classes]
    with connection.pipeline(transaction=True) as pipe:
        for queue in queues:
            pipe.lrange(queue.key, 0, -1)
            pipe.lrange(queue.intermediate_queue_key, 0, -1)
        lists = pipe.execute()
    return {heartbeat.text(job_id) for listed in lists for job_id in listed}


def _enqueue_orphaned_queued(
    connection: Redis, report: ReconcileReport, keep_lock: Callable[[], Any], now: float
) -> None:
    rows = list(
        Submission.objects.filter(status=Status.QUEUED)
        .order_by("created_at", "id")
        .values_list("id", "job_id", "task__device_class__slug")
    )
    if not rows:
        return
    queued = [(submission_id, job_id) for submission_id, job_id, _ in rows]
    expected = {submission_id: queue_name(c) for submission_id, _, c in rows}
    # The order of these reads matters: a job leaves the queue list for rq's intermediate list
    # (one snapshot of both), is marked started and dropped from the intermediate list in one
    # transaction, and a worker claims its submission in the heartbeat before that. Reading the
    # lists, then the jobs, then the claims cannot miss a live job in between.
    waiting = _waiting_job_ids(connection, sorted({c for _, _, c in rows}))
    jobs = Job.fetch_many([job_id or "-" for _, job_id in queued], connection=connection)
    claims = heartbeat.live_claims(connection, now)
    unjobbed = _unjobbed_long_enough(connection, [i for i, job_id in queued if not job_id], now)
    for (submission_id, job_id), job in zip(queued, jobs, strict=True):
        if not job_id and submission_id not in unjobbed:
            continue  # probably between its commit and its enqueue: look again next time
        claimed = submission_id in claims
        if not _job_alive(job, waiting, claimed, expected[submission_id]):
            services.submission_enqueue(submission_id=submission_id)
            report.enqueued.append(submission_id)
            if len(report.enqueued) % 200 == 0:  # renewed as it goes: a big rebuild keeps the lock
                keep_lock()


def _unjobbed_long_enough(connection: Redis, ids: list[int], now: float) -> set[int]:
    """Queued submissions seen without any job id for UNJOBBED_GRACE_S, over several runs.

    A new upload or a re-run is committed first and enqueued just after (on commit), so an
    empty job id is normal for a moment; it only means "never enqueued" (Redis was down at
    upload time) when it lasts.
    """
    raw: dict[Any, Any] = connection.hgetall(UNJOBBED_KEY)  # type: ignore[assignment]
    seen = {int(heartbeat.text(k)): float(v) for k, v in raw.items()}
    first_seen = {i: seen.get(i, now) for i in ids}
    with connection.pipeline() as pipe:
        pipe.delete(UNJOBBED_KEY)
        if first_seen:
            pipe.hset(UNJOBBED_KEY, mapping=first_seen)  # type: ignore[arg-type]
            pipe.expire(UNJOBBED_KEY, 3600)
        pipe.execute()
    return {i for i, t in first_seen.items() if now - t >= UNJOBBED_GRACE_S}


def _recover_unclaimed_running(connection: Redis, report: ReconcileReport, now: float) -> None:
    stale_s = settings.EVAL_HEARTBEAT_STALE_S
    running = Submission.objects.filter(status=Status.RUNNING)
    claims = heartbeat.live_claims(connection, now)
    states = {s.name: s for s in heartbeat.read_states(connection)}
    raw_seen: dict[Any, Any] = connection.hgetall(SUSPECTS_KEY)  # type: ignore[assignment]
    seen = {heartbeat.text(k): float(v) for k, v in raw_seen.items()}
    still_suspect: dict[str, float] = {}
    rows = running.values_list("id", "attempts", "worker_name", "started_at")
    for submission_id, attempts, worker, started in rows:
        if submission_id in claims:
            continue
        key = f"{submission_id}:{attempts}"
        first_seen = seen.get(key, now)
        # A worker that provably lost it (stale, stopped, restarted) needs no second wait.
        lost = heartbeat.lost_its_work(
            states.get(worker), started.timestamp() if started else None, now
        )
        if not lost and now - first_seen < stale_s:
            still_suspect[key] = first_seen
            report.suspects.append(submission_id)
            continue
        outcome = services.submission_retry_or_fail(
            submission_id=submission_id, cause=services.WORKER_LOST, attempts=attempts
        )
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
