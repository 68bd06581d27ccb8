"""Read side of the worker fleet: worker cards, health warnings and queue statistics.

Worker state comes from the heartbeats in Redis (evaluation/heartbeat.py); queue statistics
come from the database, which stays right even while Redis is being rebuilt.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from redis import Redis

from evaluation import heartbeat
from submissions.models import Submission, Task

Status = Submission.Status
SPARKLINE_POINTS = 120  # the last 10 minutes at the default 5 s heartbeat; the API can ask more


@dataclass
class WorkerCard:
    name: str
    online: bool
    state: str  # idle, busy, offline
    device: str
    seconds_since_heartbeat: float
    uptime_s: float | None
    submission_id: int | None
    job: dict[str, Any] | None  # the submission being evaluated: id, task, progress
    jobs_done: int
    jobs_failed: int
    gpu: dict[str, Any] | None
    gpu_problem: str
    no_gpu_reason: str
    memory_share: int | None
    host_stats: dict[str, Any]
    warnings: list[str]
    history: list[dict[str, Any]] = field(default_factory=list)
    host: str = ""  # staff only
    pid: int | None = None  # staff only
    horse_pid: int | None = None  # staff only

    @property
    def memory_used_fraction(self) -> float | None:
        if self.gpu and self.gpu.get("memory_total"):
            return float(self.gpu["memory_used"]) / float(self.gpu["memory_total"])
        if not self.gpu and self.host_stats.get("memory_total"):
            return float(self.host_stats["memory_used"]) / float(self.host_stats["memory_total"])
        return None

    def series(self, key: str) -> list[float | None]:
        return [sample.get(key) for sample in self.history]

    def as_dict(self, *, staff: bool) -> dict[str, Any]:
        data = asdict(self)
        data["memory_used_fraction"] = self.memory_used_fraction
        if not staff:
            for private in ("host", "pid", "horse_pid"):
                data.pop(private)
            if data["gpu"]:
                data["gpu"] = {k: v for k, v in data["gpu"].items() if k != "processes"}
        return data


def _connection() -> Redis:
    return django_rq.get_connection(settings.EVALUATION_QUEUE)


def gpu_tasks() -> list[str]:
    """Slugs of open tasks whose submissions fail on a worker without a GPU."""
    return list(Task.objects.filter(requires_gpu=True).values_list("slug", flat=True))


def _warnings(
    state: heartbeat.WorkerState, online: bool, age: float, needs_gpu: list[str]
) -> list[str]:
    found: list[str] = []
    if not online:
        if state.state == "stopped":
            found.append("Stopped: the worker shut down cleanly.")
        else:
            found.append(f"No heartbeat for {age:.0f} s: the worker is offline.")
        return found
    gpu = state.gpu or {}
    temperature = gpu.get("temperature_c")
    if temperature is not None and temperature >= settings.EVAL_TEMPERATURE_WARN_C:
        found.append(f"GPU at {temperature} °C (warning at {settings.EVAL_TEMPERATURE_WARN_C} °C).")
    total, used = gpu.get("memory_total"), gpu.get("memory_used")
    if not gpu:
        total, used = state.host_stats.get("memory_total"), state.host_stats.get("memory_used")
    if total and used is not None and used / total >= settings.EVAL_MEMORY_WARN_FRACTION:
        which = "GPU memory" if gpu else "RAM"
        found.append(f"{which} {used / total:.0%} full.")
    if state.gpu_problem:
        found.append(f"GPU problem: {state.gpu_problem}.")
    if state.device == "cpu" and needs_gpu:
        found.append(
            "Runs on CPU, but " + ", ".join(needs_gpu) + " require(s) a GPU: those "
            "submissions fail on this worker."
        )
    return found


def _current_jobs(ids: list[int]) -> dict[int, dict[str, Any]]:
    """What the busy workers are evaluating, in one query (no owner: cards are public)."""
    if not ids:
        return {}
    rows = Submission.objects.filter(pk__in=ids).values("id", "task__slug", "progress", "status")
    return {
        r["id"]: {"id": r["id"], "task": r["task__slug"], "progress": r["progress"]}
        for r in rows
        if r["status"] == Status.RUNNING
    }


def worker_cards(
    *, task: Task | None = None, history: int = SPARKLINE_POINTS, connection: Redis | None = None
) -> list[WorkerCard]:
    """Every worker seen in the last day: online ones first, then by name."""
    connection = connection or _connection()
    states = heartbeat.read_states(connection)
    needs_gpu = gpu_tasks() if task is None else [task.slug] * task.requires_gpu
    samples = heartbeat.read_history(connection, [s.name for s in states], limit=history)
    jobs = _current_jobs([s.submission_id for s in states if s.submission_id])
    now = time.time()
    cards = []
    for s in states:
        online = heartbeat.is_online(s, now)
        age = max(0.0, now - s.last_heartbeat)
        cards.append(
            WorkerCard(
                name=s.name,
                online=online,
                state=s.state if online else "offline",
                device=s.device,
                seconds_since_heartbeat=round(age, 1),
                uptime_s=round(now - s.started_at, 1) if online else None,
                submission_id=s.submission_id if online else None,
                job=jobs.get(s.submission_id) if online and s.submission_id else None,
                jobs_done=s.jobs_done,
                jobs_failed=s.jobs_failed,
                gpu=s.gpu,
                gpu_problem=s.gpu_problem,
                no_gpu_reason=s.no_gpu_reason,
                memory_share=s.memory_share,
                host_stats=s.host_stats,
                warnings=_warnings(s, online, age, needs_gpu),
                history=samples.get(s.name, []),
                host=s.host,
                pid=s.pid,
                horse_pid=s.horse_pid if online else None,
            )
        )
    return sorted(cards, key=lambda c: (not c.online, c.name))


def _median_wait_s(since: Any) -> float | None:
    rows = (
        Submission.objects.filter(started_at__gte=since)
        .values_list("created_at", "started_at")
        .iterator()
    )
    waits = [(started - created).total_seconds() for created, started in rows if started]
    return round(statistics.median(waits), 1) if waits else None


def my_queue_positions(user: Any) -> list[dict[str, Any]]:
    """Each of the user's queued submissions with its place in the queue (1 = next)."""
    if not getattr(user, "is_authenticated", False):
        return []
    ahead = (
        Submission.objects.filter(status=Status.QUEUED)
        .filter(
            Q(created_at__lt=OuterRef("created_at"))
            | Q(created_at=OuterRef("created_at"), id__lt=OuterRef("id"))
        )
        .order_by()
        .values("status")  # one group: a count of the rows ahead, in the same query
        .annotate(n=Count("id"))
        .values("n")
    )
    mine = (
        Submission.objects.filter(status=Status.QUEUED, user=user)
        .annotate(ahead=Coalesce(Subquery(ahead), 0))
        .select_related("task")
        .order_by("created_at", "id")
    )
    return [{"id": s.pk, "task": s.task.slug, "position": s.ahead + 1} for s in mine]


def queue_stats(*, user: Any = None, connection: Redis | None = None) -> dict[str, Any]:
    since = timezone.now() - timedelta(hours=24)
    counts = Submission.objects.aggregate(
        queued=_count(Q(status=Status.QUEUED)),
        running=_count(Q(status=Status.RUNNING)),
        succeeded_24h=_count(Q(status=Status.SUCCEEDED, finished_at__gte=since)),
        failed_24h=_count(Q(status=Status.FAILED, finished_at__gte=since)),
        cancelled_24h=_count(Q(status=Status.CANCELLED, finished_at__gte=since)),
    )
    cards = worker_cards(history=0, connection=connection)
    queue = django_rq.get_queue(settings.EVALUATION_QUEUE)
    return {
        **counts,
        "median_wait_s_24h": _median_wait_s(since),
        "jobs_in_redis": queue.count,
        "workers_online": sum(c.online for c in cards),
        "workers_busy": sum(c.state == "busy" for c in cards),
        "mine": my_queue_positions(user),
    }


def _count(condition: Q) -> Count:
    return Count("id", filter=condition)
