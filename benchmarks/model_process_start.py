"""What a worker that starts its next model process ahead (``EVAL_START_AHEAD``) takes off a
job: starting a model process (exec, or a fork of the model process server with
``EVAL_MODEL_SERVER``; confinement, onnxruntime's set-up) and its warm-up run (on a GPU the CUDA
context and a model of convolutions and matrix products that loads cuBLAS and cuDNN), timed as
``workers.sandboxing.prepare_ahead`` does them, with the worker's settings.

Each sample starts one model process, waits until it is ready, and stops it: wall time, and CPU
time per model process over a round (the model processes', the server's, this process's own:
the worker's side of a start). The two ways to start one alternate, sample by sample, so both
see the same load; the server is started before the first sample (once per worker, not per
job). A worker whose model process was started ahead pays none of this when its job arrives;
one without pays all of it.

Run: ``python -m benchmarks.model_process_start`` (with the settings ``make bench`` uses); with
``--cuda`` the model processes use GPU 0 (``benchmarks/gpu_figures.sh``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from dataclasses import replace
from typing import Any

WAYS = {"exec": False, "fork server": True}


def _cpu_s(server: int | None) -> float:
    """CPU time of this process, its reaped children, and the server with its reaped children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    if server is not None:
        with open(f"/proc/{server}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def _one(device: Any, use_server: bool) -> tuple[float, float]:
    """(wall ms, CPU s) from starting a model process to its being ready, and stopping it."""
    from django.conf import settings

    from workers import sandboxing

    settings.EVAL_MODEL_SERVER = use_server
    server = sandboxing.server_pid()
    before = _cpu_s(server)
    started = time.perf_counter()
    sandboxing.prepare_ahead(device)
    ready = time.perf_counter()
    sandboxing.stop_spare()  # reaped: its CPU time is counted now
    return (ready - started) * 1000, _cpu_s(server) - before


def _round(device: Any, samples: int) -> dict[str, tuple[float, float]]:
    """Per way: (median wall ms, CPU ms per model process)."""
    walls: dict[str, list[float]] = {way: [] for way in WAYS}
    cpus: dict[str, float] = dict.fromkeys(WAYS, 0.0)
    for _ in range(samples):
        for way, use_server in WAYS.items():
            wall, cpu = _one(device, use_server)
            walls[way].append(wall)
            cpus[way] += cpu
    return {way: (statistics.median(walls[way]), cpus[way] * 1000 / samples) for way in WAYS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10, help="model processes per round")
    parser.add_argument("--cuda", action="store_true", help="model processes on GPU 0")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from workers import sandboxing
    from workers.device import device_config

    device = replace(device_config("start-bench"), use_cuda=args.cuda)
    where = "CUDA" if args.cuda else "CPU"
    _one(device, True)  # the server started, its imports not counted
    if sandboxing.server_pid() is None:
        raise SystemExit("the model process server did not start")
    load_before = os.getloadavg()[0]
    rounds = [_round(device, args.samples) for _ in range(args.rounds)]
    sandboxing.stop_server()
    print(f"| {where}: model process start to ready | median over rounds | rounds |")
    print("|---|---|---|")
    for way in WAYS:
        for i, what in enumerate(("wall", "CPU per process")):
            values = [r[way][i] for r in rounds]
            listed = ", ".join(f"{v:.1f}" for v in values)
            print(f"| {way}: {what} | {statistics.median(values):.1f} ms | {listed} |")
    print(
        f"\nload average {load_before:.2f} → {os.getloadavg()[0]:.2f}; {args.samples} model "
        "processes per way per round, the ways alternated"
    )


if __name__ == "__main__":
    main()
