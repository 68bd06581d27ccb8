"""What a worker that starts its next model process ahead (``EVAL_START_AHEAD``) takes off a
job: starting a model process (exec, confinement, onnxruntime's set-up) and its warm-up run (on
a GPU the CUDA context and a model of convolutions and matrix products that loads cuBLAS and
cuDNN), timed as ``workers.sandboxing.prepare_ahead`` does them, with the worker's settings.

Each sample starts one model process, waits until it is ready, and stops it: wall time and the
CPU time of the process (from its exit). A worker whose model process was started ahead pays
none of this when its job arrives; one without pays all of it.

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


def _one(use_cuda: bool) -> tuple[float, float]:
    """(wall ms, CPU ms) from starting a model process to its being ready."""
    from workers import sandboxing
    from workers.device import device_config

    device = replace(device_config("start-bench"), use_cuda=use_cuda)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    sandboxing.prepare_ahead(device)
    ready = time.perf_counter()
    sandboxing.stop_spare()  # reaped: its CPU time is counted now
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return (ready - started) * 1000, cpu * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10, help="model processes per round")
    parser.add_argument("--cuda", action="store_true", help="model processes on GPU 0")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    where = "CUDA" if args.cuda else "CPU"
    load_before = os.getloadavg()[0]
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(args.rounds):
        samples = [_one(args.cuda) for _ in range(args.samples)]
        walls.append(statistics.median(s[0] for s in samples))
        cpus.append(statistics.median(s[1] for s in samples))
    print(f"| {where}: model process start to ready | median of round medians | rounds |")
    print("|---|---|---|")
    print(f"| wall | {statistics.median(walls):.1f} ms | {', '.join(f'{m:.1f}' for m in walls)} |")
    print(f"| CPU | {statistics.median(cpus):.1f} ms | {', '.join(f'{m:.1f}' for m in cpus)} |")
    print(
        f"\nload average {load_before:.2f} → {os.getloadavg()[0]:.2f}; "
        f"{args.samples} model processes per round"
    )


if __name__ == "__main__":
    main()
