"""Fair turns: which queued submission of a device class starts next, and where each one stands.

The database decides, so the order survives the loss of Redis. Among the queued submissions of
the classes a worker serves, the next one is chosen by:

1. ``priority`` (operator re-runs) and then baselines, first;
2. the submission's turn: 1 for each entrant's oldest queued submission, 2 for their second,
   ... so one user's fifty uploads wait behind every other user's first (an entrant is a user
   alone, or a team: its members share their turns as they share their quota);
3. within a turn, the entrant who started an evaluation least recently (never: first);
4. then upload time.

The worker (workers/worker.py) pops any job of its queues and swaps it for the job of the
fair pick; the submission page and ``/api/queue/`` show positions in this same order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from submissions.boards.cache import cached
from submissions.models import Submission

Status = Submission.Status
# Run times of this many recent evaluations of a class estimate when a queued one starts.
RECENT_RUNS = 50
# An operator's re-run starts before the participants' turns.
RERUN_PRIORITY = 10


# The fair order is one statement, a read. Written with the ORM, the entrant's latest start was a
# subquery in the select list, which PostgreSQL ran once per queued row: with thousands queued
# a pick grew with the queue, worst before the table was analysed (the look-up then went through
# submission_quota_idx, reading the entrant's rows of the task, the burst's queued ones included,
# for each queued row). Here the queued rows are read once (``queued``), the latest start is
# looked up once per entrant (``latest``, materialized so that PostgreSQL cannot fold the look-up
# back into the outer rows) and joined back (benchmarks/fair_order.py measures both). Teams are
# negated entrants, so a team never meets a user of the same id. Plain SQL that PostgreSQL and
# SQLite both run: Django has no common table expressions.
_QUEUED_IN_TURNS = """
WITH queued AS (
    SELECT s.id, s.job_id, t.device_class_id AS device_class, s.priority, s.is_baseline,
        s.created_at,
        CASE WHEN s.team_id IS NOT NULL THEN -s.team_id ELSE s.user_id END AS entrant
    FROM submissions_submission s
    JOIN submissions_task t ON t.id = s.task_id
    WHERE s.status = %s AND t.device_class_id IN ({classes})
),
latest AS {materialized}(
    SELECT e.entrant, CASE WHEN e.entrant < 0 THEN (
        SELECT u.started_at FROM submissions_submission u
        JOIN submissions_task ut ON ut.id = u.task_id
        WHERE u.team_id = -e.entrant AND u.started_at IS NOT NULL
            AND ut.device_class_id IN ({classes})
        ORDER BY u.started_at DESC LIMIT 1
    ) ELSE (
        SELECT u.started_at FROM submissions_submission u
        JOIN submissions_task ut ON ut.id = u.task_id
        WHERE u.user_id = e.entrant AND u.team_id IS NULL AND u.started_at IS NOT NULL
            AND ut.device_class_id IN ({classes})
        ORDER BY u.started_at DESC LIMIT 1
    ) END AS started_at
    FROM (SELECT DISTINCT entrant FROM queued) e
),
turns AS (
    SELECT q.*, ROW_NUMBER() OVER (
        PARTITION BY q.entrant
        ORDER BY q.priority DESC, q.is_baseline DESC, q.created_at ASC, q.id ASC
    ) AS turn
    FROM queued q
)
"""
_ORDER = """o.priority DESC, o.is_baseline DESC, o.turn ASC, l.started_at ASC NULLS FIRST,
    o.created_at ASC, o.id ASC"""
_FAIR_ORDER_SQL = (
    _QUEUED_IN_TURNS
    + "SELECT o.id, o.job_id, o.device_class FROM turns o JOIN latest l ON l.entrant = o.entrant\n"
    + f"ORDER BY {_ORDER}\n"
)
# The places of a few submissions, counted in the database: a queued submission's page asks every
# second, and fetching the whole order to find them was slower (benchmarks/fair_order.py).
_PLACES_SQL = (
    _QUEUED_IN_TURNS
    + f"""SELECT id, place FROM (
    SELECT o.id, ROW_NUMBER() OVER (ORDER BY {_ORDER}) AS place
    FROM turns o JOIN latest l ON l.entrant = o.entrant
) ranked WHERE id IN ({{ids}})
"""
)


def _statement(sql: str, classes: Sequence[str], **slots: str) -> tuple[str, list[Any]]:
    # The hint is PostgreSQL's to need; SQLite before 3.35 (Django allows 3.31) would refuse it.
    materialized = "MATERIALIZED " if connection.vendor == "postgresql" else ""
    sql = sql.format(classes=", ".join(["%s"] * len(classes)), materialized=materialized, **slots)
    return sql, [Status.QUEUED.value, *classes, *classes, *classes]


def _fair_order_statement(classes: Sequence[str], limit: int | None) -> tuple[str, list[Any]]:
    sql, params = _statement(_FAIR_ORDER_SQL, classes)
    if limit is not None:
        sql += "LIMIT %s"
        params.append(limit)
    return sql, params


def fair_order(*, classes: Sequence[str], limit: int | None = None) -> list[tuple[int, str, str]]:
    """(submission id, job id, device class) of the queued submissions of these device classes,
    next to start first; the first ``limit`` of them when given. Turns are an entrant's: a team's
    members take them together, as they share one quota."""
    if not classes:
        return []
    with connection.cursor() as cursor:
        cursor.execute(*_fair_order_statement(classes, limit))
        return [(row[0], row[1], row[2]) for row in cursor.fetchall()]


def next_candidates(*, classes: Sequence[str], limit: int = 8) -> list[tuple[int, str, str]]:
    """(submission id, job id, device class) of the next few to start, in order."""
    return fair_order(classes=classes, limit=limit)


@dataclass(frozen=True)
class ClassQueue:
    """One device class's queue as participants see it: no worker or host names."""

    device_class: str
    queued: int
    running: int
    workers_online: int
    median_run_s: float | None

    def estimated_wait_s(self, position: int) -> float | None:
        """Seconds until the submission at ``position`` (1 = next) starts: the runs ahead of
        it (and those running now) spread over the class's online workers. None while no worker
        of the class is online or nothing of it has run lately."""
        if not self.workers_online or self.median_run_s is None:
            return None
        rounds = math.floor((position - 1 + self.running) / self.workers_online)
        return round(rounds * self.median_run_s, 1)

    def estimated_start(self, position: int, now: datetime | None = None) -> datetime | None:
        wait = self.estimated_wait_s(position)
        if wait is None:
            return None
        return (now or timezone.now()) + timedelta(seconds=wait)


