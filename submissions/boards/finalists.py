"""Finalists re-measured: a task's top entries timed again over more sessions, on one device class,
by one worker, one finalist after the other.

The finalists are the union of the top N ranked entries of each of the task's boards (public and
private, its main board and every track). One campaign (``FinalistCampaign``) is one rq job
(``workers.finalists.remeasure_finalists``) on the chosen device class's queue: a single job
times every finalist in turn, so they are timed sequentially on the same kind of device, never
by several workers at once, and a second campaign of the same task is refused while one runs.

Timing only: a finalist's scores do not change and it stays on its boards while it is timed.
Once measured on the task's device class, its re-measurement is what ranks
(``Submission.remeasurement``, read by ``ranking_models.submission_measures``): latency budgets,
latency and energy rankings and a composite's latency term use the re-measured median, and the
board's latency column shows it with its spread and when it was taken. A re-measurement on
another class is kept and reported, but ranks nothing (latency counts on the task's class only).

Starts: the Task admin's "Re-measure finalists" action and page, ``manage.py
remeasure_finalists``, and, for a task with ``remeasure_finalists_at_close``, the workers'
periodic recovery once the task has closed (``finalists_remeasure_closed``). Recovery also
resumes a campaign whose job is gone (``finalist_campaign_resume``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from evaluation.timing import Timing
from queueing.queues import class_queue
from submissions.boards.leaderboard import leaderboard_submissions_changed
from submissions.lifecycle.selectors import BOARDS
from submissions.lifecycle.services import job_timeout_s, new_job_id
from submissions.models import DeviceClass, LeaderboardEntry, Submission, Task
from submissions.models.finalists import FinalistCampaign, FinalistMeasurement
from submissions.models.ranking import submission_measures

log = logging.getLogger(__name__)
JOB = "workers.finalists.remeasure_finalists"
WAITING = (FinalistMeasurement.Status.QUEUED, FinalistMeasurement.Status.RUNNING)


class FinalistsRefused(ValueError):
    """Why a re-measurement cannot start, worded for the operator."""


def board_key(board: str, track_slug: str | None) -> str:
    """How a campaign's ranks name a board: "public", "private", "public/<track slug>"."""
    return f"{board}/{track_slug}" if track_slug else board


def finalist_ranks(*, task: Task) -> dict[str, dict[str, int]]:
    """The ranks of the ranked entries of every board of the task, by board key, then by
    submission id (a string: the campaign keeps them as JSON). One query."""
    entries = (
        LeaderboardEntry.objects.filter(task=task, unranked=False)
        .order_by("board", "track__position", "track_id", "rank_key", "created_at", "submission_id")
        .values_list("board", "track__slug", "submission_id")
    )
    ranks: dict[str, dict[str, int]] = {}
    for board, slug, submission_id in entries:
        on_board = ranks.setdefault(board_key(board, slug), {})
        on_board[str(submission_id)] = len(on_board) + 1
    return ranks


def finalists_of(ranks: dict[str, dict[str, int]], top: int) -> list[int]:
    """The union of each board's top ``top``, best rank anywhere first (then by id)."""
    best: dict[int, int] = {}
    for on_board in ranks.values():
        for submission_id, rank in on_board.items():
            if rank <= top:
                best[int(submission_id)] = min(rank, best.get(int(submission_id), rank))
    return sorted(best, key=lambda pk: (best[pk], pk))


def _job_timeout(task: Task, sessions: int, finalists: int) -> int:
    """The sum of each finalist's bounds (its model's session creation and one batch per session,
    each session's lock wait and timing), as an evaluation's timeout counts them."""
    each = job_timeout_s(
        time_limit_s=task.time_limit_s, timing=task.timing_protocol(), sessions=sessions
    )
    return max(1, finalists) * each


def _enqueue(campaign: FinalistCampaign, finalists: int) -> None:
    """Ahead of the queue's evaluations (``at_front``): the finalists wait for nobody's turn. With
    Redis down the campaign stays as it is; recovery enqueues it again."""
    try:
        class_queue(campaign.device_class_id).enqueue(
            JOB,
            campaign.pk,
            job_id=campaign.job_id,
            job_timeout=_job_timeout(campaign.task, campaign.sessions, finalists),
            at_front=True,
            result_ttl=86400,
            failure_ttl=7 * 86400,
        )
    except RedisError as exc:
        log.warning("finalist campaign %s not enqueued (%s); recovery will", campaign.pk, exc)


def _ranked_timing(s: Submission) -> tuple[float | None, float | None, int | None]:
    """The p50 an entry ranks on now, its between-session spread and its number of sessions."""
    again = s.remeasurement
    if again is not None:
        return again.latency_p50_ms, again.session_spread, again.sessions
    p50 = submission_measures(s, "public").latencies_ms.get("p50")
    return p50, s.latency_session_spread, s.latency_sessions


