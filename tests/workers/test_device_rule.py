"""The one device rule and the CUDA self-test at worker start.

This machine has no GPU but has onnxruntime-gpu, whose CUDA libraries do not load here: the
"library missing" outcome is real. A GPU is faked only at the two boundaries: NVML
(``evaluation.gpu._nvml``) and the providers a session really got
(``evaluation.selftest.session_providers``).
"""

from __future__ import annotations

import logging
import os
import subprocess
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from evaluation.runner import CPU, CUDA
from evaluation.selftest import classify, explain, run_selftest
from queueing import heartbeat
from tests.workers.fake_nvml import GIB, FakeGpu, FakeNvml, install
from tests.workers.fleet_support import BASE_DIR, worker_env
from workers.device import device_config, gpu_pin
from workers.worker import EvaluationWorker, worker_command

FIRST = FakeGpu(index=0, uuid="GPU-aaaaaaaa-0000-4000-8000-000000000000", name="NVIDIA A40")
SECOND = FakeGpu(
    index=1, uuid="GPU-bbbbbbbb-0000-4000-8000-000000000000", name="NVIDIA L4",
    memory_total=24 * GIB,
)  # fmt: skip
ORT_FALLBACK_LOG = (
    "\x1b[1;31m2026-11-23 [E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] "
    "FAIL : Failed to load library /venv/onnxruntime/capi/libonnxruntime_providers_cuda.so with "
    "error: libcudnn.so.9: cannot open shared object file: No such file or directory\n\x1b[m"
    "\x1b[0;93m2026-11-23 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:1295 "
    "CreateExecutionProviderFactoryInstance] Failed to create CUDAExecutionProvider. Require "
    "cuDNN 9.* and CUDA 13.*.\x1b[m\n"
)


