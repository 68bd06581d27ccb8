"""The model process server (evaluation.model_server) on its own: real processes, no worker. A
model process it forks is confined as one started from a fresh interpreter, runs a model the
same, and its end reaches the worker; the server takes its children with it when it goes."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from evaluation.model_server import ForkedProcess, ModelServer, ServerUnavailable
from evaluation.runner import DeviceConfig, create_session, run_model
from evaluation.sandbox import ModelProcess, ModelProcessDied, SandboxSettings, start_server
from evaluation.timing import TimingHooks
from tests.builders import DIGITS_SPEC, linear_classifier

DEVICE = DeviceConfig(intra_op_threads=1, warmup_runs=1, cpu_memory_limit_bytes=1 << 30)


@pytest.fixture
def sandbox(tmp_path: Path) -> SandboxSettings:
    return SandboxSettings(scratch_root=str(tmp_path), allow_test_hook=True)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ModelServer]:
    started = start_server(str(tmp_path))
    yield started
    started.stop()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_forked_model_process_is_confined_as_a_started_one(
    server: ModelServer, sandbox: SandboxSettings
) -> None:
    forked, started = ModelProcess(sandbox, DEVICE, server), ModelProcess(sandbox, DEVICE)
    try:
        mine, theirs = forked.wait_ready(), started.wait_ready()
        assert isinstance(forked.process, ForkedProcess)
        assert psutil.Process(forked.pid).ppid() == server.process.pid
        assert (
            mine.active()
            == theirs.active()
            == [
                "no_new_privs",
                "seccomp",
                "landlock",
                "netns",
                "rlimits",
            ]
        )
        assert mine.missing == theirs.missing
        assert set(mine.limits) == set(theirs.limits)
        for name in ("cpu_seconds", "open_files", "file_size_bytes", "core_bytes"):
            assert mine.limits[name] == theirs.limits[name]
        # The same address-space limit: onnxruntime, mapped already, counts as it would.
        difference = mine.limits["address_space_bytes"] - theirs.limits["address_space_bytes"]
        assert abs(difference) < 16 << 20
        # Nothing of the server's but the channel, stderr and what confinement holds open.
        assert len(os.listdir(f"/proc/{forked.pid}/fd")) == len(
            os.listdir(f"/proc/{started.pid}/fd")
        )
        assert Path(f"/proc/{forked.pid}/cwd").resolve() == Path(forked.scratch).resolve()
    finally:
        forked.stop()
        started.stop()


def test_a_forked_model_process_predicts_what_a_run_here_does(
    server: ModelServer, sandbox: SandboxSettings
) -> None:
    rng = np.random.default_rng(3)
    model = linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))
    inputs = rng.normal(size=(37, 1, 8, 8)).astype(np.float32)
    process = ModelProcess(sandbox, DEVICE, server)
    try:
        outcome = process.evaluate(model, inputs, DIGITS_SPEC, DEVICE, hooks=TimingHooks())
    finally:
        process.stop()
    here = run_model(create_session(model, DEVICE), inputs, DIGITS_SPEC, DEVICE)
    assert np.array_equal(outcome.run.preds, here.preds)
    assert process.process.returncode is not None and _gone(process.pid)


def test_a_killed_model_process_says_so_through_the_server(
    server: ModelServer, sandbox: SandboxSettings
) -> None:
    process = ModelProcess(sandbox, DEVICE, server)
    try:
        process.wait_ready()
        process.kill()
        with pytest.raises(ModelProcessDied) as died:
            process.evaluate(
                b"model",
                np.zeros((1, 1, 8, 8), np.float32),
                DIGITS_SPEC,
                DEVICE,
                hooks=TimingHooks(),
            )
    finally:
        process.stop()
    assert died.value.returncode == -signal.SIGKILL
    assert "killed by signal SIGKILL" in str(died.value)


def test_the_model_processes_end_with_their_server(
    server: ModelServer, sandbox: SandboxSettings
) -> None:
    process = ModelProcess(sandbox, DEVICE, server)
    process.wait_ready()
    server.process.kill()
    process.process.wait(timeout=10)
    assert not process.alive() and _gone(process.pid)
    with pytest.raises(ServerUnavailable):
        ModelProcess(sandbox, DEVICE, server)
    process.stop()


def test_stopping_the_server_stops_what_it_forked(
    server: ModelServer, sandbox: SandboxSettings, tmp_path: Path
) -> None:
    processes = [ModelProcess(sandbox, DEVICE, server) for _ in range(2)]
    processes[0].wait_ready()
    server.stop()
    assert server.process.returncode == 0
    assert all(_gone(p.pid) for p in processes)
    for process in processes:
        process.stop()
    assert list(tmp_path.iterdir()) == []


def test_the_server_forks_nothing_while_it_runs_a_thread(tmp_path: Path) -> None:
    """Fork copies one thread: what the others hold stays locked in the child. A server started
    without ORT_DISABLE_TELEMETRY has onnxruntime's telemetry thread, and refuses."""
    from evaluation.sandbox import _die_with_parent, _environment

    env = {k: v for k, v in _environment(str(tmp_path)).items() if k != "ORT_DISABLE_TELEMETRY"}
    threaded = ModelServer(env, str(tmp_path), _die_with_parent)
    sandbox = SandboxSettings(scratch_root=str(tmp_path))
    try:
        with pytest.raises(ServerUnavailable, match="threads"):
            ModelProcess(sandbox, DEVICE, threaded)
        assert list(tmp_path.glob("model-*")) == []  # its scratch directory went with it
    finally:
        threaded.stop()
    assert threaded.process.returncode == 0
