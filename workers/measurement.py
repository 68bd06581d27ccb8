"""What a job lends the pure runner to measure a model: the device's timing lock (and the scoring
phase's turn, which gives way to other workers' timings), the device's conditions while timed,
and the model process's peak memory.

Peak memory is the evaluation's own, measured in the model's process (``evaluation.sandbox``)
by the worker's job:

- CPU: that process's resident-set high-water mark (VmHWM), reset through its clear_refs just
  before the session is created, minus its resident set at that moment; so neither onnxruntime's
  libraries nor the inputs received before count. Where the kernel has no clear_refs, no peak
  is reported for another process (this process's own falls back to getrusage's ru_maxrss).
- GPU: the device memory NVML reports for that process (usedGpuMemory: the CUDA context
  and onnxruntime's arena). It is read at the start and end of the timing phase; onnxruntime's
  BFC arena keeps what it has grown to for the life of the session, so the reading after every
  row was scored and every timed batch run is the peak. A worker in its own PID namespace (as in
  compose and Kubernetes) sees other PIDs than the driver's, so NVML does not list its model
  process: there the peak is the device's used memory now less what it was before the model
  process started (``device_before``), counted only when NVML lists exactly one compute process
  more than then (the model process; anyone else's allocations would be counted too), else None.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import resource
from collections.abc import Iterator
from typing import Any

import psutil
from django.conf import settings

from evaluation.gpu import gpu_facts, gpu_sample
from evaluation.runner import DeviceConfig
from evaluation.timing import ScoringGate, TimingHooks
from queueing.queues import evaluation_redis
from workers.device import nvml_target
from workers.device_lock import ScoringTurn, device_lock, device_lock_key

_RESET_PEAK_RSS = "5"  # proc(5): "5" resets the peak resident set size ("high water mark")


def _status_bytes(field: str, proc: str = "/proc/self") -> int | None:
    try:
        with open(f"{proc}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    return None


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


class CpuPeak:
    """The resident memory process ``pid`` (None: this one) adds from now on, at its highest."""

    def __init__(self, pid: int | None = None) -> None:
        proc = f"/proc/{pid}" if pid is not None else "/proc/self"
        try:
            with open(f"{proc}/clear_refs", "w") as clear_refs:
                clear_refs.write(_RESET_PEAK_RSS)
            self.baseline = _status_bytes("VmRSS", proc) or 0
            self.read_peak = lambda: _status_bytes("VmHWM", proc) or 0
        except OSError:
            if pid is not None:  # another process's ru_maxrss cannot be read: no peak
                self.baseline, self.read_peak = 0, lambda: 0
                return
            self.baseline = _max_rss_bytes()
            self.read_peak = _max_rss_bytes

    def added_bytes(self) -> int:
        return max(0, self.read_peak() - self.baseline)


@functools.cache
def cpu_facts() -> dict[str, Any]:
    """The host's CPU, read once per process (``platform.processor()`` runs ``uname -p`` in a
    subprocess): the worker reads it at start. Callers copy it before adding to it."""
    model = platform.processor()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
        model = names[0] if names else model
    return {"cpu_model": model, "logical_cpus": psutil.cpu_count() or 1}


def _cpu_sample() -> dict[str, Any]:
    freq = psutil.cpu_freq()
    return {
        "cpu_mhz": round(freq.current) if freq else None,
        "load_1m": round(os.getloadavg()[0], 2),
    }


class Measurement:
    """Built by the job for one evaluation; ``hooks`` go to the runner."""

    def __init__(
        self,
        device: DeviceConfig,
        *,
        lock_wait_s: float,
        device_class: str = "",
        pid: int | None = None,
        device_before: dict[str, Any] | None = None,
    ) -> None:
        """``pid``: the process whose memory is the evaluation's (its model process); None for
        this one. ``device_before``: the GPU's ``device_use`` before that process started."""
        self.device = device
        self.pid = pid
        self.device_before = device_before or {}
        self.wait_s = lock_wait_s
        self.gpu_index, self.gpu_uuid = nvml_target()  # the one device rule: the pinned GPU
        self.gpu_memory: int | None = None
        facts = gpu_facts(self.gpu_index, self.gpu_uuid) if device.use_cuda else dict(cpu_facts())
        # The class the task is timed on (cpu, gpu, a40, ...); the device kind when none is given.
        facts["device_class"] = device_class or ("cuda" if device.use_cuda else "cpu")
        self.facts = facts
        self.lock_key = device_lock_key(gpu_uuid=facts.get("gpu_uuid") or self.gpu_uuid)
        self.cpu_peak: CpuPeak | None = None
        self.start_peak()

    def start_peak(self) -> None:
        """Count the CPU memory peak from now on (just before the model's session is created)."""
        self.cpu_peak = CpuPeak(self.pid) if not self.device.use_cuda else None

    @contextlib.contextmanager
    def lock(self) -> Iterator[bool]:
        connection = evaluation_redis()
        with device_lock(
            connection,
            self.lock_key,
            wait_s=self.wait_s,
            ttl_s=settings.EVAL_TIMING_LOCK_TTL_S,
        ) as held:
            yield held

    @contextlib.contextmanager
    def scoring(self) -> Iterator[ScoringGate]:
        """The scoring phase's turn on the device: it gives way to other workers' timings."""
        with ScoringTurn(
            evaluation_redis(), self.lock_key, ttl_s=settings.EVAL_TIMING_LOCK_TTL_S
        ) as turn:
            yield turn

    def observe(self) -> dict[str, Any]:
        if not self.device.use_cuda:
            return _cpu_sample()
        sample = gpu_sample(self.gpu_index, self.gpu_uuid, pid=self.pid or os.getpid())
        used = sample.pop("process_memory_bytes", None)
        device_used = sample.pop("device_memory_used_bytes", None)
        processes = sample.pop("compute_processes", None)
        if used is None:
            used = self._added_to_device(device_used, processes)
        if used is not None:
            self.gpu_memory = max(self.gpu_memory or 0, used)
        return sample

    def _added_to_device(self, used: int | None, processes: int | None) -> int | None:
        """What the device's used memory gained since the model process started, when it is the
        one compute process more NVML lists."""
        before = self.device_before
        used_before = before.get("device_memory_used_bytes")
        processes_before = before.get("compute_processes")
        if used is None or used_before is None or processes_before is None or processes is None:
            return None
        if processes != processes_before + 1:
            return None
        return max(0, used - used_before)

    def hooks(self) -> TimingHooks:
        return TimingHooks(
            lock=self.lock, observe=self.observe, facts=self.facts, scoring=self.scoring
        )

    def peak_memory_bytes(self) -> int | None:
        if self.cpu_peak is not None:
            return self.cpu_peak.added_bytes()
        return self.gpu_memory
