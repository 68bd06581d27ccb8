"""The memory plan of a GPU: live workers' shares plus a CUDA context each may not exceed it.

Workers' heartbeats are real (real Redis); the GPU is faked at NVML and at the providers a
session got (evaluation.selftest.session_providers), as in test_device_rule.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import pytest
from django.test import Client

from evaluation.runner import CPU, CUDA
from queueing import heartbeat
from tests.workers.fake_nvml import GIB, FakeGpu, FakeNvml, install
from workers.memory_plan import GpuPlan, PlannedWorker, plan_of, refusal
from workers.worker import EvaluationWorker

A40 = FakeGpu(uuid="GPU-a40a40a4-0000-4000-8000-000000000000", memory_total=48 * GIB)
MB = 1_048_576


@pytest.fixture(autouse=True)
def _gpu_host(monkeypatch: Any, settings: Any) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded, so restored (unset) afterwards
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "")  # recorded, so restored (unset) afterwards
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    monkeypatch.setattr("workers.device._selftest_problem", None)
    install(monkeypatch, FakeNvml(A40))
    monkeypatch.setattr("evaluation.selftest.session_providers", lambda session: [CUDA, CPU])
    settings.EVAL_DEVICE = "auto"
    settings.EVAL_GPU_UUID = A40.uuid
    settings.EVAL_GPU_MEMORY_BYTES = 0
    settings.EVAL_CUDA_CONTEXT_MB = 500


def live_worker(queue: Any, name: str, share: int, *, uuid: str = A40.uuid) -> None:
    """A heartbeat as a running CUDA worker on the A40 publishes it."""
    gpu = {**asdict(A40), "uuid": uuid, "memory_used": 0, "processes": []}
    state = heartbeat.WorkerState(
        name=name, host="gpu-host-1", pid=1, state="idle", device="cuda", started_at=time.time(),
        memory_share=share, gpu=gpu,
    )  # fmt: skip
    heartbeat.publish(queue.connection, state)


def test_a_plan_that_fits_the_card_is_accepted_and_one_that_does_not_names_the_others() -> None:
    plan = GpuPlan("GPU-x", "NVIDIA A40", 48 * GIB, 500 * MB, (PlannedWorker("a40-1", 20 * GIB),))
    assert refusal(plan, PlannedWorker("a40-2", 20 * GIB)) is None

    message = refusal(plan, PlannedWorker("a40-2", 28 * GIB))

    assert message == (
        "GPU memory plan for NVIDIA A40 GPU-x would exceed the card: this worker's share "
        "28,672 MiB plus 2 CUDA context(s) of 500 MiB (EVAL_CUDA_CONTEXT_MB) and the shares of "
        "a40-1 (20,480 MiB) come to 50,152 MiB, more than the 49,152 MiB it has. Lower "
        "EVAL_GPU_MEMORY_FRACTION (or EVAL_GPU_MEMORY_BYTES) on this worker or the others, or "
        "run fewer workers on this GPU."
    )


def test_seven_workers_at_0_143_of_one_gpu_overcommit_it_and_0_13_fits() -> None:
    # The README's old example: seven shares of 0.143 are already more than the whole card.
    total = 48 * GIB

    def plan(fraction: float) -> GpuPlan:
        workers = tuple(PlannedWorker(f"a40-{i}", int(total * fraction)) for i in range(7))
        return GpuPlan("GPU-x", "NVIDIA A40", total, 500 * MB, workers)

    assert plan(0.143).overcommitted
    assert not plan(0.13).overcommitted


def test_a_worker_that_would_overcommit_its_gpu_refuses_to_start_naming_the_others(
    settings: Any, queue: Any, db: Any
) -> None:
    live_worker(queue, "a40-1", 20 * GIB)
    live_worker(queue, "a40-2", 20 * GIB)
    live_worker(queue, "l4-1", 20 * GIB, uuid="GPU-another-gpu")  # another GPU: not counted
    settings.EVAL_GPU_MEMORY_FRACTION = 0.2  # 9.6 GB: 49.6 GB planned with the three contexts
    worker = EvaluationWorker([queue], connection=queue.connection, name="a40-3")

    with pytest.raises(SystemExit) as refused:
        worker.start_device()

    message = str(refused.value.code)
    assert message.startswith("worker a40-3 refuses to start: GPU memory plan for NVIDIA A40")
    assert "the shares of a40-1 (20,480 MiB), a40-2 (20,480 MiB) come to" in message
    assert "l4-1" not in message
    (state,) = [s for s in heartbeat.read_states(queue.connection) if s.name == "a40-3"]
    assert state.state == "stopped" and state.cuda_problem.startswith("GPU memory plan")


def test_a_worker_that_fits_takes_its_place_in_the_plan_shown_on_the_workers_page(
    settings: Any, queue: Any, db: Any
) -> None:
    live_worker(queue, "a40-1", 20 * GIB)
    settings.EVAL_GPU_MEMORY_FRACTION = 0.25  # 12 GB
    worker = EvaluationWorker([queue], connection=queue.connection, name="a40-2")

    worker.start_device()

    states = heartbeat.read_states(queue.connection)
    plan = plan_of(states, uuid=A40.uuid, gpu_name="NVIDIA A40", total=48 * GIB)
    assert [w.name for w in plan.workers] == ["a40-1", "a40-2"]
    assert plan.planned == 20 * GIB + 12 * GIB + 2 * 500 * MB and not plan.overcommitted
    page = Client().get("/workers/").content.decode()
    assert "memory plan: a40-1 20.0 GiB + a40-2 12.0 GiB" in page  # evaluation.formats.size
    assert "+ 2 × 500 MiB CUDA context" in page and "of 48.0 GiB" in page


def test_stale_workers_leave_the_plan(settings: Any, queue: Any, db: Any) -> None:
    live_worker(queue, "a40-gone", 40 * GIB)
    key = heartbeat.worker_key("a40-gone")
    queue.connection.hset(key, "last_heartbeat", time.time() - settings.EVAL_HEARTBEAT_STALE_S - 5)
    settings.EVAL_GPU_MEMORY_FRACTION = 0.5

    EvaluationWorker([queue], connection=queue.connection, name="a40-new").start_device()

    (state,) = [s for s in heartbeat.read_states(queue.connection) if s.name == "a40-new"]
    assert state.device == "cuda" and state.memory_share == 24 * GIB
