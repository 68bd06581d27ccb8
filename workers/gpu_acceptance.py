"""The GPU acceptance check (``manage.py gpu_check``): is this host's GPU path what it says?

Run first on a new GPU host, with the worker's environment (EVAL_GPU_UUID or EVAL_GPU_INDEX,
EVAL_GPU_MEMORY_FRACTION). Each check passes, fails, or is skipped with the reason:

- ``nvml``: NVML reads this worker's own GPU by UUID (name, memory, utilisation, temperature);
- ``cuda``: the CUDA self-test: a session on the pinned GPU really runs on CUDA;
- ``outputs <task>``: on both demo tasks, the CUDA predictions equal the CPU ones within
  ``|cuda - cpu| <= ATOL + RTOL * |cpu|`` (cuDNN's algorithm choice allowed for; TF32 is not:
  the workers turn it off, EVAL_CUDA_TF32, and with it on the digits outputs failed this check
  on an H200, docs/benchmarks.md), and the scores agree within SCORE_TOLERANCE (relative);
- ``overhead <task>``: the runner's loop, as a worker runs it, against a bare IOBinding loop on
  the same session: both on CUDA, making the same onnxruntime call as often, with the same
  predictions, the runner at most MAX_OVERHEAD (workers/runner_overhead.py measures it);
- ``gpu_mem_limit``: a model needing more than the worker's share (its gpu_mem_limit) fails with
  the out-of-memory message naming that share, while another process on the same GPU, as a
  second worker evaluating from before until after, keeps evaluating on CUDA;
- ``sandbox``: the digits model in a confined model process (docs/security.md), as a worker runs
  it, on CUDA with the predictions of a session made here; the detail lists its protections.
- ``sessions depth-448``: the depth conv model timed in SESSIONS fresh model processes, as a
  worker's further timing sessions are: their p50s within MAX_SESSION_SPREAD of each other
  ((max - min) / median), with the worker's cuDNN options;
- ``energy``: the same sessions' energy per sample from NVML's energy counter (skipped with the
  reason on a GPU without one).

This process may initialise CUDA: it is not a worker.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from evaluation import formats
from evaluation.gpu import GpuReading, gpu_reading, gpu_sample
from evaluation.runner import (
    CUDA,
    DeviceConfig,
    EvaluationError,
    create_session,
    evaluate_session,
    out_of_memory_error,
    predict,
)
from evaluation.selftest import run_selftest
from evaluation.timing import Timing, TimingHooks, combine_sessions
from workers import sandboxing
from workers.device import device_config, pin_cuda, this_gpu_pin
from workers.runner_overhead import Workload, measure, shown, workloads

ATOL, RTOL = 1e-3, 1e-2
SCORE_TOLERANCE = 1e-3
MAX_OVERHEAD = 1.05
SHARE_FOR_OOM = 64 * 1_048_576  # the small share the memory-limit check gives its big model
SESSIONS = 5
MAX_SESSION_SPREAD = 0.05
PASS, FAIL, SKIP = "pass", "FAIL", "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str


def nvml_check(reading: GpuReading) -> Check:
    if reading.gpu is None:
        status = FAIL if reading.problem else SKIP
        return Check("nvml", status, reading.problem or f"no GPU: {reading.no_gpu_reason}")
    again = gpu_reading(None, reading.gpu.uuid).gpu  # by UUID, as the worker reads it
    if again is None or again.uuid != reading.gpu.uuid:
        return Check("nvml", FAIL, f"NVML cannot find {reading.gpu.uuid} by UUID")
    missing = [k for k in ("utilization_gpu", "temperature_c") if getattr(again, k) is None]
    detail = (
        f"{again.name} {again.uuid}: {again.memory_used / 2**30:.1f} of "
        f"{again.memory_total / 2**30:.1f} GiB used, {again.utilization_gpu}% busy, "
        f"{again.temperature_c} °C"
    )
    return Check(
        "nvml", FAIL if missing else PASS, detail + (f"; missing {missing}" if missing else "")
    )


def outputs_check(name: str, work: Workload, cuda: DeviceConfig) -> Check:
    cpu = replace(cuda, use_cuda=False, gpu_mem_limit=None)
    on_cpu, on_cuda = create_session(work.model, cpu), create_session(work.model, cuda)
    if on_cuda.get_providers()[0] != CUDA:
        return Check(f"outputs {name}", FAIL, f"session ran on {on_cuda.get_providers()[0]}")
    inputs = work.data.inputs.astype(work.spec.input_dtype)
    want = predict(on_cpu, inputs, work.spec, cpu)
    got = predict(on_cuda, inputs, work.spec, cuda)
    worst = float(np.max(np.abs(got - want) - RTOL * np.abs(want)))
    score_cpu = evaluate_session(on_cpu, work.data, work.spec, cpu).score
    score_cuda = evaluate_session(on_cuda, work.data, work.spec, cuda).score
    agree = abs((score_cuda or 0) - (score_cpu or 0)) <= SCORE_TOLERANCE * max(
        1, abs(score_cpu or 0)
    )
    ok = worst <= ATOL and agree
    detail = (
        f"max(|cuda-cpu| - {RTOL:g}|cpu|) = {worst:.2e} (limit {ATOL:g}); "
        f"score cpu {score_cpu:.6g}, cuda {score_cuda:.6g}"
    )
    return Check(f"outputs {name}", PASS if ok else FAIL, detail)


def overhead_check(name: str, work: Workload, cuda: DeviceConfig, budget_s: float) -> Check:
    """The runner as a worker runs it against a bare IOBinding loop: it passes only when both
    ran on CUDA, made the same onnxruntime call as often, gave the same predictions, and the
    runner took at most MAX_OVERHEAD of the bare loop's time."""
    row = measure(work, cuda, budget_s)
    unshown = shown(row, provider=CUDA)  # a CPU's overhead says nothing of the GPU's
    if unshown is not None:
        return Check(f"overhead {name}", FAIL, unshown)
    ratio = float(row["ratio"])  # type: ignore[arg-type]
    detail = (
        f"runner {row['runner_ms']:.2f} ms / bare IOBinding loop {row['bare_ms']:.2f} ms = "
        f"{ratio:.3f}× (limit {MAX_OVERHEAD}×; noise control {row['control']:.3f}×; "
        f"both {_calls(row['bare_calls'])})"
    )
    return Check(f"overhead {name}", PASS if ratio <= MAX_OVERHEAD else FAIL, detail)


