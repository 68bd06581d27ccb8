"""Fair turns: which queued submission of a device class starts next, and where each one stands.

The database decides, so the order survives the loss of Redis. Among the queued submissions of
the classes a worker serves, the next one is chosen by:

1. ``priority`` (operator re-runs) and then baselines, first;
2. the submission's turn: 1 for each entrant's oldest queued submission, 2 for their second,
   ... so one user's fifty uploads wait behind every other user's first (an entrant is a user
   alone, or a team: its members share their turns as they share their quota);
3. within a turn, the entrant who started an evaluation least recently (never: first);
4. then upload time.

The worker (evaluation/worker.py) pops any job of its queues and swaps it for the job of the
fair pick; the submission page and ``/api/queue/`` show positions in this same order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db.models import BigIntegerField, Case, F, OuterRef, Q, QuerySet, Subquery, When, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from submissions.compiled import CompiledRead
from submissions.models import Submission

Status = Submission.Status
# Run times of this many recent evaluations of a class estimate when a queued one starts.
RECENT_RUNS = 50
# An operator's re-run starts before the participants' turns.
RERUN_PRIORITY = 10


def _entrant_last_start(classes: Sequence[str], **entrant: Any) -> Subquery:
    return Subquery(
        Submission.objects.filter(
            **entrant, task__device_class__slug__in=classes, started_at__isnull=False
        )
        .order_by("-started_at")
        .values("started_at")[:1]
    )


def fair_order(*, classes: Sequence[str]) -> QuerySet[Submission]:
    """The queued submissions of these device classes, next to start first. Turns are an
    entrant's: a team's members take them together, as they share one quota."""
    in_team = Q(team__isnull=False)
    # One partition per entrant: a team by its id (negated, so never a user's), else the user.
    entrant = Case(
        When(in_team, then=-F("team_id")), default=F("user_id"), output_field=BigIntegerField()
    )
    last_start = Case(
        When(in_team, then=_entrant_last_start(classes, team=OuterRef("team"))),
        default=_entrant_last_start(classes, user=OuterRef("user"), team__isnull=True),
    )
    first = [F("priority").desc(), F("is_baseline").desc()]
    return (
        Submission.objects.filter(status=Status.QUEUED, task__device_class__slug__in=classes)
        .annotate(
            turn=Window(
                RowNumber(),
                partition_by=[entrant],
                order_by=[*first, F("created_at").asc(), F("id").asc()],
            ),
            entrant_last_start=last_start,
        )
        .order_by(
            *first,
            "turn",
            F("entrant_last_start").asc(nulls_first=True),
            "created_at",
            "id",
        )
    )


def _next_candidates_orm(values: Mapping[str, Any], shape: Hashable) -> Any:
    count, limit = cast(tuple[int, int], shape)
    classes = [values[f"class {i}"] for i in range(count)]
    rows = fair_order(classes=classes).values_list("id", "job_id", "task__device_class__slug")
    return list(rows[:limit])


# A worker asks before every job. Django compiled this query anew each time: 6 ms of the
# worker's CPU per job on the 2-core box, twice what PostgreSQL takes to run it. Its SQL depends
# on the number of classes and the limit only: compiled once per process and shape.
_NEXT_CANDIDATES = CompiledRead(
    _next_candidates_orm,
    sentinels=lambda shape: {
        f"class {i}": f"sentinel class {i}" for i in range(cast(tuple[int, int], shape)[0])
    },
)


def next_candidates(*, classes: Sequence[str], limit: int = 8) -> list[tuple[int, str, str]]:
    """(submission id, job id, device class) of the next few to start, in order."""
    values = {f"class {i}": device_class for i, device_class in enumerate(classes)}
    rows = _NEXT_CANDIDATES.rows(values, shape=(len(classes), limit))
    return [(row[0], row[1], row[2]) for row in rows]


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


def queue_positions(*, submissions: Sequence[Submission]) -> dict[int, int]:
    """submission id → place in its class's fair order (1 = next), for queued ones."""
    positions: dict[int, int] = {}
    wanted: dict[str, set[int]] = {}
    for s in submissions:
        if s.status == Status.QUEUED:
            wanted.setdefault(s.task.device_class_slug, set()).add(s.pk)
    for device_class, ids in wanted.items():
        order = fair_order(classes=[device_class]).values_list("id", flat=True)
        left = len(ids)
        for place, submission_id in enumerate(order.iterator(), start=1):
            if submission_id in ids:
                positions[submission_id] = place
                left -= 1
                if not left:
                    break
    return positions


def queue_place(*, submission: Submission, workers_online: int) -> dict[str, Any] | None:
    """Where one queued submission stands in its class: position, estimated start."""
    position = queue_positions(submissions=[submission]).get(submission.pk)
    if position is None:
        return None
    device_class = submission.task.device_class_slug
    stats = class_queue_get(device_class=device_class, workers_online=workers_online)
    return {
        "device_class": device_class,
        "position": position,
        "estimated_wait_s": stats.estimated_wait_s(position),
        "estimated_start": stats.estimated_start(position),
        "waiting_for_device": workers_online == 0,
    }
