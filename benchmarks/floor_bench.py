"""Ours against the floor, in the same run, interleaved (issue 12).

The floor is a bare rq evaluator (``benchmarks/floor_job.py``): rq's forking Worker running a job
that loads the same model and data and runs onnxruntime, nothing else; by default
(``--floor ours``) its sessions get our workers' session options and warm-up, so that the floor
is a floor (``--floor defaults``: onnxruntime's defaults, as first measured). Ours is the whole
portal: an upload through the REST API view (quota, duplicate and rate checks, the row in
PostgreSQL, the file in storage), the job through Redis, an ``EvaluationWorker`` and the model's
confined model process (limits, watchdog, heartbeat), the result and the leaderboard read models
written back.

- submit-to-scored, one idle worker of each: for each of ``--latency-count`` models, ours and
  the floor one after the other, which goes first alternating, each polled every 2 ms until
  scored; the ratio of the two p50s of the run.
- a burst of ``--burst`` distinct models with two workers of each, ours and the floor in turn
  (which goes first alternating by run); scored per second, and the ratio.
- the same burst queued first: every upload (or the floor's model file) made before the clock
  starts, then all released at once to the idle workers: the evaluation alone, without the
  uploads' CPU beside the workers on the same cores (``burst_round(queued=True)``).
- every model of those runs is scored by both sides, the same bytes on each, and the benchmark
  stops with an error when a floor's score differs from ours (public or private): the floor must
  do the same work.
- the runner against a bare loop that passes one ``RunOptions`` (what an evaluator that can stop
  a run needs), from ``benchmarks/runner_overhead.py``, digits and conv.

Ours runs the bench task with a one-batch timing phase (``--timing minimal``, the default here):
the timing protocol (issue 11) times every model for at least a second by design, which the floor
does not do at all; ``--timing default`` keeps it and shows what it costs. The 1-minute load
average is printed after each run: other processes on the host move every figure.

Needs PostgreSQL (``DATABASE_URL``) and a Redis that no other worker serves (``REDIS_URL``); it
creates and deletes a user ``bench-user`` and a task ``bench-digits``, as ``queue_latency`` does.
Run: ``python -m benchmarks.floor_bench``, or ``make bench``. On SQLite only the runner rows run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import cpu_account, queue_latency
from benchmarks.queue_latency import Workers, _submit, _variants, _wait_scored
from benchmarks.timer import seconds

FLOOR_QUEUE = "bench-floor"
# One timed batch: no minimum time and no further rounds for precision (the adaptive rounds
# would otherwise time the tiny model until its p50 is known to ±1 %).
MINIMAL_TIMING = {"min_time_s": 0.0, "min_batches": 1, "passes": 1, "precision": 0}


def floor_options() -> dict[str, Any]:
    """The CPU session settings of our workers (``workers.device.device_config``, read from
    the same environment as theirs), for the floor's sessions (``floor_job.session_options``)."""
    from evaluation.runner import GRAPH_OPTIMIZATION_LEVELS
    from workers.device import device_config

    ours = device_config("floor")
    return {
        "optimization": GRAPH_OPTIMIZATION_LEVELS[ours.graph_optimization].name,
        "intra_op_threads": ours.intra_op_threads,
        "inter_op_threads": ours.inter_op_threads,
        "intra_op_spinning": ours.intra_op_spinning,
        "warmup_runs": ours.warmup_runs,
    }


def floor_worker_command(name: str, set_up: bool = True) -> list[str]:
    """One bare rq worker (``benchmarks.floor_job``) on the floor's queue; ``set_up``: its parent
    sets onnxruntime up once at start, as ours does."""
    flags = ["--set-up"] if set_up else []
    return [sys.executable, "-m", "benchmarks.floor_job", FLOOR_QUEUE, name, *flags]


def floor_workers(count: int, log_dir: Path, set_up: bool = True) -> Workers:
    return Workers(
        count, log_dir, command=lambda name: floor_worker_command(name, set_up), prefix="floor"
    )


