"""Session creation and first run in a fresh work horse against a ready one (issue 12 found a
horse's session several times dearer than a bare forked child's).

Each sample forks this (Django-configured) process, as rq forks a horse, and times
``evaluation.runner.create_session`` with the worker's session options, then the session's first
run of one batch at the task's batch size, for two demo models: the digits logistic regression (a
Gemm) and the depth 3x3 conv. ``fresh``: the child creates its first session, as a horse forked
for a job does. ``ready``: the child first runs ``workers.ready_horse.warm_up``, as a ready
horse does while its worker is idle. The rounds alternate the two, so drift in machine load falls
on both.

The difference in session creation is onnxruntime's per-process set-up (its environment, the CPU
provider and the default thread pool; on a GPU the CUDA context), paid by the first session a
process creates; a child forked from a process that had already made a session inherits most of
it, which is why a bare forked child looked cheap. On a GPU the first run also loads cuBLAS or
cuDNN, which the ready horse's warm-up model does ahead.

Run: ``python -m benchmarks.session_creation`` (with the settings ``make bench`` uses); with
``--cuda`` the sessions are CUDA ones (``benchmarks/gpu_figures.sh``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

NOT_ON_CUDA = b"not-on-cuda"


def _one(warm: bool, model: bytes, batch_size: int, use_cuda: bool) -> tuple[float, float]:
    """(session creation, the session's first run of one batch) in ms, in a new fork."""
    import numpy as np

    from evaluation.runner import create_session
    from workers import ready_horse
    from workers.device import device_config

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the horse
        try:
            device = replace(device_config("session-bench"), use_cuda=use_cuda)
            if warm:
                ready_horse.warm_up(task=None, device=device)
            started = time.perf_counter()
            session = create_session(model, device)
            created = time.perf_counter()
            if use_cuda and session.get_providers()[0] != "CUDAExecutionProvider":
                os.write(write, NOT_ON_CUDA)  # onnxruntime fell back to its CPU provider
                os._exit(0)
            given = session.get_inputs()[0]
            shape = [d if isinstance(d, int) else batch_size for d in given.shape]
            inputs = np.zeros(shape, np.float32)
            ran = time.perf_counter()
            session.run(None, {given.name: inputs})
            done = time.perf_counter()
            os.write(write, f"{(created - started) * 1000:.4f} {(done - ran) * 1000:.4f}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        said = f.read()
    if said.encode() == NOT_ON_CUDA:
        raise SystemExit("--cuda, but the session fell back to the CPU provider: no usable GPU")
    create, first_run = said.split()
    return float(create), float(first_run)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=30, help="forks per kind and round")
    parser.add_argument("--cuda", action="store_true", help="sessions on GPU 0 (CUDA provider)")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from submissions.demo import baselines, datasets
    from submissions.demo.tasks import TASKS

    digits = baselines.digits_baselines(datasets.load_digits_train())
    workloads = [
        (
            "digits logistic regression (Gemm)",
            next(b.onnx_bytes for b in digits if b.name == "logistic-regression"),
            TASKS["digits"]["batch_size"],
        ),
        (
            "depth 3×3 conv",
            next(b.onnx_bytes for b in baselines.depth_baselines() if b.name == "conv-3x3"),
            TASKS["depth-448"]["batch_size"],
        ),
    ]
    where = "CUDA" if args.cuda else "CPU"
    load_before = os.getloadavg()[0]
    print(
        f"| {where}: model, horse | session creation (median of round medians) | rounds "
        "| first run of one batch | rounds |"
    )
    print("|---|---|---|---|---|")
    for title, model, batch_size in workloads:
        created: dict[bool, list[float]] = {False: [], True: []}
        first_runs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for warm in (False, True):
                samples = [_one(warm, model, batch_size, args.cuda) for _ in range(args.samples)]
                created[warm].append(statistics.median(s[0] for s in samples))
                first_runs[warm].append(statistics.median(s[1] for s in samples))
        for name, warm in (("fresh", False), ("ready", True)):
            print(
                f"| {title}, batch {batch_size}, {name} "
                f"| {statistics.median(created[warm]):.2f} ms "
                f"| {', '.join(f'{m:.2f}' for m in created[warm])} "
                f"| {statistics.median(first_runs[warm]):.2f} ms "
                f"| {', '.join(f'{m:.2f}' for m in first_runs[warm])} |"
            )
    print(
        f"\nload average {load_before:.2f} → {os.getloadavg()[0]:.2f}; "
        f"{args.samples} forks per model, kind and round"
    )


if __name__ == "__main__":
    main()
