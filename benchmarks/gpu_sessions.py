"""Between-session latency on a GPU, by cuDNN algorithm-search mode; energy and device memory.

What issue 41 chooses its settings from, on a GPU host:

- For each model (the demo's digits logistic regression and 3x3 conv depth model, and ResNet-50
  at batch 8 from the architecture fixture with random weights) and each ``cudnn_conv_algo_search``
  mode, ``--sessions`` fresh processes each create a session, warm up and run the timing protocol
  as a worker does (``evaluation.runner.time_model``, default protocol). The figure per mode is
  the spread of the sessions' p50s, (max - min) / median, beside the median p50 and the session's
  creation time (the algorithm search happens there and in the first runs).
- Energy: each process reads NVML's total energy counter before and after its timed passes (the
  ``observe`` seam the worker uses for clocks) and samples ``nvmlDeviceGetPowerUsage`` in a
  thread over the same passes; the two integrals are printed side by side with the idle power
  read before the session and how often the counter changed.
- Device memory: the device's used memory (``nvmlDeviceGetMemoryInfo``) and the process's own
  (per-process ``usedGpuMemory``) after the warm-up model (the CUDA context and libraries), after
  the session and after timing: whether "used memory minus the warmed process's" gives what the
  per-process reading gives, on a host where both work.
- Precision: from each session's kept batch times, how many timed batches the p50's 95 %
  confidence interval (order statistics) needed to fall within +-1 % and +-2 %.

Run: ``python -m benchmarks.gpu_sessions [--sessions 5] [--models digits,depth,resnet50]
[--modes EXHAUSTIVE,EXHAUSTIVE+prefer_nhwc=1] [--validate-energy 3]``: a mode may add CUDA
provider options to compare; ``--cpu`` runs the same on the CPU provider (to try the script where
there is no GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

MODES = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
FIXTURE = "tests/evaluation/architectures/resnet50.legacy.onnx"


def _model(name: str) -> tuple[bytes, np.ndarray, Any]:
    from workers.runner_overhead import _spec, workloads

    if name == "resnet50":
        import onnx
        from onnx import numpy_helper

        model = onnx.load(FIXTURE)
        rng = np.random.default_rng(0)
        for index, tensor in enumerate(model.graph.initializer):
            if not tensor.raw_data and not tensor.float_data and not tensor.int64_data:
                values = rng.normal(0, 0.02, tuple(tensor.dims)).astype(np.float32)
                filled = numpy_helper.from_array(values, tensor.name)
                model.graph.initializer[index].CopyFrom(filled)
        spec = _spec(
            {
                "batch_size": 8,
                "input_shape": [3, 224, 224],
                "output_shape": [1000],
                "metric": "accuracy",
            }
        )
        batch = rng.normal(0, 1, (8, 3, 224, 224)).astype(np.float32)
        return model.SerializeToString(), batch, spec
    work = {w.name.split()[0]: w for w in workloads()}[name]
    batch = np.ascontiguousarray(
        work.data.inputs[: work.spec.batch_size].astype(work.spec.input_dtype)
    )
    return work.model, batch, work.spec


def _nvml() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:
        return None, None


def _read(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def _memory(nvml: Any, handle: Any) -> dict[str, Any]:
    if nvml is None:
        return {}
    used = _read(nvml.nvmlDeviceGetMemoryInfo, handle)
    processes = _read(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    mine = [p.usedGpuMemory for p in processes if p.pid == os.getpid()]
    return {"device_used": used.used if used else None, "process": mine[0] if mine else None}


class PowerSampler:
    """Power every ``interval`` s in a thread, and when the energy counter changed."""

    def __init__(self, nvml: Any, handle: Any, interval: float = 0.005) -> None:
        self.nvml, self.handle, self.interval = nvml, handle, interval
        self.samples: list[tuple[float, float]] = []
        self.counter_changes: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def _power_mw(self) -> Any:
        """The instantaneous power where NVML has the field (nvmlDeviceGetPowerUsage is a
        one-second average on recent GPUs, which lags a change of load), else that average."""
        field = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is not None:
            values = _read(self.nvml.nvmlDeviceGetFieldValues, self.handle, [field])
            if values and values[0].nvmlReturn == 0:
                return values[0].value.uiVal
        return _read(self.nvml.nvmlDeviceGetPowerUsage, self.handle)

    def _work(self) -> None:
        last = None
        while not self._stop.is_set():
            now = time.perf_counter()
            power = self._power_mw()
            energy = _read(self.nvml.nvmlDeviceGetTotalEnergyConsumption, self.handle)
            if power is not None:
                self.samples.append((now, power / 1000.0))
            if energy is not None and energy != last:
                if last is not None:
                    self.counter_changes.append(now)
                last = energy
            time.sleep(self.interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def joules(self, start: float, end: float) -> float | None:
        inside = [(t, w) for t, w in self.samples if start <= t <= end]
        if len(inside) < 2:
            return None
        times = np.array([t for t, _ in inside])
        watts = np.array([w for _, w in inside])
        return float(np.trapezoid(watts, times) * (end - start) / (times[-1] - times[0]))


def _needed(ms: list[float], within: float) -> int | None:
    """The first n (of the kept batch times, in order) at which the p50's 95 % order-statistic
    interval lies within +-``within`` of the p50."""
    for n in range(20, len(ms) + 1, 5):
        values = sorted(ms[:n])
        half = 1.96 * math.sqrt(n) / 2
        lo, hi = values[max(0, int(n / 2 - half))], values[min(n - 1, math.ceil(n / 2 + half))]
        p50 = values[n // 2]
        if p50 > 0 and (hi - lo) / 2 / p50 <= within:
            return n
    return None


def _with_options(extra: dict[str, str]) -> None:
    """The CUDA provider's options plus ``extra`` (a variant to compare), for this process."""
    from evaluation.runner import DeviceConfig

    providers = DeviceConfig.providers

    def patched(self: Any) -> list[Any]:
        chosen = providers(self)
        if extra and isinstance(chosen[0], tuple):
            chosen[0] = (chosen[0][0], {**chosen[0][1], **extra})
        return chosen

    DeviceConfig.providers = patched  # type: ignore[method-assign]


