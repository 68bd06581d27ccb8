"""Read side of the worker fleet: worker cards, health warnings and queue statistics.

Worker state comes from the heartbeats in Redis (queueing/heartbeat.py); queue statistics
come from the database, which stays right even while Redis is being rebuilt.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from queueing import heartbeat, queues
from submissions.lifecycle import turns
from submissions.models import DeviceClass, Submission, Task
from workers import memory_plan

log = logging.getLogger(__name__)

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
    horse_pid: int | None = None  # staff only: the running model process (name kept for clients)
    cuda_problem: str = ""  # why this worker does not use CUDA (its start-up self-test failed)
    sandbox: dict[str, Any] | None = None  # its model processes' protections (docs/security.md)

    @property
    def memory_used_fraction(self) -> float | None:
        if self.gpu and self.gpu.get("memory_total"):
            return float(self.gpu["memory_used"]) / float(self.gpu["memory_total"])
        if not self.gpu and self.host_stats.get("memory_total"):
            return float(self.host_stats["memory_used"]) / float(self.host_stats["memory_total"])
        return None

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
    return queues.evaluation_redis()


def _is_staff(viewer: Any) -> bool:
    return bool(getattr(viewer, "is_staff", False))


def _warnings(state: heartbeat.WorkerState, online: bool, age: float) -> list[str]:
    found: list[str] = []
    if not online:
        if state.state == "stopped" and state.cuda_problem:
            found.append(f"Refused to start: {state.cuda_problem}")
        elif state.state == "stopped":
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
    if state.cuda_problem:
        found.append(f"Not using CUDA: {state.cuda_problem}")
    if state.sandbox is not None and state.sandbox.get("missing"):
        found.append("Model process without: " + "; ".join(state.sandbox["missing"]))
    return found


def _current_jobs(ids: list[int], *, staff: bool) -> dict[int, dict[str, Any]]:
    """What the busy workers are evaluating, in one query (no owner: cards are public).

    A hidden task's slug is named to staff only; anyone else sees ``task: None``.
    """
    if not ids:
        return {}
    rows = Submission.objects.filter(pk__in=ids, status=Status.RUNNING).values(
        "id", "task__slug", "task__is_hidden", "progress"
    )
    return {
        r["id"]: {
            "id": r["id"],
            "task": r["task__slug"] if staff or not r["task__is_hidden"] else None,
            "progress": r["progress"],
        }
        for r in rows
    }


def worker_cards(
    *,
    viewer: Any = None,
    task: Task | None = None,
    history: int = SPARKLINE_POINTS,
    connection: Redis | None = None,
) -> list[WorkerCard]:
    """Every worker seen in the last day, as ``viewer`` may see it: online first, then by name.

    ``task`` (one the viewer may see) judges the cards against that task alone.
    """
    connection = connection or _connection()
    states = heartbeat.read_states(connection)
    samples = heartbeat.read_history(connection, [s.name for s in states], limit=history)
    staff = _is_staff(viewer)
    jobs = _current_jobs([s.submission_id for s in states if s.submission_id], staff=staff)
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
                warnings=_warnings(s, online, age),
                history=samples.get(s.name, []),
                host=s.host,
                pid=s.pid,
                horse_pid=s.horse_pid if online else None,
                cuda_problem=s.cuda_problem,
                sandbox=s.sandbox,
            )
        )
    return sorted(cards, key=lambda c: (not c.online, c.name))


def gpu_plans(*, connection: Redis | None = None) -> list[memory_plan.GpuPlan]:
    """Each GPU's memory plan: its online CUDA workers' shares plus a CUDA context each."""
    return memory_plan.plans_of(heartbeat.read_states(connection or _connection()))


def _median_wait_s(since: Any) -> float | None:
    rows = (
        Submission.objects.filter(started_at__gte=since)
        .values_list("created_at", "started_at")
        .iterator()
    )
    waits = [(started - created).total_seconds() for created, started in rows if started]
    return round(statistics.median(waits), 1) if waits else None


def my_queue_positions(user: Any, workers: dict[str, int]) -> list[dict[str, Any]]:
    """Each of the user's queued submissions with its place in its device class's fair order
    (1 = next) and an estimated start."""
    if not getattr(user, "is_authenticated", False):
        return []
    mine = list(
        Submission.objects.filter(status=Status.QUEUED, user=user)
        .select_related("task")
        .order_by("created_at", "id")
    )
    positions = turns.queue_positions(submissions=mine)
    stats: dict[str, turns.ClassQueue] = {}
    found = []
    for s in mine:
        device_class = s.task.device_class_slug
        if device_class not in stats:
            online = workers.get(device_class, 0)
            stats[device_class] = turns.class_queue_get(
                device_class=device_class, workers_online=online
            )
        position = positions.get(s.pk)
        if position is None:  # it left the queue (started, cancelled) since it was read
            continue
        found.append(
            {
                "id": s.pk,
                "task": s.task.slug,
                "device_class": device_class,
                "position": position,
                "estimated_wait_s": stats[device_class].estimated_wait_s(position),
                "waiting_for_device": not stats[device_class].workers_online,
            }
        )
    return found


def device_classes(workers: dict[str, int] | None) -> list[dict[str, Any]]:
    """Every device class with its queue, its online workers, and a warning for operators when
    submissions (or tasks) of the class have no worker to run them. ``workers`` None: who is
    online is unknown (Redis cannot be reached), so no count, wait or warning is given."""
    found = []
    for c in DeviceClass.objects.annotate(tasks_count=Count("tasks")):
        online = (workers or {}).get(c.slug, 0)
        stats = turns.class_queue_get(device_class=c.slug, workers_online=online)
        warning = ""
        if workers is not None and not online and (stats.queued or c.tasks_count):
            warning = (
                f"No worker of device class {c.slug} is online: {stats.queued} submission(s) "
                f"of its {c.tasks_count} task(s) wait. Start a worker that serves it "
                f"(EVAL_DEVICE_CLASSES={c.slug}, or a GPU whose name contains "
                f"{c.gpu_name_contains!r})."
                if c.gpu_name_contains
                else f"No worker of device class {c.slug} is online: {stats.queued} "
                f"submission(s) of its {c.tasks_count} task(s) wait. Start a worker that serves "
                f"it (EVAL_DEVICE_CLASSES={c.slug})."
            )
        found.append(
            {
                "slug": c.slug,
                "name": c.name,
                "queued": stats.queued,
                "running": stats.running,
                "workers_online": stats.workers_online if workers is not None else None,
                "median_run_s": stats.median_run_s,
                "estimated_wait_s_next": (
                    stats.estimated_wait_s(stats.queued + 1) if workers is not None else None
                ),
                "warning": warning,
            }
        )
    return found


def queue_stats(*, user: Any = None, connection: Redis | None = None) -> dict[str, Any]:
    """The queue from the database, and the workers from their heartbeats in Redis; while Redis
    cannot be reached, the database's part alone (``worker_status_unavailable``)."""
    since = timezone.now() - timedelta(hours=24)
    counts = Submission.objects.aggregate(
        queued=_count(Q(status=Status.QUEUED)),
        running=_count(Q(status=Status.RUNNING)),
        succeeded_24h=_count(Q(status=Status.SUCCEEDED, finished_at__gte=since)),
        failed_24h=_count(Q(status=Status.FAILED, finished_at__gte=since)),
        cancelled_24h=_count(Q(status=Status.CANCELLED, finished_at__gte=since)),
    )
    try:
        cards = worker_cards(viewer=user, history=0, connection=connection)
        workers: dict[str, int] | None = queues.online_classes(connection or _connection())
    except RedisError as exc:
        log.warning("queue statistics without the workers: Redis is unavailable: %s", exc)
        cards, workers = [], None
    classes = device_classes(workers)
    return {
        **counts,
        "median_wait_s_24h": _median_wait_s(since),
        "jobs_in_redis": _jobs_in_redis(classes, connection) if workers is not None else None,
        "workers_online": sum(c.online for c in cards) if workers is not None else None,
        "workers_busy": sum(c.state == "busy" for c in cards) if workers is not None else None,
        "worker_status_unavailable": workers is None,
        "device_classes": classes,
        "mine": my_queue_positions(user, workers or {}),
    }


def _jobs_in_redis(classes: list[dict[str, Any]], connection: Redis | None) -> int | None:
    """Jobs waiting in the classes' queues; None when Redis stopped answering meanwhile."""
    try:
        return sum(queues.class_queue(c["slug"], connection).count for c in classes)
    except RedisError:
        return None


def _count(condition: Q) -> Count:
    return Count("id", filter=condition)
