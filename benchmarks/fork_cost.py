"""What a fork costs the process that forks: the worker, which forks a work horse for every job.

Two measures, on the database the settings name (migrated first):

- the ``os.fork()`` call itself, in this process once Django and the evaluation modules are
  loaded, the child leaving at once (medians of ``--forks``); a fork copies the parent's page
  tables, so it grows with the parent's memory;
- the same piece of a worker's work after each job (five claim-shaped UPDATEs that match no row
  and five reads of tasks with their device class, through the ORM) timed in CPU and counted in
  minor page faults: with no fork before it, right after a fork whose child is still alive (every
  page written is copied for the parent), and right after a fork whose child has already exited
  (the pages are the parent's alone again, but each first write still faults to make its page
  writable). Medians of ``--rounds`` in each of two passes.

A worker that forks for every job pays the second measure on all its own work between two forks:
the claim, the result's save, the board upkeep, rq's bookkeeping. Run:
``python -m benchmarks.fork_cost`` (DATABASE_URL for PostgreSQL; SQLite by default).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.cpu_account import minor_faults


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    for module in ("workers.jobs", "workers.worker"):  # what a worker has loaded
        importlib.import_module(module)


def _anon_mb() -> int:
    with open("/proc/self/status") as status:
        line = next(row for row in status if row.startswith("RssAnon"))
    return int(line.split()[1]) // 1024


def fork_ms(count: int) -> float:
    """Median milliseconds of ``os.fork()`` in this process, the child exiting at once."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        samples.append((time.perf_counter() - start) * 1000)
        os.waitpid(pid, 0)
    return statistics.median(samples)


def worker_like_work() -> None:
    """A worker's kind of work between two jobs: ORM statements built and run."""
    from django.db.models import F
    from django.utils import timezone

    from submissions.models import Submission, Task

    for _ in range(5):
        Submission.objects.filter(pk=-1, status="queued").update(
            status="running",
            started_at=timezone.now(),
            worker_name="fork-cost",
            progress=0.0,
            attempts=F("attempts") + 1,
        )
        list(Task.objects.select_related("device_class")[:5])


def _one(mode: str, work: Callable[[], None]) -> tuple[float, int]:
    """CPU milliseconds and minor faults of ``work`` after the given kind of fork."""
    child = None
    if mode != "no fork":
        child = os.fork()
        if child == 0:
            if mode == "child alive":
                time.sleep(60)  # killed once the parent has measured
            os._exit(0)
        if mode == "child exited":
            os.waitpid(child, 0)
            child = None
    faults, cpu = minor_faults(os.getpid()), time.process_time()
    work()
    result = (time.process_time() - cpu) * 1000, minor_faults(os.getpid()) - faults
    if child is not None:
        os.kill(child, 9)
        os.waitpid(child, 0)
    return result


MODES = ("no fork", "child alive", "child exited")


def after_fork(rounds: int, work: Callable[[], None] = worker_like_work) -> dict[str, Any]:
    """Per mode: each pass's median CPU ms and minor faults of ``work``, two passes interleaved."""
    work()  # connections opened, statements' first compilation done
    result: dict[str, Any] = {mode: {"cpu_ms": [], "faults": []} for mode in MODES}
    for _ in range(2):
        for mode in MODES:
            samples = [_one(mode, work) for _ in range(rounds)]
            result[mode]["cpu_ms"].append(statistics.median(s[0] for s in samples))
            result[mode]["faults"].append(statistics.median(s[1] for s in samples))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    _setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    fork, anon_mb = fork_ms(args.forks), _anon_mb()
    measured = after_fork(args.rounds)
    print(f"os.fork() of this process ({anon_mb} MB anonymous memory): {fork:.2f} ms")
    print("\n| the work after | CPU, ms (two passes) | minor faults |")
    print("|---|---|---|")
    for mode in MODES:
        cpu = ", ".join(f"{v:.2f}" for v in measured[mode]["cpu_ms"])
        faults = ", ".join(f"{v:.0f}" for v in measured[mode]["faults"])
        print(f"| {mode} | {cpu} | {faults} |")
    return {"fork_ms": fork, "anon_mb": anon_mb, **measured}


if __name__ == "__main__":
    main()