def _calls(counted: object) -> str:
    return ", ".join(f"{n} × {method}" for method, n in dict(counted).items())  # type: ignore[call-overload]


def sandbox_check(work: Workload, cuda: DeviceConfig) -> Check:
    """The digits model in a confined model process, as a worker runs it: on CUDA, with the
    predictions of a session made here, and the protections the process got."""
    started = time.perf_counter()
    process = sandboxing.model_process(cuda)
    try:
        protections = process.wait_ready()
        ready_s = time.perf_counter() - started
        inputs = work.data.inputs.astype(work.spec.input_dtype)
        outcome = process.evaluate(work.model, inputs, work.spec, cuda, hooks=TimingHooks())
    except Exception as exc:
        return Check("sandbox", FAIL, f"the model process failed: {exc}")
    finally:
        process.stop()
    if outcome.run.provider != CUDA:
        return Check("sandbox", FAIL, f"the model process ran on {outcome.run.provider}")
    want = predict(create_session(work.model, cuda), inputs, work.spec, cuda)
    worst = float(np.max(np.abs(outcome.run.preds - want) - RTOL * np.abs(want)))
    detail = (
        f"ready in {ready_s:.2f} s with {', '.join(protections.active()) or 'no protection'}"
        f"{'; missing: ' + '; '.join(protections.missing) if protections.missing else ''}; "
        f"max(|sandbox-here| - {RTOL:g}|here|) = {worst:.2e}"
    )
    return Check("sandbox", PASS if worst <= ATOL else FAIL, detail)


def session_timings(work: Workload, cuda: DeviceConfig, sessions: int = SESSIONS) -> list[Timing]:
    """The model timed in ``sessions`` fresh model processes, one after another, each on one
    batch, the device's readings (energy counter included) taken at the timed passes' ends."""
    pin = this_gpu_pin()
    hooks = TimingHooks(observe=lambda: gpu_sample(pin.index, pin.uuid))
    batch = work.data.inputs[: work.spec.batch_size].astype(work.spec.input_dtype)
    timings = []
    for _ in range(sessions):
        process = sandboxing.model_process(cuda)
        try:
            run = process.evaluate(work.model, batch, work.spec, cuda, hooks=hooks).run
        finally:
            process.stop()
        if cuda.use_cuda and run.provider != CUDA:  # a CPU's spread says nothing of the GPU's
            raise EvaluationError(f"the model process ran on {run.provider}")
        timings.append(run.timing)
    return timings


def sessions_check(name: str, timings: list[Timing]) -> Check:
    combined = combine_sessions(timings)
    spread = combined.session_spread or 0.0
    detail = (
        f"p50 of {len(timings)} sessions "
        f"{', '.join(formats.latency(t.p50_ms) for t in timings)}: they differ by "
        f"{formats.relative(spread)} (limit {formats.relative(MAX_SESSION_SPREAD)})"
    )
    return Check(f"sessions {name}", PASS if spread <= MAX_SESSION_SPREAD else FAIL, detail)


def energy_check(timings: list[Timing], batch_size: int) -> Check:
    per_batch = [t.energy_per_batch_j for t in timings]
    if any(j is None for j in per_batch):
        return Check("energy", SKIP, "NVML has no energy counter for this GPU (before Volta)")
    joules = [j / batch_size for j in per_batch if j is not None]
    watts = [t.average_power_w for t in timings if t.average_power_w is not None]
    detail = (
        f"{', '.join(formats.energy(j) for j in joules)} per sample; average power "
        f"{', '.join(formats.power(w) for w in watts)}"
    )
    return Check("energy", PASS if all(j > 0 for j in joules) else FAIL, detail)


