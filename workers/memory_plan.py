"""The memory plan of one GPU: the live workers' shares plus one CUDA context each fit the card.

``gpu_mem_limit`` bounds only onnxruntime's arena. Each process also holds a CUDA context (driver
state, module images, cuDNN/cuBLAS handles and workspaces) outside that limit, a few hundred MB on
current GPUs; ``EVAL_CUDA_CONTEXT_MB`` is the allowance the plan counts per worker. A worker that
would make the plan exceed the card refuses to start, naming the workers already planned there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from redis import Redis

from queueing import heartbeat

MB = 1_048_576
LOCK_TIMEOUT_S = 30


@dataclass(frozen=True)
class PlannedWorker:
    name: str
    share: int  # bytes: this worker's gpu_mem_limit


@dataclass(frozen=True)
class GpuPlan:
    uuid: str
    gpu_name: str
    total: int
    context_bytes: int
    workers: tuple[PlannedWorker, ...]

    @property
    def planned(self) -> int:
        return sum(w.share + self.context_bytes for w in self.workers)

    @property
    def free(self) -> int:
        return self.total - self.planned

    @property
    def overcommitted(self) -> bool:
        return self.planned > self.total

    def with_worker(self, worker: PlannedWorker) -> GpuPlan:
        others = tuple(w for w in self.workers if w.name != worker.name)
        return GpuPlan(self.uuid, self.gpu_name, self.total, self.context_bytes, (*others, worker))

    def as_dict(self) -> dict[str, object]:
        return {
            "uuid": self.uuid,
            "gpu_name": self.gpu_name,
            "total": self.total,
            "context_bytes": self.context_bytes,
            "planned": self.planned,
            "free": self.free,
            "overcommit": max(0, -self.free),
            "overcommitted": self.overcommitted,
            "workers": [{"name": w.name, "share": w.share} for w in self.workers],
        }


def context_bytes() -> int:
    return int(settings.EVAL_CUDA_CONTEXT_MB) * MB


def _mb(n: int) -> str:
    return f"{n / MB:,.0f} MiB"  # binary units, named as such (evaluation/sizes.py)


def refusal(plan: GpuPlan, newcomer: PlannedWorker) -> str | None:
    """Why ``newcomer`` may not join ``plan`` (a message for the operator), or None. Pure."""
    joined = plan.with_worker(newcomer)
    if not joined.overcommitted:
        return None
    others = [w for w in joined.workers if w.name != newcomer.name]
    listed = ", ".join(f"{w.name} ({_mb(w.share)})" for w in others) or "no other worker"
    return (
        f"GPU memory plan for {plan.gpu_name} {plan.uuid} would exceed the card: this worker's "
        f"share {_mb(newcomer.share)} plus {len(joined.workers)} CUDA context(s) of "
        f"{_mb(plan.context_bytes)} (EVAL_CUDA_CONTEXT_MB) and the shares of {listed} come to "
        f"{_mb(joined.planned)}, more than the {_mb(plan.total)} it has. Lower "
        "EVAL_GPU_MEMORY_FRACTION (or EVAL_GPU_MEMORY_BYTES) on this worker or the others, or "
        "run fewer workers on this GPU."
    )


def plan_of(
    states: Iterable[heartbeat.WorkerState], *, uuid: str, gpu_name: str, total: int
) -> GpuPlan:
    """The plan of one GPU from heartbeats: online CUDA workers on that UUID, by name."""
    workers = tuple(
        PlannedWorker(name=s.name, share=int(s.memory_share))
        for s in sorted(states, key=lambda s: s.name)
        if s.device == "cuda"
        and s.memory_share
        and (s.gpu or {}).get("uuid") == uuid
        and heartbeat.is_online(s)
    )
    return GpuPlan(uuid, gpu_name, total, context_bytes(), workers)


def plans_of(states: list[heartbeat.WorkerState]) -> list[GpuPlan]:
    """One plan per GPU that some online CUDA worker reports, for the workers page."""
    gpus: dict[str, dict] = {}
    for s in states:
        if s.gpu and s.device == "cuda" and heartbeat.is_online(s):
            gpus.setdefault(s.gpu["uuid"], s.gpu)
    return [
        plan_of(states, uuid=uuid, gpu_name=gpu["name"], total=int(gpu["memory_total"]))
        for uuid, gpu in sorted(gpus.items())
    ]


def plan_lock(connection: Redis, uuid: str):  # type: ignore[no-untyped-def]
    """Held while a worker checks the plan and publishes its first heartbeat, so two workers
    starting together on one GPU cannot both see room for themselves."""
    return connection.lock(f"{heartbeat.PREFIX}:gpu-plan:{uuid}", timeout=LOCK_TIMEOUT_S)
