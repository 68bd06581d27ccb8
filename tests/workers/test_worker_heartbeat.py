"""The worker's heartbeat: what it publishes, the kept history, stale and stopped workers.

A real EvaluationWorker object on the real test Redis; NVML is faked at ``gpu._nvml()`` only.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import onnxruntime as ort
import pytest
from rq.exceptions import StopRequested

from queueing import heartbeat
from queueing.queues import online_classes
from submissions.lifecycle.services import submission_create
from tests.conftest import onnx_upload
from tests.workers.fake_nvml import GIB, install
from tests.workers.fleet_support import fast_model, nan_classifier
from workers.worker import EvaluationWorker

CUDA_BUILT = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture
def worker(queue: Any, db: Any) -> EvaluationWorker:
    return EvaluationWorker([queue], connection=queue.connection, name="hb-worker")


def state_of(queue: Any, name: str = "hb-worker") -> heartbeat.WorkerState:
    (state,) = [s for s in heartbeat.read_states(queue.connection) if s.name == name]
    return state


def test_a_heartbeat_carries_state_gpu_stats_and_this_workers_memory_share(
    monkeypatch: Any, settings: Any, worker: EvaluationWorker, queue: Any
) -> None:
    install(monkeypatch)
    settings.EVAL_GPU_MEMORY_FRACTION = 0.143  # one of seven workers sharing a 48 GB A40

    worker.publish_heartbeat(force=True)

    state = state_of(queue)
    assert state.state == "idle" and state.submission_id is None
    assert state.gpu["name"] == "NVIDIA A40" and state.gpu["memory_used"] == 12 * GIB
    assert state.gpu["processes"] == [{"pid": 4242, "used_memory": 6 * GIB}]
    assert state.host_stats["memory_total"] > 0
    assert heartbeat.is_online(state)
    if CUDA_BUILT:  # onnxruntime-gpu: the fake GPU makes this a CUDA worker
        assert state.device == "cuda"
        assert state.memory_share == int(48 * GIB * 0.143)
    else:
        assert state.device == "cpu" and state.memory_share is None


def test_without_a_gpu_the_heartbeat_reports_cpu_and_ram_and_why(
    worker: EvaluationWorker, queue: Any
) -> None:
    worker.publish_heartbeat(force=True)  # the real NVML: no driver on this machine

    state = state_of(queue)
    assert state.gpu is None and state.device == "cpu"
    assert "no NVIDIA driver" in state.no_gpu_reason
    assert state.host_stats["cpu_count"] >= 1 and state.host_stats["memory_used"] > 0


def test_the_history_is_capped_to_the_configured_window(
    monkeypatch: Any, settings: Any, worker: EvaluationWorker, queue: Any
) -> None:
    install(monkeypatch)
    settings.EVAL_HEARTBEAT_INTERVAL_S = 5.0
    settings.EVAL_HEARTBEAT_HISTORY_S = 60  # 12 samples + 10 spare
    for _ in range(30):
        worker._last_publish = 0.0  # as if an interval had passed
        worker.publish_heartbeat()

    history = heartbeat.read_history(queue.connection, ["hb-worker"], limit=1000)["hb-worker"]
    assert len(history) == 22 == heartbeat.history_length()
    assert history[-1]["util"] == 63 and history[-1]["temp"] == 71
    assert [s["t"] for s in history] == sorted(s["t"] for s in history)  # oldest first


def test_the_default_history_covers_at_least_an_hour(settings: Any) -> None:
    assert heartbeat.history_length() * settings.EVAL_HEARTBEAT_INTERVAL_S >= 3600


def test_heartbeats_are_throttled_to_the_interval_unless_forced(
    worker: EvaluationWorker, queue: Any
) -> None:
    worker.publish_heartbeat(force=True)
    worker.publish_heartbeat()
    worker.publish_heartbeat()

    assert queue.connection.llen(heartbeat.history_key("hb-worker")) == 1


def test_a_state_change_between_samples_is_published_at_once_without_reading_nvml_again(
    monkeypatch: Any, worker: EvaluationWorker, queue: Any
) -> None:
    nvml = install(monkeypatch)
    worker.publish_heartbeat(force=True)  # the first heartbeat: a sample, NVML read once
    readings = nvml.shutdowns

    worker.fleet_state.state = "busy"  # what execute_job publishes at a job's start and end
    worker.publish_heartbeat(force=True)

    state = state_of(queue)
    assert readings == 1 and nvml.shutdowns == readings
    assert state.state == "busy" and state.gpu["name"] == "NVIDIA A40"  # the sample's stats
    assert queue.connection.llen(heartbeat.history_key("hb-worker")) == 1


def test_a_worker_whose_heartbeat_is_stale_is_offline(
    settings: Any, worker: EvaluationWorker, queue: Any
) -> None:
    worker.publish_heartbeat(force=True)
    key = heartbeat.worker_key("hb-worker")
    queue.connection.hset(key, "last_heartbeat", time.time() - settings.EVAL_HEARTBEAT_STALE_S - 1)

    assert not heartbeat.is_online(state_of(queue))


def test_a_cleanly_stopped_worker_is_offline_at_once(worker: EvaluationWorker, queue: Any) -> None:
    worker.work(burst=True, with_scheduler=False)  # nothing queued: it starts and stops

    state = state_of(queue)
    assert state.state == "stopped" and not heartbeat.is_online(state)


def test_the_count_of_online_workers_per_class_agrees_with_their_states(
    settings: Any, queue: Any
) -> None:
    """Uploads ask how many workers of a class are online with one ZCOUNT; the fleet pages read
    every state. Both must tell the same through start, stop, staleness and two classes."""
    connection = queue.connection

    def state(name: str, classes: list[str], status: str = "idle") -> heartbeat.WorkerState:
        return heartbeat.WorkerState(
            name=name,
            host="h",
            pid=1,
            state=status,
            device="cpu",
            started_at=0.0,
            device_classes=classes,
        )

    def agree(now: float, expected: dict[str, int]) -> None:
        by_states = online_classes(connection, now=now)
        for device_class in ("cpu", "gpu", "none"):
            counted = heartbeat.online_in_class(connection, device_class, now=now)
            assert counted == by_states.get(device_class, 0) == expected.get(device_class, 0)

    now = time.time()
    heartbeat.publish(connection, state("a", ["cpu"]), now=now)
    heartbeat.publish(connection, state("b", ["cpu", "gpu"]), now=now)
    agree(now, {"cpu": 2, "gpu": 1})
    heartbeat.publish(connection, state("b", ["cpu", "gpu"], "stopped"), now=now + 1)
    agree(now + 1, {"cpu": 1})
    stale = now + settings.EVAL_HEARTBEAT_STALE_S + 0.5  # a's last heartbeat too old
    heartbeat.publish(connection, state("b", ["cpu", "gpu"], "busy"), now=stale)
    agree(stale, {"cpu": 1, "gpu": 1})
    later = now + heartbeat.FORGET_AFTER_S + 1  # a, silent for a day: dropped from the class
    heartbeat.publish(connection, state("b", ["cpu", "gpu"]), now=later)
    assert connection.zrange(heartbeat.class_key("cpu"), 0, -1) == [b"b"]


def test_a_broken_nvml_never_stops_the_heartbeat(
    monkeypatch: Any, worker: EvaluationWorker, queue: Any
) -> None:
    fake = install(monkeypatch)
    monkeypatch.setattr(fake, "nvmlDeviceGetMemoryInfo", lambda gpu: 1 / 0)

    worker.publish_heartbeat(force=True)

    state = state_of(queue)
    assert state.gpu is None and "could not read GPU" in state.gpu_problem


@pytest.mark.django_db(transaction=True)
def test_real_jobs_are_counted_in_the_heartbeat_and_a_burst_worker_ends_stopped(
    run_worker: Any, make_task: Any, alice: Any, queue: Any
) -> None:
    task = make_task()
    submission_create(user=alice, task=task, upload=onnx_upload(fast_model()))
    submission_create(user=alice, task=task, upload=onnx_upload(nan_classifier()))

    worker = run_worker()

    state = state_of(queue, worker.name)
    assert (state.jobs_done, state.jobs_failed) == (1, 1)
    assert state.state == "stopped"  # burst mode: the worker registered its death when done


@pytest.mark.django_db(transaction=True)
def test_the_worker_makes_no_session_its_model_processes_make_them(
    run_worker: Any,
    make_task: Any,
    alice: Any,
    queue: Any,
    monkeypatch: Any,
    tmp_path: Any,
    settings: Any,
) -> None:
    """A model parsed in the worker could read its secrets, and a CUDA context there would be
    inherited by the CUDA self-test's fork: every submission's session is made in its model
    process (evaluation.model_process), never here."""
    settings.EVAL_DEVICE = "cpu"  # this machine has no CUDA; the rule is the same
    record = tmp_path / "session-pids"
    original = ort.InferenceSession

    def recording(*args: Any, **kwargs: Any) -> Any:
        with record.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return original(*args, **kwargs)

    # Uploaded first: the upload's inspection makes sessions of its own, in this process.
    submission_create(user=alice, task=make_task(), upload=onnx_upload(fast_model()))
    monkeypatch.setattr(ort, "InferenceSession", recording)
    install(monkeypatch)  # a GPU in the heartbeats, so the parent reads NVML throughout

    worker = run_worker()  # in this process

    assert not record.exists(), record.read_text()
    assert state_of(queue, worker.name).jobs_done == 1


@pytest.mark.parametrize(
    "where", ["queueing.heartbeat.publish", "workers.recovery.reconcile_if_due"]
)
def test_a_shutdown_request_during_fleet_bookkeeping_is_not_swallowed(
    worker: EvaluationWorker, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # rq's SIGTERM handler raises StopRequested in whatever frame runs when the signal lands.
    # Bookkeeping that logs and carries on after errors must let it through, or `docker stop`
    # waits for the kill: a benchmark saw a worker ignore SIGTERM this way.
    def signal_lands_here(*args: Any, **kwargs: Any) -> None:
        raise StopRequested()

    monkeypatch.setattr(where, signal_lands_here)
    with pytest.raises(StopRequested):
        worker.publish_heartbeat(force=True)


def test_an_ordinary_error_while_publishing_is_logged_and_the_worker_goes_on(
    worker: EvaluationWorker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def redis_hiccup(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("Redis went away for a moment")

    monkeypatch.setattr("queueing.heartbeat.publish", redis_hiccup)
    with caplog.at_level(logging.ERROR, logger="workers.worker"):
        worker.publish_heartbeat(force=True)  # no exception: the next heartbeat tries again

    (record,) = [r for r in caplog.records if r.name == "workers.worker"]
    assert record.getMessage() == "worker hb-worker could not publish its heartbeat"
    assert record.exc_info is not None and "Redis went away" in str(record.exc_info[1])


def test_a_heartbeat_replaces_the_workers_state_in_one_transaction(
    worker: EvaluationWorker, queue: Any
) -> None:
    """A reader (the workers page, recovery) never finds a live worker's hash missing: every
    command on it runs inside MULTI/EXEC, as Redis itself reports them (MONITOR)."""
    key = heartbeat.worker_key(worker.name)
    worker.publish_heartbeat(force=True)
    db = queue.connection.connection_pool.connection_kwargs.get("db") or 0  # None: 0
    seen: list[tuple[str, bool]] = []  # (command, inside MULTI/EXEC)
    with queue.connection.monitor() as monitor:
        worker.publish_heartbeat(force=True)
        queue.connection.echo("end-of-heartbeat")
        in_transaction = False
        while True:
            entry = monitor.next_command()
            command = entry["command"]
            if "end-of-heartbeat" in command:
                break
            if int(entry["db"]) != db:
                continue  # other databases of a shared Redis
            name = command.split(" ")[0].upper()
            in_transaction = {"MULTI": True, "EXEC": False}.get(name, in_transaction)
            if key in command:
                seen.append((name, in_transaction))

    assert [name for name, _ in seen][:2] == ["DEL", "HSET"]
    assert all(inside for _, inside in seen), seen