class Floor:
    """Submits to the floor: the model written to a file (as our upload stores one), one job,
    whose session is made with ``options`` (None: onnxruntime's defaults)."""

    def __init__(
        self, work_dir: Path, dataset: Path, batch_size: int, options: dict[str, Any] | None
    ) -> None:
        from rq import Queue

        from queueing.queues import evaluation_redis

        self.dir, self.dataset, self.batch_size = work_dir, dataset, batch_size
        self.options = options
        self.dir.mkdir(parents=True, exist_ok=True)
        self.queue = Queue(FLOOR_QUEUE, connection=evaluation_redis())
        self.count = 0

    def submit(self, model: bytes) -> Any:
        func, args = self._job(self.write(model))
        return self.queue.enqueue(func, *args)

    def write(self, model: bytes) -> Path:
        """The model's file, as our upload stores one; not yet a job."""
        self.count += 1
        path = self.dir / f"model-{self.count}.onnx"
        path.write_bytes(model)
        return path

    def enqueue_all(self, paths: list[Path]) -> list[Any]:
        """A job for each written model, all in one pipeline (``write`` first)."""
        from rq import Queue

        return self.queue.enqueue_many([Queue.prepare_data(*self._job(p)) for p in paths])

    def _job(self, path: Path) -> tuple[str, tuple[Any, ...]]:
        args = (str(path), str(self.dataset), self.batch_size, self.options)
        return "benchmarks.floor_job.score", args

    @staticmethod
    def wait(jobs: list[Any], poll_s: float = 0.002, timeout_s: float = 600) -> None:
        from rq.job import JobStatus

        deadline = time.monotonic() + timeout_s
        pending = list(jobs)
        while pending:
            for job in list(pending):
                status = job.get_status(refresh=True)
                if status == JobStatus.FINISHED:
                    pending.remove(job)
                elif status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
                    raise RuntimeError(f"floor job {job.id} {status}: {job.latest_result()}")
                else:
                    break  # the rest finish later: poll the oldest first
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(pending)} floor jobs not finished in {timeout_s} s")
            if pending:
                time.sleep(poll_s)

    def cleanup(self) -> None:
        for path in self.dir.glob("model-*.onnx"):
            path.unlink()
        self.queue.empty()


def compare_scores(
    ours: dict[int, tuple[float | None, float | None]], floor: dict[int, dict[str, float]]
) -> int:
    """The number of models compared, each scored by both sides (by submission id: ours' public
    and private score, the floor's); RuntimeError naming every model whose scores differ, or
    that one side did not score."""
    differ = []
    for pk, theirs in floor.items():
        mine = ours.get(pk, (None, None))
        for part, value in zip(("public", "private"), mine, strict=True):
            if value is None or abs(value - theirs[part]) > 1e-9:
                differ.append(f"submission {pk} {part}: ours {value}, floor {theirs[part]}")
    if differ:
        raise RuntimeError("the floor and ours scored differently: " + "; ".join(differ))
    return len(floor)


def same_scores(pairs: list[tuple[int, Any]]) -> int:
    """``compare_scores`` for (submission id, floor job) pairs that scored the same model."""
    from submissions.models import Submission

    rows = Submission.objects.filter(pk__in=[pk for pk, _ in pairs])
    ours = {pk: (s, p) for pk, s, p in rows.values_list("pk", "score", "score_private")}
    return compare_scores(ours, {pk: job.return_value() for pk, job in pairs})


