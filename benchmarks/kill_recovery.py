"""After ``kill -9`` of a worker mid-evaluation: how long until the submission runs again?

Everything is real: ``manage.py rqworker`` processes with the EvaluationWorker class, the
configured database and Redis, a real slow model (a Loop of MatMuls) on the demo's digits task.
Each run submits one model, waits until a worker is evaluating it, SIGKILLs that worker
and measures the seconds until the submission is ``running`` again (attempt 2):

- ``peer``: two workers; the survivor takes it over once recovery proves the dead one gone
  (heartbeat stale after EVAL_HEARTBEAT_STALE_S, recovery every EVAL_RECOVERY_INTERVAL_S);
- ``restart``: one worker, restarted at once under the same name (as Docker's restart policy
  does); it clears its dead registration and recovers its own submission on start.

It prints the median and the worst of ``--runs`` runs per mode, with the intervals used
(production defaults unless ``--fast``). Run it against a database and Redis nothing else uses:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench REDIS_URL=redis://127.0.0.1:6379/9 \\
        SECRET_KEY=x .venv/bin/python -m benchmarks.kill_recovery --runs 10
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import queue_latency

ROOT = Path(__file__).resolve().parent.parent
FAST = {"EVAL_HEARTBEAT_INTERVAL_S": "0.5", "EVAL_HEARTBEAT_STALE_S": "3"}
FAST_RECOVERY = {"EVAL_RECOVERY_INTERVAL_S": "1"}


class Fleet:
    """Named worker processes; every one still running is stopped on exit (Ctrl-C included)."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> None:
        from workers.worker import worker_command

        log = (self.log_dir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            worker_command(name), cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait(what: str, check: Any, timeout_s: float = 300) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def one_run(fleet: Fleet, client: Any, task: Any, model: bytes, mode: str) -> float:
    from submissions.models import Submission

    (variant,) = queue_latency._variants(model, 1)
    pk = queue_latency._submit(client, task, variant)

    def evaluating() -> str | None:
        row = Submission.objects.filter(pk=pk).values("status", "progress", "worker_name").get()
        return row["worker_name"] if row["status"] == "running" and row["progress"] > 0 else None

    name = _wait("a worker evaluating", evaluating)
    fleet.kill(name)
    killed = time.perf_counter()
    if mode == "restart":
        fleet.start(name)
    _wait(
        "running again",
        lambda: (
            Submission.objects.filter(pk=pk, attempts=2, status="running").exists()
            or Submission.objects.filter(pk=pk, attempts=2, status="succeeded").exists()
        ),
    )
    seconds = time.perf_counter() - killed
    queue_latency._wait_scored([pk])
    if mode == "peer":
        fleet.start(name)  # back to two workers for the next run
    return seconds


def measure(mode: str, runs: int, env: dict[str, str], iterations: int) -> list[float]:
    from tests.workers.fleet_support import slow_classifier

    user, task, _ = queue_latency._fixtures()
    client = queue_latency._client(user)
    model = slow_classifier(iterations)
    with (
        tempfile.TemporaryDirectory(prefix="kill-recovery-") as logs,
        Fleet(env, Path(logs)) as fleet,
    ):
        names = ["kill-bench-a", "kill-bench-b"] if mode == "peer" else ["kill-bench-a"]
        for name in names:
            fleet.start(name)
        try:
            return [one_run(fleet, client, task, model, mode) for _ in range(runs)]
        finally:
            queue_latency._cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--modes", default="peer,restart")
    parser.add_argument("--iterations", type=int, default=60_000, help="Loop trips per batch")
    parser.add_argument("--fast", action="store_true", help="test intervals (stale 3 s)")
    args = parser.parse_args(argv)
    queue_latency._setup_django()
    from django.conf import settings

    env = {**os.environ, "EVAL_DEVICE": os.environ.get("EVAL_DEVICE", "cpu")}
    env.update({**FAST, **FAST_RECOVERY} if args.fast else {})
    stale = env.get("EVAL_HEARTBEAT_STALE_S", settings.EVAL_HEARTBEAT_STALE_S)
    every = env.get("EVAL_RECOVERY_INTERVAL_S", settings.EVAL_RECOVERY_INTERVAL_S)
    print(f"heartbeat stale after {stale} s, recovery every {every} s, {args.runs} runs\n")
    print("| after kill -9 | median (s) | worst (s) |\n|---|---|---|")
    for mode in args.modes.split(","):
        seconds = measure(mode, args.runs, env, args.iterations)
        print(f"| {mode} | {statistics.median(seconds):.1f} | {max(seconds):.1f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