def _validate_energy(nvml: Any, handle: Any, run: Any, seconds: float) -> dict[str, Any]:
    """The counter against instantaneous power integrated over ``seconds`` of batches."""
    sampler = PowerSampler(nvml, handle, interval=0.002)
    sampler.start()
    time.sleep(0.05)
    t0, e0 = time.perf_counter(), nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    while time.perf_counter() - t0 < seconds:
        run()
    t1, e1 = time.perf_counter(), nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    sampler.stop()
    return {
        "seconds": t1 - t0,
        "counter_j": (e1 - e0) / 1000,
        "instant_power_integral_j": sampler.joules(t0, t1),
        "counter_changes": len([t for t in sampler.counter_changes if t0 <= t <= t1]),
    }


def child(name: str, variant: str, use_cuda: bool, validate_s: float) -> dict[str, Any]:
    from evaluation.limits import TimeLimit
    from evaluation.runner import DeviceConfig, _Executor, create_session, time_model
    from evaluation.timing import TimingHooks
    from evaluation.warm_up import warm_up_model

    mode, *pairs = variant.split("+")
    _with_options(dict(pair.split("=", 1) for pair in pairs))
    nvml, handle = _nvml() if use_cuda else (None, None)
    device = DeviceConfig(use_cuda=use_cuda, cudnn_conv_algo_search=mode, device_name="GPU 0")
    result: dict[str, Any] = {"model": name, "mode": variant, "memory": {}}
    result["memory"]["start"] = _memory(nvml, handle)
    idle = [_read(nvml.nvmlDeviceGetPowerUsage, handle) for _ in range(5)] if nvml else []
    result["idle_w"] = statistics.median(idle) / 1000 if idle and None not in idle else None
    warm_bytes, warm_input = warm_up_model(device)
    warm = create_session(warm_bytes, device)
    warm.run(None, {warm.get_inputs()[0].name: warm_input})
    result["memory"]["warmed"] = _memory(nvml, handle)
    model, batch, spec = _model(name)
    began = time.perf_counter()
    session = create_session(model, device)
    result["create_s"] = time.perf_counter() - began
    result["provider"] = session.get_providers()[0]
    result["memory"]["session"] = _memory(nvml, handle)
    sampler = PowerSampler(nvml, handle) if nvml else None
    marks: list[tuple[float, Any]] = []

    def observe() -> dict[str, Any]:
        energy = _read(nvml.nvmlDeviceGetTotalEnergyConsumption, handle) if nvml else None
        marks.append((time.perf_counter(), energy))
        return {}

    if sampler:
        sampler.start()
    began = time.perf_counter()
    timing = time_model(session, batch, spec, device, TimingHooks(observe=observe))
    result["phase_s"] = time.perf_counter() - began
    if sampler:
        sampler.stop()
    result["memory"]["timed"] = _memory(nvml, handle)
    result.update(
        p50_ms=timing.p50_ms,
        spread=timing.spread,
        batches=timing.batches,
        duration_s=timing.duration_s,
        held_s=timing.held_s,
        needed_1pct=_needed(timing.kept_batches_ms, 0.01),
        needed_2pct=_needed(timing.kept_batches_ms, 0.02),
        kept=len(timing.kept_batches_ms),
    )
    if sampler and len(marks) == 2 and marks[0][1] is not None and marks[1][1] is not None:
        (t0, e0), (t1, e1) = marks
        samples = timing.batches
        result["energy"] = {
            "counter_j": (e1 - e0) / 1000,
            "power_integral_j": sampler.joules(t0, t1),
            "seconds": t1 - t0,
            "j_per_sample_counter": (e1 - e0) / 1000 / (samples * spec.batch_size),
            "counter_changes": len([t for t in sampler.counter_changes if t0 <= t <= t1]),
            "power_samples": len([1 for t, _ in sampler.samples if t0 <= t <= t1]),
        }
    if validate_s and nvml is not None:
        executor = _Executor(session, TimeLimit(600), device)
        run = executor.timed_group(batch)(1)
        result["validation"] = _validate_energy(nvml, handle, run, validate_s)
    return result


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--models", default="digits,depth,resnet50")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument(
        "--validate-energy",
        type=float,
        default=0.0,
        metavar="S",
        help="in each model's first session: the energy counter against instantaneous power "
        "integrated over S seconds of batches",
    )
    parser.add_argument("--json", help="write every session's result here")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], not args.cpu, args.validate_energy)))
        return
    everything = []
    for name in args.models.split(","):
        # The digits model has no convolution: the search mode cannot matter, one is enough.
        modes = ["DEFAULT"] if name == "digits" else args.modes.split(",")  # MODE[+option=value]
        for mode in modes:
            runs = []
            for index in range(args.sessions):
                command = [sys.executable, "-m", "benchmarks.gpu_sessions", "--child", name, mode]
                command += ["--cpu"] if args.cpu else []
                if index == 0 and args.validate_energy:
                    command += ["--validate-energy", str(args.validate_energy)]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode:
                    print(f"{name} {mode}: session failed: {done.stderr[-800:]}", flush=True)
                    continue
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            everything += runs
            if not runs:
                continue
            p50s = [r["p50_ms"] for r in runs]
            line = (
                f"{name:9} {mode:10} {runs[0]['provider']:22} p50 median "
                f"{statistics.median(p50s) * 1000:9.1f} us  between sessions "
                f"{_spread(p50s) * 100:5.1f} %  ({', '.join(f'{p * 1000:.1f}' for p in p50s)})"
                f"  create {statistics.median(r['create_s'] for r in runs):.2f} s  phase "
                f"{statistics.median(r['phase_s'] for r in runs):.2f} s  device held "
                f"{sum(r['held_s'] for r in runs):.2f} s in all  in-session spread "
                f"{statistics.median(r['spread'] for r in runs) * 100:.2f} %  batches for "
                f"+-1 %: {[r['needed_1pct'] for r in runs]}, +-2 %: "
                f"{[r['needed_2pct'] for r in runs]}"
                f" of {runs[0]['kept']} kept"
            )
            print(line, flush=True)
            for r in runs:
                if "validation" in r:
                    v = r["validation"]
                    print(
                        f"    energy check over {v['seconds']:.2f} s: counter "
                        f"{v['counter_j']:.2f} J, instantaneous power integrated "
                        f"{v['instant_power_integral_j'] or 0:.2f} J (counter changed "
                        f"{v['counter_changes']}x)",
                        flush=True,
                    )
                if "energy" in r:
                    e = r["energy"]
                    print(
                        f"    energy counter {e['counter_j']:.3f} J, power integral "
                        f"{e['power_integral_j'] or 0:.3f} J over {e['seconds']:.2f} s (idle "
                        f"{r['idle_w']} W; counter changed {e['counter_changes']}x, "
                        f"{e['power_samples']} power samples); "
                        f"{e['j_per_sample_counter'] * 1e3:.4f} mJ/sample",
                        flush=True,
                    )
                print(f"    memory {r['memory']}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(everything, out, indent=1)


if __name__ == "__main__":
    main()