def latency_round(client: Any, task: Any, floor: Floor, model: bytes, count: int) -> dict[str, Any]:
    """p50 of ``count`` one-at-a-time submissions to ours and to the floor, interleaved; each
    model's scores compared once the run is over."""
    samples: dict[str, list[float]] = {"ours": [], "floor": [], "upload": [], "upload_cpu": []}
    ids: list[int] = []
    jobs: list[Any] = []

    def ours(variant: bytes) -> None:
        start, cpu = time.perf_counter(), time.process_time()
        submission = _submit(client, task, variant)  # the API view in process: server time
        samples["upload"].append(time.perf_counter() - start)
        samples["upload_cpu"].append(time.process_time() - cpu)  # less moved by other load
        _wait_scored([submission])
        ids.append(submission)

    def theirs(variant: bytes) -> None:
        jobs.append(floor.submit(variant))
        floor.wait(jobs[-1:])

    for i, variant in enumerate(_variants(model, count)):
        contestants = {"ours": lambda v=variant: ours(v), "floor": lambda v=variant: theirs(v)}
        for name in ("ours", "floor") if i % 2 == 0 else ("floor", "ours"):
            samples[name].append(seconds(contestants[name]))
            time.sleep(0.2)  # each worker back to idle (its blocking dequeue)
    ours_p50, base = statistics.median(samples["ours"]), statistics.median(samples["floor"])
    return {
        "ours": ours_p50,
        "floor": base,
        "ratio": ours_p50 / base,
        "upload": statistics.median(samples["upload"]),
        "upload_cpu": statistics.median(samples["upload_cpu"]),
        "load": os.getloadavg()[0],
        "scores_compared": same_scores(list(zip(ids, jobs, strict=True))),
    }