def big_model(megabytes: int = 256) -> bytes:
    """y = Expand(x, [n]) with n floats: a model that needs ``megabytes`` for one output."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = numpy_helper.from_array(np.array([megabytes * 262_144], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])], "big", [x], [y], [shape]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def _over_share(device: DeviceConfig, neighbour_busy: Any, done: Any, answer: Any) -> None:
    """In a process of its own, while the neighbour evaluates: run a model that needs more than
    this worker's share under that share; the error it gives."""
    try:
        share_mib = (device.gpu_mem_limit or 0) // 1_048_576
        session = create_session(big_model(share_mib + 256), device)
        neighbour_busy.wait(timeout=300)
        session.run(None, {"x": np.ones(1, np.float32)})
        answer.put("no error: the model ran although it needs more than its share")
    except EvaluationError as exc:
        answer.put(str(exc))
    except Exception as exc:  # onnxruntime's own exception types
        oom = out_of_memory_error(exc, device)
        answer.put(str(oom) if oom is not None else f"not an out-of-memory error: {exc}")
    finally:
        done.set()


def _keeps_serving(work: Workload, device: DeviceConfig, busy: Any, done: Any, answer: Any) -> None:
    """A second worker's evaluations on the same GPU, from before the model over its share runs
    until after it failed: how many, and on which provider."""
    try:
        session = create_session(work.model, device)
        evaluate_session(session, work.data, work.spec, device)
        busy.set()
        runs = 1
        while not done.is_set() or runs < 5:
            evaluate_session(session, work.data, work.spec, device)
            runs += 1
        answer.put(f"ok: {runs} evaluations on {session.get_providers()[0]}")
    except Exception as exc:
        answer.put(f"failed: {exc}")
    finally:
        busy.set()


def memory_limit_check(work: Workload, cuda: DeviceConfig) -> Check:
    """The worker's own share (``gpu_mem_limit``): a model needing more than it fails with the
    arena limit's message naming that share, while a second process on the same GPU, started
    first and evaluating throughout, keeps evaluating on CUDA."""
    spawn = multiprocessing.get_context("spawn")  # fresh CUDA contexts, as two workers have
    small = cuda if cuda.gpu_mem_limit else replace(cuda, gpu_mem_limit=SHARE_FOR_OOM)
    over, serving = spawn.Queue(), spawn.Queue()
    busy, done = spawn.Event(), spawn.Event()
    procs = [
        spawn.Process(target=_keeps_serving, args=(work, cuda, busy, done, serving)),
        spawn.Process(target=_over_share, args=(small, busy, done, over)),
    ]
    for p in procs:
        p.start()
    failed, served = over.get(timeout=600), serving.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    share = f"limit of {(small.gpu_mem_limit or 0) // 1_048_576} MiB"
    ok = (
        failed.startswith("The model ran out of memory")
        and share in failed
        and served.startswith("ok")
        and served.endswith(f"on {CUDA}")
    )
    return Check(
        "gpu_mem_limit", PASS if ok else FAIL, f"over its share: {failed}; beside it: {served}"
    )


def run_checks(
    *, budget_s: float = 10.0, report: Callable[[Check], None] = lambda c: None
) -> list[Check]:
    """Every check in order; those that need a working CUDA are skipped when it does not work."""
    checks: list[Check] = []

    def add(check: Check) -> None:
        checks.append(check)
        report(check)

    pin = this_gpu_pin()
    reading = gpu_reading(pin.index, pin.uuid)
    add(nvml_check(reading))
    names = [
        "cuda",
        "outputs digits",
        "outputs depth-448",
        "overhead digits",
        "overhead depth-448",
        "gpu_mem_limit",
        "sandbox",
        "sessions depth-448",
        "energy",
    ]
    if reading.gpu is None:
        for name in names:
            add(Check(name, SKIP, f"no GPU: {reading.problem or reading.no_gpu_reason}"))
        return checks
    pin_cuda(pin)
    selftest = run_selftest(device_id=pin.cuda_device_id)
    add(
        Check(
            "cuda",
            PASS if selftest.ok else FAIL,
            selftest.problem or f"session ran on {selftest.provider}",
        )
    )
    if not selftest.ok:
        for name in names[1:]:
            add(Check(name, SKIP, "CUDA does not work (see the cuda check)"))
        return checks
    cuda = replace(device_config("gpu-check"), use_cuda=True, device_id=pin.cuda_device_id)
    digits, depth = workloads()
    for name, work in (("digits", digits), ("depth-448", depth)):
        add(outputs_check(name, work, cuda))
    for name, work in (("digits", digits), ("depth-448", depth)):
        add(overhead_check(name, work, cuda, budget_s))
    add(memory_limit_check(digits, cuda))
    add(sandbox_check(digits, cuda))
    try:
        timings = session_timings(depth, cuda)
    except Exception as exc:
        for name in names[-2:]:
            add(Check(name, FAIL, f"a model process failed: {exc}"))
        return checks
    add(sessions_check("depth-448", timings))
    add(energy_check(timings, depth.spec.batch_size))
    return checks
