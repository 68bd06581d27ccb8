"""``manage.py gpu_check``: on this machine (no GPU) every GPU check is skipped with the reason.

The checks that need a working CUDA cannot pass here; what can run here runs for real: the
no-GPU mode, a host whose NVML sees a GPU (faked at ``evaluation.gpu._nvml``) but whose CUDA
libraries do not load (real), and the memory-limit check's two processes, which show that a
host where ``gpu_mem_limit`` does not apply (here: CPU fallback) fails it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from io import StringIO
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from django.core.management import CommandError, call_command

from evaluation.runner import CPU, DeviceConfig, EvaluationError
from tests.workers.fake_nvml import install
from workers.gpu_acceptance import (
    FAIL,
    PASS,
    SKIP,
    big_model,
    energy_check,
    memory_limit_check,
    sandbox_check,
    session_timings,
    sessions_check,
)

CHECKS = [
    "nvml", "cuda", "outputs digits", "outputs depth-448", "overhead digits",
    "overhead depth-448", "gpu_mem_limit", "sandbox", "sessions depth-448", "energy",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_pin_left_behind(monkeypatch: Any) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded, so restored (unset) afterwards
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "")  # recorded, so restored (unset) afterwards
    monkeypatch.delenv("CUDA_DEVICE_ORDER")


def gpu_check(*args: str) -> str:
    out = StringIO()
    call_command("gpu_check", *args, stdout=out)
    return out.getvalue()


def rows(output: str) -> dict[str, tuple[str, str]]:
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in output.splitlines()]
    return {c[0]: (c[1], c[2]) for c in cells if len(c) == 3 and c[0] in CHECKS}


def test_without_a_gpu_every_check_is_skipped_with_the_reason_and_it_exits_0() -> None:
    output = gpu_check()  # no exception: exit status 0

    found = rows(output)
    assert list(found) == CHECKS
    for status, detail in found.values():
        assert status == "skip"
        assert detail == "no GPU: no NVIDIA driver on this host (libnvidia-ml not found)"
    assert output.rstrip().endswith("0 passed, 10 skipped (" + ", ".join(CHECKS) + ").")


def test_without_a_gpu_but_required_it_fails() -> None:
    with pytest.raises(CommandError, match="--require-gpu, but these checks were skipped: nvml"):
        gpu_check("--require-gpu")


def test_a_gpu_whose_cuda_libraries_do_not_load_fails_naming_the_library(monkeypatch: Any) -> None:
    install(monkeypatch)  # NVML sees an A40; onnxruntime's CUDA libraries really do not load
    out = StringIO()

    with pytest.raises(CommandError, match="GPU check failed: cuda"):
        call_command("gpu_check", stdout=out)

    found = rows(out.getvalue())
    assert found["nvml"][0] == "pass" and "NVIDIA A40 GPU-5d5e2b8c" in found["nvml"][1]
    assert found["cuda"][0] == FAIL
    assert "libonnxruntime_providers_cuda.so could not be loaded" in found["cuda"][1]
    assert found["gpu_mem_limit"] == ("skip", "CUDA does not work (see the cuda check)")


def test_the_big_model_needs_more_than_the_share_it_is_given() -> None:
    session = ort.InferenceSession(big_model(megabytes=128), providers=[CPU])
    (out,) = session.run(None, {"x": np.ones(1, np.float32)})
    assert out.nbytes == 128 * 1_048_576


@pytest.mark.slow
def test_a_host_where_gpu_mem_limit_does_not_bind_fails_the_memory_check() -> None:
    from workers.runner_overhead import workloads

    digits, _ = workloads()
    # CUDA asked for, CPU what runs here: the limit does not bind, the big model (64 MiB over
    # the worker's share) runs, and the neighbour, evaluating throughout, is on the CPU.
    check = memory_limit_check(digits, DeviceConfig(use_cuda=True, gpu_mem_limit=64 << 20))

    assert check.status == FAIL
    assert re.fullmatch(
        "over its share: no error: the model ran although it needs more than its share"
        r"; beside it: ok: \d+ evaluations on CPUExecutionProvider",
        check.detail,
    ), check.detail


@pytest.mark.slow
def test_a_model_process_that_does_not_run_on_cuda_fails_the_sandbox_check() -> None:
    from workers.runner_overhead import workloads

    digits, _ = workloads()
    # CUDA asked for; onnxruntime here has no CUDA provider, so the model process runs on CPU.
    check = sandbox_check(digits, DeviceConfig(use_cuda=True, intra_op_threads=1))

    assert check == type(check)("sandbox", FAIL, "the model process ran on CPUExecutionProvider")


@pytest.mark.slow
def test_the_sessions_check_times_fresh_model_processes_and_holds_their_spread_to_5_percent() -> (
    None
):
    from workers.runner_overhead import workloads

    digits, _ = workloads()
    # The worker's model processes, on the CPU here; on a GPU host the same code runs on CUDA.
    timings = session_timings(digits, DeviceConfig(intra_op_threads=1), sessions=3)
    assert len(timings) == 3 and all(t.p50_ms > 0 for t in timings)
    steady = [replace(timings[0], p50_ms=p) for p in (0.145, 0.147, 0.149)]
    assert sessions_check("depth-448", steady).status == PASS
    apart = [replace(timings[0], p50_ms=p) for p in (0.145, 0.188, 0.181)]
    check = sessions_check("depth-448", apart)
    assert check.status == FAIL
    assert check.detail == (
        "p50 of 3 sessions 145 µs, 188 µs, 181 µs: they differ by 23.8 % (limit 5.0 %)"
    )
    # No GPU, no energy counter: skipped with the reason; with one, each session's figure.
    assert energy_check(timings, 32).status == SKIP
    measured = [replace(t, energy_per_batch_j=0.0128, average_power_w=182.0) for t in timings]
    assert energy_check(measured, 32) == type(check)(
        "energy", PASS, "400 µJ, 400 µJ, 400 µJ per sample; average power 182 W, 182 W, 182 W"
    )
    # CUDA asked for, the CPU what ran: no spread or energy of a GPU is claimed from it.
    with pytest.raises(EvaluationError, match="the model process ran on CPUExecutionProvider"):
        session_timings(digits, DeviceConfig(use_cuda=True, intra_op_threads=1), sessions=1)


def test_the_overhead_check_fails_where_the_session_runs_on_the_cpu_not_cuda(queue: Any) -> None:
    from workers.gpu_acceptance import overhead_check
    from workers.runner_overhead import workloads

    digits, _ = workloads()
    # CUDA asked for; onnxruntime here has no CUDA provider, so the session runs on the CPU and
    # its overhead, whatever it is, says nothing of a GPU's.
    check = overhead_check("digits", digits, DeviceConfig(use_cuda=True, intra_op_threads=1), 0)

    assert check.status == FAIL
    assert check.detail == "the session ran on CPUExecutionProvider, not CUDAExecutionProvider"


def test_an_overhead_row_whose_sides_made_different_calls_fails_the_check(
    monkeypatch: Any,
) -> None:
    """The measurement is made up here (provider named CUDA, nothing run): the check fails a
    figure whose runner and bare loop made different onnxruntime calls, however small, and
    passes one whose sides made the same call within the limit."""
    from workers import gpu_acceptance
    from workers.runner_overhead import workloads

    row: dict[str, object] = {
        "provider": "CUDAExecutionProvider",
        "runner_calls": {"run": 34},
        "bare_calls": {"run_with_iobinding": 34},
        "same_call": False,
        "same_predictions": True,
        "ratio": 0.9,
        "runner_ms": 0.9,
        "bare_ms": 1.0,
        "control": 1.0,
    }
    monkeypatch.setattr(gpu_acceptance, "measure", lambda work, device, budget_s: row)
    digits, _ = workloads()
    check = gpu_acceptance.overhead_check("digits", digits, DeviceConfig(use_cuda=True), 0)
    assert check.status == FAIL and "made different calls" in check.detail

    row.update(runner_calls={"run_with_iobinding": 34}, same_call=True, ratio=1.04)
    check = gpu_acceptance.overhead_check("digits", digits, DeviceConfig(use_cuda=True), 0)
    assert check.status == PASS
    assert check.detail.endswith("both 34 × run_with_iobinding)")
    row.update(ratio=1.06)
    assert gpu_acceptance.overhead_check("digits", digits, DeviceConfig(), 0).status == FAIL