def finalists_remeasure(
    *,
    task_id: int,
    top: int | None = None,
    sessions: int | None = None,
    device_class: str | None = None,
    trigger: str = FinalistCampaign.Trigger.ADMIN,
    user: Any = None,
) -> FinalistCampaign:
    """Start re-measuring the task's finalists (the task's own settings where not given); the
    job is enqueued when the campaign commits. Raises ``FinalistsRefused`` with the reason when
    another campaign of the task is unfinished, or no board has a ranked entry."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
        unfinished = task.finalist_campaigns.filter(finished_at__isnull=True).first()
        if unfinished is not None:
            raise FinalistsRefused(
                f"The finalists of {task.slug} are being re-measured already (campaign "
                f"{unfinished.pk}, started {unfinished.created_at:%Y-%m-%d %H:%M} UTC)."
            )
        classes = DeviceClass.objects.filter(slug=device_class or task.device_class_id)
        chosen = classes.first()
        if chosen is None:
            raise FinalistsRefused(f"No device class {device_class!r}.")
        ranks = finalist_ranks(task=task)
        finalists = finalists_of(ranks, top or task.finalists_top)
        if not finalists:
            raise FinalistsRefused(f"No board of {task.slug} has a ranked entry to re-measure.")
        campaign = FinalistCampaign.objects.create(
            task=task,
            device_class=chosen,
            top=top or task.finalists_top,
            sessions=sessions or task.finalists_sessions,
            trigger=trigger,
            requested_by=user if getattr(user, "pk", None) else None,
            job_id=new_job_id(),
            ranks_before=ranks,
        )
        rows = Submission.objects.select_related("remeasurement").in_bulk(finalists)
        FinalistMeasurement.objects.bulk_create(
            _measurement(campaign, position, rows[pk]) for position, pk in enumerate(finalists)
        )
        transaction.on_commit(lambda: _enqueue(campaign, len(finalists)))
    return campaign


def _measurement(campaign: FinalistCampaign, position: int, s: Submission) -> FinalistMeasurement:
    before_p50, before_spread, before_sessions = _ranked_timing(s)
    return FinalistMeasurement(
        campaign=campaign,
        submission=s,
        position=position,
        device_class_id=campaign.device_class_id,
        before_p50_ms=before_p50,
        before_spread=before_spread,
        before_sessions=before_sessions,
    )


def finalist_campaign(campaign_id: int) -> FinalistCampaign:
    """A campaign with its task and device class, as its job reads it."""
    return FinalistCampaign.objects.select_related("task__device_class", "device_class").get(
        pk=campaign_id
    )


def finalist_waiting_ids(*, campaign_id: int) -> list[int]:
    """The campaign's finalists not timed yet, in order."""
    rows = FinalistMeasurement.objects.filter(campaign_id=campaign_id, status__in=WAITING)
    return list(rows.order_by("position").values_list("pk", flat=True))


def finalist_measurement_start(
    *, measurement_id: int, worker_name: str
) -> FinalistMeasurement | None:
    """Claim one finalist for timing (queued or running → running: a resumed campaign times
    again the one its lost worker held); None when it is finished already."""
    claimed = FinalistMeasurement.objects.filter(pk=measurement_id, status__in=WAITING).update(
        status=FinalistMeasurement.Status.RUNNING, worker_name=worker_name[:200]
    )
    if not claimed:
        return None
    return FinalistMeasurement.objects.select_related("submission__task").get(pk=measurement_id)


def finalist_measurement_save(
    *, measurement_id: int, timing: Timing, batch_size: int, device_name: str
) -> FinalistMeasurement | None:
    """One finalist's figures, and where they were taken on the task's device class, its board
    entries re-ranked on them (in the same transaction); None when it was not being timed."""
    with transaction.atomic():
        m = (
            FinalistMeasurement.objects.select_for_update()
            .select_related("campaign__task")
            .filter(pk=measurement_id, status=FinalistMeasurement.Status.RUNNING)
            .first()
        )
        if m is None:
            return None
        m.status, m.error_message = FinalistMeasurement.Status.DONE, ""
        m.sessions = timing.sessions
        for p in ("p50", "p90", "p95", "p99", "mean"):
            setattr(m, f"latency_{p}_ms", getattr(timing, f"{p}_ms"))
        m.session_p50s_ms = list(timing.session_p50s_ms) or [timing.p50_ms]
        m.session_spread = timing.session_spread
        m.unstable = timing.unstable
        energy = timing.energy_per_batch_j
        m.energy_per_sample_j = energy / batch_size if energy is not None else None
        m.device_name, m.taken_at = device_name[:200], timezone.now()
        m.save()
        if m.device_class_id == m.campaign.task.device_class_id:
            Submission.objects.filter(pk=m.submission_id).update(remeasurement=m)
            leaderboard_submissions_changed(submission_ids=[m.submission_id])
    return m


def finalist_measurement_fail(*, measurement_id: int, message: str) -> None:
    """This finalist could not be timed; the campaign goes on with the next. Its board figures
    stay what they were."""
    FinalistMeasurement.objects.filter(pk=measurement_id, status__in=WAITING).update(
        status=FinalistMeasurement.Status.FAILED, error_message=message[:2000]
    )