def class_queue_get(*, device_class: str, workers_online: int) -> ClassQueue:
    in_class = Submission.objects.filter(task__device_class__slug=device_class)
    recent = (
        in_class.filter(status=Status.SUCCEEDED, started_at__isnull=False)
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:RECENT_RUNS]
    )
    runs = [(done - start).total_seconds() for start, done in recent if done and start]
    return ClassQueue(
        device_class=device_class,
        queued=in_class.filter(status=Status.QUEUED).count(),
        running=in_class.filter(status=Status.RUNNING).count(),
        workers_online=workers_online,
        median_run_s=round(statistics.median(runs), 2) if runs else None,
    )


# A poller's estimated wait may be this old; its position is read afresh at every poll.
CLASS_QUEUE_TTL_S = 5


def class_queue_shared(*, device_class: str, workers_online: int) -> ClassQueue:
    """``class_queue_get``, shared for a few seconds by every poller of the class: each poll of
    a queued submission would otherwise count the class's queue and read its recent runs."""
    namespace = settings.BOARD_CACHE_NAMESPACE  # tests: one of their own
    key = f"class-queue{namespace}:{device_class}:{workers_online}"
    return cached(
        key,
        lambda: class_queue_get(device_class=device_class, workers_online=workers_online),
        CLASS_QUEUE_TTL_S,
    )


def queue_positions(*, submissions: Sequence[Submission]) -> dict[int, int]:
    """submission id → place in its class's fair order (1 = next), for queued ones."""
    positions: dict[int, int] = {}
    wanted: dict[str, list[int]] = {}
    for s in submissions:
        if s.status == Status.QUEUED:
            wanted.setdefault(s.task.device_class_slug, []).append(s.pk)
    for device_class, ids in wanted.items():
        sql, params = _statement(_PLACES_SQL, [device_class], ids=", ".join(["%s"] * len(ids)))
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, *ids])
            positions.update((row[0], row[1]) for row in cursor.fetchall())
    return positions


def queue_place(*, submission: Submission, workers_online: int) -> dict[str, Any] | None:
    """Where one queued submission stands in its class: position, estimated start."""
    position = queue_positions(submissions=[submission]).get(submission.pk)
    if position is None:
        return None
    device_class = submission.task.device_class_slug
    stats = class_queue_shared(device_class=device_class, workers_online=workers_online)
    return {
        "device_class": device_class,
        "position": position,
        "estimated_wait_s": stats.estimated_wait_s(position),
        "estimated_start": stats.estimated_start(position),
        "waiting_for_device": workers_online == 0,
    }