class _Release:
    """The moment a burst is let go: the clock, and each process group's CPU, from it."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.at, self.cpu = pids, 0.0, cpu_account.snapshot(pids)

    def __call__(self) -> None:
        self.at, self.cpu = time.perf_counter(), cpu_account.snapshot(self.pids)


def burst_round(
    client: Any,
    task: Any,
    floor: Floor,
    model: bytes,
    count: int,
    ours_first: bool,
    pids: dict[str, list[int]],
    *,
    queued: bool = False,
) -> dict[str, Any]:
    """Scored per second for a burst of ``count`` distinct models, ours and the floor in turn,
    and the CPU per model of each side's processes (``pids``: each side's workers), from the
    burst's release. Plain, the clock starts before the first upload (or the floor's enqueue).
    ``queued``: with both sides' workers idle, every upload (ours) or model file (the floor's)
    is made first, then all are released at once: ours by the one commit around the uploads,
    whose after-commit hooks enqueue them (the workers see no row before it), the floor's by one
    pipeline of jobs. That is the evaluation alone; the plain burst pays the uploads beside the
    workers, on the same cores. Both sides score the same ``count`` models, made before either
    clock starts; their scores are compared once both are done."""
    from django.db import transaction

    def ours(variants: list[bytes], release: _Release) -> list[Any]:
        if queued:
            with transaction.atomic():
                ids = [_submit(client, task, v) for v in variants]
                release()
        else:
            release()
            ids = [_submit(client, task, v) for v in variants]
        _wait_scored(ids, poll_s=0.02)
        return ids

    def base(variants: list[bytes], release: _Release) -> list[Any]:
        if queued:
            paths = [floor.write(v) for v in variants]
            release()
            jobs = floor.enqueue_all(paths)
        else:
            release()
            jobs = [floor.submit(v) for v in variants]
        floor.wait(jobs, poll_s=0.02)
        return jobs

    rates, cpu, done = {}, {}, {}
    variants = _variants(model, count)
    turns = [("ours", ours), ("floor", base)]
    for name, fn in turns if ours_first else turns[::-1]:
        release = _Release(pids[name])
        done[name] = fn(variants, release)
        rates[name] = count / (time.perf_counter() - release.at)
        cpu[name] = cpu_account.per_model(release.cpu, cpu_account.snapshot(pids[name]), count)
        time.sleep(0.5)
    ratio = rates["ours"] / rates["floor"]
    compared = same_scores(list(zip(done["ours"], done["floor"], strict=True)))
    load = os.getloadavg()[0]
    return {**rates, "ratio": ratio, "cpu": cpu, "load": load, "scores_compared": compared}


def runner_rows(seconds: float) -> list[dict[str, Any]]:
    from evaluation.runner import DeviceConfig
    from workers import runner_overhead

    device = DeviceConfig(intra_op_threads=0, warmup_runs=2)
    return [runner_overhead.measure(w, device, seconds) for w in runner_overhead.workloads()]


def _figures(values: list[float], fmt: str) -> str:
    return ", ".join(fmt.format(v) for v in values)


def queue_rounds(args: argparse.Namespace) -> dict[str, Any]:
    """The latency, burst and queued-burst runs, ours and the floor interleaved; the floor's
    job count."""
    from django.conf import settings

    user, task, model = queue_latency._fixtures()
    if args.timing == "minimal":
        task.timing = MINIMAL_TIMING
        task.save(update_fields=["timing"])
    client = queue_latency._client(user)
    logs = Path(settings.VAR_DIR) / "bench"
    dataset = logs / "floor" / "digits.npz"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    with task.dataset.open("rb") as stored:
        dataset.write_bytes(stored.read())
    ours_options = args.floor == "ours"
    options = floor_options() if ours_options else None
    floor = Floor(logs / "floor", dataset, task.batch_size, options)
    latency, burst, queued = [], [], []
    try:
        with Workers(1, logs), floor_workers(1, logs, set_up=ours_options):
            # Warm both paths once, and check that the floor does the same work: same scores.
            warm_up = _variants(model, 1)[0]
            ours_id = _submit(client, task, warm_up)
            _wait_scored([ours_id])
            job = floor.submit(warm_up)
            floor.wait([job])
            compared = same_scores([(ours_id, job)])
            for _ in range(args.runs):
                latency.append(latency_round(client, task, floor, model, args.latency_count))
        with Workers(2, logs) as ours, floor_workers(2, logs, set_up=ours_options) as theirs:
            pids = {"ours": ours.pids(), "floor": theirs.pids()}
            for run in range(args.runs):
                burst.append(
                    burst_round(client, task, floor, model, args.burst, run % 2 == 0, pids)
                )
            for run in range(args.runs):
                queued.append(
                    burst_round(
                        client, task, floor, model, args.burst, run % 2 == 1, pids, queued=True
                    )
                )
    finally:
        queue_latency._cleanup()
        floor.cleanup()
    compared += sum(r["scores_compared"] for r in latency + burst + queued)
    return {
        "latency": latency,
        "burst": burst,
        "queued": queued,
        "floor_jobs": floor.count,
        "scores_compared": compared,
    }


def _print_cpu(burst: list[dict[str, Any]], which: str) -> None:
    """A burst's CPU per model by process group, each side's runs' medians."""
    groups = list(burst[0]["cpu"]["ours"])
    print(f"\nCPU per model in {which}, ms (median of the runs; the workers' figure includes")
    print("their children (our model processes, the floor's work horses), the workers' own is")
    print("without them; the faults are minor page faults per model, a count, of the workers")
    print("themselves and of their reaped children):\n")
    print("| | " + " | ".join(groups) + " |")
    print("|---" * (len(groups) + 1) + "|")
    for side in ("ours", "floor"):
        cells = []
        for group in groups:
            values = [r["cpu"][side][group] for r in burst if r["cpu"][side][group] is not None]
            form = "{:.0f}" if group.endswith("faults") else "{:.1f}"
            cells.append(form.format(statistics.median(values)) if values else "—")
        print(f"| {side} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-count", type=int, default=20)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--runner-seconds", type=float, default=20.0)
    parser.add_argument("--timing", choices=("minimal", "default"), default="minimal")
    parser.add_argument(
        "--floor",
        choices=("ours", "defaults"),
        default="ours",
        help="the floor's sessions: our workers' options and warm-up, or onnxruntime's defaults",
    )
    args = parser.parse_args(argv)
    queue_latency._setup_django()
    from django.db import connection

    rounds: dict[str, Any] = {
        "latency": [],
        "burst": [],
        "queued": [],
        "floor_jobs": 0,
        "scores_compared": 0,
    }
    if connection.vendor == "sqlite":
        # SQLite lets one writer at a time: several workers saving results would measure its
        # lock, or stop with "database is locked". The runner rows need no database.
        print("Submission rows skipped: set DATABASE_URL to PostgreSQL (and REDIS_URL).\n")
    else:
        rounds = queue_rounds(args)
    latency, burst, queued = rounds["latency"], rounds["burst"], rounds["queued"]
    runner = runner_rows(args.runner_seconds)

    floor_sessions = {
        "ours": "our workers' session options and warm-up",
        "defaults": "onnxruntime's defaults",
    }[args.floor]
    print(
        f"Ours with the {args.timing} timing phase; the floor's sessions with {floor_sessions}; "
        f"{args.runs} runs, interleaved.\n"
    )
    print("| measure | ours, each run | floor, each run | ours / floor | median | target |")
    print("|---|---|---|---|---|---|")
    if latency:
        print(
            f"| submit-to-scored p50 of {args.latency_count}, 1 idle worker each "
            f"| {_figures([r['ours'] * 1000 for r in latency], '{:.0f} ms')} "
            f"| {_figures([r['floor'] * 1000 for r in latency], '{:.0f} ms')} "
            f"| {_figures([r['ratio'] for r in latency], '{:.2f}×')} "
            f"| **{statistics.median(r['ratio'] for r in latency):.2f}×** | ≤ 1.5× |"
        )
        print(
            f"| burst of {args.burst}, 2 workers each "
            f"| {_figures([r['ours'] for r in burst], '{:.1f}/s')} "
            f"| {_figures([r['floor'] for r in burst], '{:.1f}/s')} "
            f"| {_figures([r['ratio'] for r in burst], '{:.2f}×')} "
            f"| **{statistics.median(r['ratio'] for r in burst):.2f}×** | ≥ 0.7× |"
        )
        print(
            f"| the same burst queued first (evaluation only: no upload beside the workers) "
            f"| {_figures([r['ours'] for r in queued], '{:.1f}/s')} "
            f"| {_figures([r['floor'] for r in queued], '{:.1f}/s')} "
            f"| {_figures([r['ratio'] for r in queued], '{:.2f}×')} "
            f"| **{statistics.median(r['ratio'] for r in queued):.2f}×** | — |"
        )
        print(
            f"| upload: the API view's time for each of ours, p50 "
            f"| {_figures([r['upload'] * 1000 for r in latency], '{:.1f} ms')} | — | — "
            f"| **{statistics.median(r['upload'] for r in latency) * 1000:.1f} ms** | ≤ 15 ms |"
        )
        print(
            f"| upload: this process's CPU time for each, p50 "
            f"| {_figures([r['upload_cpu'] * 1000 for r in latency], '{:.1f} ms')} | — | — "
            f"| {statistics.median(r['upload_cpu'] for r in latency) * 1000:.1f} ms | — |"
        )
    from workers.runner_overhead import shown

    for row, target in zip(runner, ("≤ 1.05×", "≤ 1.02×"), strict=True):
        why = shown(row)  # a ratio of two different calls, or of other predictions, is none
        figure = f"**{row['ratio']:.3f}×**" if why is None else f"not shown: {why}"
        print(
            f"| runner as a worker runs it vs bare loop with RunOptions: {row['workload']} "
            f"| {row['runner_ms']:.2f} ms | {row['bare_ms']:.2f} ms | {row['repeats']} rounds "
            f"(control {row['control']:.3f}×) | {figure} | {target} |"
        )
    if burst:
        _print_cpu(burst, "the burst")
        _print_cpu(queued, "the queued burst, from its release")
    if rounds["scores_compared"]:
        print(
            f"\nScores: the floor's and ours agreed, public and private, on every one of the "
            f"{rounds['scores_compared']} models both scored."
        )
    loads = [r["load"] for r in latency + burst + queued]
    print(f"\n1-minute load average after each run: {_figures(loads, '{:.2f}')}")
    return {**rounds, "runner": runner}


if __name__ == "__main__":
    main()