def finalist_campaign_finish(*, campaign_id: int) -> bool:
    """Record the ranks after, once every finalist is timed or failed; False while some wait."""
    with transaction.atomic():
        campaign = (
            FinalistCampaign.objects.select_for_update().select_related("task").get(pk=campaign_id)
        )
        if campaign.finished or campaign.measurements.filter(status__in=WAITING).exists():
            return False
        campaign.ranks_after = finalist_ranks(task=campaign.task)
        campaign.finished_at = timezone.now()
        campaign.save(update_fields=["ranks_after", "finished_at"])
    return True


LOST = "Its worker was lost while timing it; the campaign went on without it."


def finalist_campaign_resume(*, campaign_id: int) -> bool:
    """A campaign whose job is gone (its worker lost, Redis flushed): the finalist its worker
    held fails, and a new job times the rest; with none left it finishes. Returns whether a job
    was enqueued."""
    with transaction.atomic():
        campaign = FinalistCampaign.objects.select_for_update().get(pk=campaign_id)
        if campaign.finished:
            return False
        running = campaign.measurements.filter(status=FinalistMeasurement.Status.RUNNING)
        running.update(status=FinalistMeasurement.Status.FAILED, error_message=LOST)
        left = len(finalist_waiting_ids(campaign_id=campaign_id))
        if not left:
            transaction.on_commit(lambda: finalist_campaign_finish(campaign_id=campaign_id))
            return False
        campaign.job_id = new_job_id()
        campaign.save(update_fields=["job_id"])
        resumed = finalist_campaign(campaign_id)
        transaction.on_commit(lambda: _enqueue(resumed, left))
    return True


def finalist_campaigns_unfinished(*, older_than_s: float) -> list[tuple[int, str, str]]:
    """(id, job id, queue's device class) of campaigns still running after ``older_than_s``."""
    since = timezone.now() - timedelta(seconds=older_than_s)
    rows = FinalistCampaign.objects.filter(finished_at__isnull=True, created_at__lte=since)
    return [
        (pk, job_id, str(c))
        for pk, job_id, c in rows.values_list("pk", "job_id", "device_class_id")
    ]


# Why each task was last passed over by the close hook, in this process: the reason is logged
# at INFO when it is new, and at DEBUG on the sweeps after (every EVAL_RECOVERY_INTERVAL_S).
_passed_over: dict[int, str] = {}


def finalists_remeasure_closed(*, now: datetime | None = None) -> list[FinalistCampaign]:
    """The close hook: a task with ``remeasure_finalists_at_close`` that has closed and has no
    campaign started at its close gets one, on its own device class with its own settings. A
    task with no ranked entry (or a campaign still running) is passed over and looked at again
    on the next sweep: a late result may still rank."""
    due = Task.objects.filter(
        remeasure_finalists_at_close=True, closes_at__lte=now or timezone.now()
    ).exclude(finalist_campaigns__trigger=FinalistCampaign.Trigger.CLOSE)
    started = []
    for task_id in due.values_list("pk", flat=True):
        try:
            started.append(
                finalists_remeasure(task_id=task_id, trigger=FinalistCampaign.Trigger.CLOSE)
            )
            _passed_over.pop(task_id, None)
        except FinalistsRefused as exc:
            level = logging.DEBUG if _passed_over.get(task_id) == str(exc) else logging.INFO
            log.log(level, "finalists not re-measured at close yet: %s", exc)
            _passed_over[task_id] = str(exc)
    return started


# --- What the operator sees: each finalist with its ranks and figures before and after.


@dataclass(frozen=True)
class FinalistLine:
    measurement: FinalistMeasurement
    name: str
    ranks: list[tuple[str, int | None, int | None]]  # (board key, before, after) where ranked

    @property
    def moved(self) -> bool:
        return any(before != after for _, before, after in self.ranks)


def finalist_report(campaign: FinalistCampaign) -> list[FinalistLine]:
    """Every finalist of the campaign, in the order timed, with its ranks before and after on
    each board where it stands (after: at the campaign's end, or now while it runs)."""
    after = campaign.ranks_after if campaign.finished else finalist_ranks(task=campaign.task)
    boards = sorted(set(campaign.ranks_before) | set(after), key=_board_order)
    measurements = campaign.measurements.select_related(
        "submission__user", "submission__team"
    ).order_by("position")
    lines = []
    for m in measurements:
        key = str(m.submission_id)
        ranks = [
            (b, campaign.ranks_before.get(b, {}).get(key), after.get(b, {}).get(key))
            for b in boards
        ]
        shown = [r for r in ranks if r[1] is not None or r[2] is not None]
        lines.append(FinalistLine(m, m.submission.board_name, shown))
    return lines


def _board_order(key: str) -> tuple[str, int]:
    """The main board first, then the tracks; public before private on each."""
    board, _, track = key.partition("/")
    return (track, BOARDS.index(board) if board in BOARDS else len(BOARDS))


def finalist_campaigns(*, task_ids: Iterable[int], limit: int = 5) -> list[FinalistCampaign]:
    """The latest campaigns of these tasks, newest first."""
    rows = FinalistCampaign.objects.filter(task_id__in=list(task_ids))
    return list(rows.select_related("task", "device_class", "requested_by")[:limit])