@pytest.fixture(autouse=True)
def _fresh_process_state(monkeypatch: Any) -> None:
    """What a worker sets for its lineage (CUDA pin, self-test outcome) is undone after a test."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded, so restored (unset) afterwards
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "")  # recorded, so restored (unset) afterwards
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    monkeypatch.setattr("workers.device._selftest_problem", None)


@pytest.fixture
def two_gpus(monkeypatch: Any, settings: Any) -> FakeNvml:
    settings.EVAL_DEVICE = "auto"
    settings.EVAL_GPU_MEMORY_BYTES = 0
    settings.EVAL_GPU_MEMORY_FRACTION = 0.5
    return install(monkeypatch, FakeNvml(FIRST, SECOND))


def cuda_works(monkeypatch: Any) -> None:
    """The provider boundary: sessions say they run on CUDA, as on a working GPU host."""
    monkeypatch.setattr("evaluation.selftest.session_providers", lambda session: [CUDA, CPU])


def new_worker(queue: Any, name: str = "dev-worker") -> EvaluationWorker:
    return EvaluationWorker([queue], connection=queue.connection, name=name)


def state_of(queue: Any, name: str = "dev-worker") -> heartbeat.WorkerState:
    (state,) = [s for s in heartbeat.read_states(queue.connection) if s.name == name]
    return state


def test_a_uuid_pins_the_same_gpu_for_cuda_as_for_nvml() -> None:
    pin = gpu_pin(uuid=SECOND.uuid, index=0, environ={})
    assert pin.uuid == SECOND.uuid
    assert pin.cuda_environment == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": SECOND.uuid,  # CUDA accepts a GPU UUID as a device name
    }
    assert pin.cuda_device_id == 0  # the only device CUDA sees


def test_an_index_pins_the_gpu_nvidia_smi_counts_as_that_index() -> None:
    pin = gpu_pin(uuid="", index=1, environ={})
    assert pin.uuid is None and pin.index == 1
    assert pin.cuda_environment == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}


def test_a_preset_cuda_visible_devices_naming_another_gpu_is_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="CUDA_VISIBLE_DEVICES=2,3 names other GPUs"):
        gpu_pin(uuid=SECOND.uuid, index=0, environ={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert gpu_pin(uuid="", index=2, environ={"CUDA_VISIBLE_DEVICES": "2"}).index == 2


def test_a_worker_pinned_by_uuid_reads_runs_and_reports_that_one_gpu(
    monkeypatch: Any, settings: Any, two_gpus: FakeNvml, queue: Any, db: Any
) -> None:
    # The old worker read NVML by EVAL_GPU_UUID but ran sessions on CUDA ordinal EVAL_GPU_INDEX.
    settings.EVAL_GPU_UUID, settings.EVAL_GPU_INDEX = SECOND.uuid, 0
    cuda_works(monkeypatch)
    worker = new_worker(queue)

    worker.start_device()

    assert os.environ["CUDA_VISIBLE_DEVICES"] == SECOND.uuid  # what its model processes inherit
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    device = device_config("dev-worker")  # as its job builds it
    assert device.use_cuda and device.device_id == 0 and device.device_name == "NVIDIA L4"
    assert device.gpu_mem_limit == 12 * GIB  # half of the L4, not of the A40
    state = state_of(queue)
    assert state.gpu["uuid"] == SECOND.uuid and state.device == "cuda"
    assert state.memory_share == 12 * GIB and state.cuda_problem == ""


def test_the_self_test_reports_a_cuda_library_that_does_not_load() -> None:
    result = run_selftest()  # real onnxruntime-gpu, real CUDA EP loading, in a forked child
    if result.ok:
        pytest.skip("CUDA works on this machine")
    assert result.provider == CPU
    assert "libonnxruntime_providers_cuda.so could not be loaded" in result.problem
    assert "cannot open shared object file" in result.problem


def test_the_self_test_passes_when_the_session_really_runs_on_cuda(monkeypatch: Any) -> None:
    cuda_works(monkeypatch)
    result = run_selftest()
    assert result.ok and result.provider == CUDA and result.problem == ""


def test_a_session_that_runs_on_another_provider_fails_the_self_test(monkeypatch: Any) -> None:
    monkeypatch.setattr("evaluation.selftest.session_providers", lambda session: [CPU])
    assert not run_selftest().ok
    wrong = classify([CPU], "", "")
    assert wrong.problem == (
        "CUDA self-test: the session ran on CPUExecutionProvider, not CUDA: "
        "onnxruntime gave no reason"
    )
    missing = classify([CPU], ORT_FALLBACK_LOG, "")
    assert missing.problem.endswith(
        "libonnxruntime_providers_cuda.so could not be loaded: libcudnn.so.9: cannot open "
        "shared object file: No such file or directory"
    )
    assert explain("[W:onnxruntime:x] Failed to create CUDAExecutionProvider.") == (
        "Failed to create CUDAExecutionProvider."
    )


def test_with_auto_a_failed_self_test_makes_a_cpu_worker_that_says_why(
    settings: Any, two_gpus: FakeNvml, queue: Any, db: Any, caplog: Any
) -> None:
    settings.EVAL_CPU_MEMORY_LIMIT_MB = 2048
    worker = new_worker(queue)
    assert worker.device_classes == ["gpu"]  # NVML sees a GPU and onnxruntime lists CUDA

    with caplog.at_level(logging.ERROR, logger="workers.worker"):
        worker.start_device()  # the real self-test: CUDA libraries missing here
    worker.publish_heartbeat(force=True)

    # It now takes CPU-class jobs only: a GPU-class submission waits for a worker that has CUDA.
    assert worker.device_classes == ["cpu"]
    assert worker.queue_names() == [settings.EVALUATION_QUEUE]

    assert "could not be loaded" in caplog.text  # logged at error level
    state = state_of(queue)
    assert state.device == "cpu" and state.memory_share is None
    assert "libonnxruntime_providers_cuda.so could not be loaded" in state.cuda_problem
    device = device_config("dev-worker")  # what its job gets: CPU, with the CPU memory limit
    assert not device.use_cuda and device.cpu_memory_limit_bytes == 2048 * 1_048_576
    card = APIClient().get("/api/workers/").json()["workers"][0]
    assert card["device"] == "cpu" and card["cuda_problem"] == state.cuda_problem
    assert any(w.startswith("Not using CUDA: CUDA self-test") for w in card["warnings"])


def test_with_cuda_required_a_failed_self_test_refuses_to_start(
    settings: Any, two_gpus: FakeNvml, queue: Any, db: Any
) -> None:
    settings.EVAL_DEVICE = "cuda"
    worker = new_worker(queue)

    with pytest.raises(SystemExit, match="refuses to start: EVAL_DEVICE=cuda, but CUDA does not"):
        worker.start_device()

    state = state_of(queue)
    assert state.state == "stopped" and "could not be loaded" in state.cuda_problem
    (warning,) = APIClient().get("/api/workers/").json()["workers"][0]["warnings"]
    assert warning.startswith("Refused to start: EVAL_DEVICE=cuda, but CUDA does not work here")


def test_a_cuda_only_worker_process_exits_non_zero_with_the_reason(
    transactional_db: Any, queue: Any, tmp_path: Any
) -> None:
    done = subprocess.run(
        worker_command("must-have-cuda", burst=True),
        cwd=BASE_DIR,
        env=worker_env({"EVAL_DEVICE": "cuda"}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 0:
        pytest.skip("CUDA works on this machine")
    assert "worker must-have-cuda refuses to start: EVAL_DEVICE=cuda" in done.stderr
    assert "could not be loaded" in done.stderr
    assert not queue.connection.exists("rq:worker:must-have-cuda")  # it never registered


def test_a_worker_whose_environment_shows_cuda_other_gpus_refuses_to_start(
    monkeypatch: Any, settings: Any, two_gpus: FakeNvml, queue: Any, db: Any
) -> None:
    settings.EVAL_GPU_UUID = SECOND.uuid
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the first GPU, while NVML reads the second
    cuda_works(monkeypatch)

    with pytest.raises(SystemExit, match="CUDA_VISIBLE_DEVICES=0 names other GPUs than EVAL_GPU_"):
        new_worker(queue).start_device()
