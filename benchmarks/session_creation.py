"""Session creation in a fresh work horse against a ready one (issue 12: "12.8 ms versus 2.4 ms").

Each sample forks this (Django-configured) process, as rq forks a horse, and times
``evaluation.runner.create_session`` of the digits-sized linear model with the worker's session
options. ``fresh``: the child creates its first session, as a horse forked for a job does.
``ready``: the child first runs ``evaluation.ready_horse.warm_up``, as a ready horse does while its
worker is idle. The rounds alternate the two, so drift in machine load falls on both.

The difference is onnxruntime's per-process set-up (its environment, the CPU provider and the
default thread pool), paid by the first session a process creates; a child forked from a process
that had already made a session inherits most of it, which is why a bare forked child looked cheap.

Run: ``python -m benchmarks.session_creation`` (with the settings ``make bench`` uses); with
``--cuda`` the sessions are CUDA ones, so a fresh horse also pays for the CUDA context and the
libraries' set-up, which a ready horse does while its worker is idle.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace


def _one(warm: bool, model: bytes, use_cuda: bool) -> float:
    from evaluation import ready_horse
    from evaluation.device import device_config
    from evaluation.runner import create_session

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the horse
        try:
            device = replace(device_config("session-bench"), use_cuda=use_cuda)
            if warm:
                ready_horse.warm_up(task_id=None, device=device)
            started = time.perf_counter()
            create_session(model, device)
            os.write(write, f"{(time.perf_counter() - started) * 1000:.4f}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        return float(f.read())


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

    model = next(
        b.onnx_bytes
        for b in baselines.digits_baselines(datasets.load_digits_train())
        if b.name == "logistic-regression"
    )
    medians: dict[bool, list[float]] = {False: [], True: []}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for warm in (False, True):
            samples = [_one(warm, model, args.cuda) for _ in range(args.samples)]
            medians[warm].append(statistics.median(samples))
    fresh, ready = (statistics.median(medians[w]) for w in (False, True))
    where = "CUDA" if args.cuda else "CPU"
    print(f"| session creation (digits model, {where}) | median of round medians | rounds |")
    print("|---|---|---|")
    for name, warm, value in (("fresh horse", False, fresh), ("ready horse", True, ready)):
        rounds = ", ".join(f"{m:.2f}" for m in medians[warm])
        print(f"| {name} | {value:.2f} ms | {rounds} |")
    print(
        f"\nratio fresh/ready {fresh / ready:.1f}×; load average {load_before:.2f} → "
        f"{os.getloadavg()[0]:.2f}; {args.samples} forks per kind and round"
    )


if __name__ == "__main__":
    main()
