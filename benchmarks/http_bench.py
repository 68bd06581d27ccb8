"""The participant's path over HTTP, against the bare rq + onnxruntime floor in the same run
(issue 40, "the deadline rush"). ``make bench-http``.

The portal runs as production runs it: gunicorn with ``docker/gunicorn.conf.py`` and DEBUG off
(``benchmarks.chaos_stack.web`` with ``site_load.SITE_ENV``), two evaluation workers, PostgreSQL
and Redis; the floor is ``floor_bench``'s, two bare rq workers. Everything is driven over HTTP
with an API token, as a participant's script does. Each run, alternated as ``floor_bench``
alternates:

- submit-to-scored: ``--latency-count`` models one at a time, ours (upload over HTTP, then
  ``GET /api/submissions/<id>/?wait=--wait-s`` until it is final, as ``oep submit --wait`` does;
  with ``--wait-s 0``, a plain GET every ``--poll-ms``) and the floor's in turn; the ratio of the
  p50s. The bench task's timing phase is cut to one batch (``floor_bench.MINIMAL_TIMING``).
  Where ours went: the p50 of each phase between the upload's sending, the row's creation, its
  claim by a worker, its result and the poll that saw it (``PHASES``).
- a burst of ``--burst`` models uploaded over HTTP one after another (the clock runs from the
  first upload to the last score), against the floor's burst; the ratio of the rates, and the
  CPU per model of each group of processes (where the rest goes).
- reads: ``--clients`` threads (8 and 64 by default) with keep-alive connections, each asking
  in turn for the board page, the leaderboard API, ``/healthz``, and the API again with the ETag
  it gave (a conditional request that hits), anonymously, as a deadline's reloading crowd does;
  the p95 of each against ``/healthz``'s p95 under the same load.

It prints one table: each run's figures and their medians, the targets, gunicorn's worker
replacements and the workers' memory before and after. It creates a user ``bench-user``, a task
``bench-digits`` and ``--entrants`` ranked users ``http-bench-*``, and deletes them afterwards.
Needs PostgreSQL (``DATABASE_URL``) and a Redis database no other worker serves (``REDIS_URL``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import chaos_stack, cpu_account, floor_bench, queue_latency
from benchmarks.http_client import FINAL, Http
from benchmarks.http_reads import Reads, read_round
from benchmarks.queue_latency import Workers, _variants, _wait_scored
from benchmarks.site_load import SITE_ENV
from benchmarks.timer import seconds

ENTRANT_PREFIX = "http-bench-"


def seed_entrants(task: Any, count: int) -> None:
    """``count`` users with one scored submission each, so that the board has pages to show."""
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from submissions.boards.leaderboard import leaderboard_rebuild
    from submissions.models import Submission

    users = get_user_model().objects
    password = make_password(None)
    made = users.bulk_create(
        [users.model(username=f"{ENTRANT_PREFIX}{i:05d}", password=password) for i in range(count)]
    )
    scores = np.random.default_rng(1).beta(8, 2, size=count)
    Submission.objects.bulk_create(
        Submission(
            user=user, task=task, sha256=f"{i:064x}", size_bytes=1000, original_name="m.onnx",
            status="succeeded", score=float(s), score_private=float(s) * 0.98,
            metrics={"accuracy": float(s)}, latency_p50_ms=1.0, throughput=1e4,
        )
        for i, (user, s) in enumerate(zip(made, scores, strict=True))
    )  # fmt: skip
    leaderboard_rebuild(task_id=task.pk)


def cleanup() -> None:
    from django.contrib.auth import get_user_model

    queue_latency._cleanup()
    get_user_model().objects.filter(username__startswith=ENTRANT_PREFIX).delete()


def latency_round(
    http: Http, floor: floor_bench.Floor, model: bytes, count: int, poll_s: float, wait_s: float
) -> dict[str, Any]:
    """p50 of ``count`` submit-to-scored, ours over HTTP and the floor's, interleaved; and where
    ours went (``PHASES``, from the row's times and this client's clock: one host, one clock)."""
    samples: dict[str, list[float]] = {"ours": [], "floor": [], "upload": [], "poll": []}
    samples["gets"] = []  # GETs of one submission until its result was seen
    ends: dict[int, tuple[float, float]] = {}  # submission id -> (sent, seen), epoch seconds
    query = f"?wait={wait_s:g}" if wait_s else ""

    def ours(variant: bytes) -> None:
        start, sent = time.perf_counter(), time.time()
        pk = http.upload(variant)
        samples["upload"].append(time.perf_counter() - start)
        gets = 0
        while True:
            began = time.perf_counter()
            status = http.get_json(f"/api/submissions/{pk}/{query}")["status"]
            took, gets = time.perf_counter() - began, gets + 1
            samples["poll"].append(took)
            if status in FINAL:
                if status != "succeeded":
                    raise RuntimeError(f"submission {pk} {status}")
                ends[pk] = (sent, time.time())
                samples["gets"].append(gets)
                return
            time.sleep(max(poll_s, wait_s - took))  # as oep does when it was not waited for

    def theirs(variant: bytes) -> None:
        floor.wait([floor.submit(variant)])

    for i, variant in enumerate(_variants(model, count)):
        sides = {"ours": lambda v=variant: ours(v), "floor": lambda v=variant: theirs(v)}
        for name in ("ours", "floor") if i % 2 == 0 else ("floor", "ours"):
            samples[name].append(seconds(sides[name]))
            time.sleep(0.2)  # each worker back to idle (its blocking dequeue)
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    return {**p50, "ratio": p50["ours"] / p50["floor"], "phases": phases(ends)}


# Where one submit-to-scored over HTTP went, in turn (they add up to it).
PHASES = (
    "sent → its row made (the upload's checks and inspection)",
    "row made → claimed by a worker (commit, enqueue, the worker's pick)",
    "claimed → result saved (the evaluation, the model process's conversation)",
    "result saved → seen by the client",
)


def phases(ends: dict[int, tuple[float, float]]) -> dict[str, float]:
    """The p50 of each of ``PHASES`` over the submissions in ``ends``, in seconds."""
    from submissions.models import Submission

    rows = Submission.objects.filter(pk__in=ends).values_list(
        "pk", "created_at", "started_at", "finished_at"
    )
    spans: dict[str, list[float]] = {name: [] for name in PHASES}
    for pk, made, started, finished in rows:
        sent, seen = ends[pk]
        marks = [sent, made.timestamp(), started.timestamp(), finished.timestamp(), seen]
        for name, begin, end in zip(PHASES, marks, marks[1:], strict=False):
            spans[name].append(end - begin)
    return {name: statistics.median(values) for name, values in spans.items()}


def burst_round(
    http: Http,
    floor: floor_bench.Floor,
    model: bytes,
    count: int,
    ours_first: bool,
    pids: dict[str, list[int]],
) -> dict[str, Any]:
    """Scored per second for ``count`` models uploaded over HTTP, and the floor's; CPU per model
    of each group of processes (the web's gunicorn workers as a group of their own)."""

    def ours(variants: list[bytes]) -> float:
        ids = [http.upload(v) for v in variants]
        uploaded = time.perf_counter()
        _wait_scored(ids, poll_s=0.02)
        return uploaded

    def theirs(variants: list[bytes]) -> float:
        jobs = [floor.submit(v) for v in variants]
        enqueued = time.perf_counter()
        floor.wait(jobs, poll_s=0.02)
        return enqueued

    rates, cpu, sent = {}, {}, {}
    variants = _variants(model, count)
    turns = [("ours", ours), ("floor", theirs)]
    for name, fn in turns if ours_first else turns[::-1]:
        before, start = _cpu(pids, name), time.perf_counter()
        sent[name] = fn(variants) - start
        rates[name] = count / (time.perf_counter() - start)
        cpu[name] = cpu_account.per_model(before, _cpu(pids, name), count)
        time.sleep(0.5)
    return {**rates, "ratio": rates["ours"] / rates["floor"], "sent_s": sent, "cpu": cpu}


def _cpu(pids: dict[str, list[int]], side: str) -> dict[str, float | None]:
    snap = cpu_account.snapshot(pids[side])
    snap["web"] = sum(cpu_account.process_cpu_s(p, reaped_children=False) for p in pids["web"])
    return snap


def _alive(pids: dict[str, list[int]]) -> None:
    """Stop at once, saying so, when an evaluation worker has gone (on a shared machine someone
    else's clean-up may stop it), rather than wait for scores that never come."""
    gone = [pid for side in ("ours", "floor") for pid in pids[side] if not _running(pid)]
    if gone:
        raise RuntimeError(f"evaluation workers {gone} have exited; see their logs")


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gunicorn_workers(log: Path) -> list[int]:
    """The pids of every worker gunicorn booted, in order, from its log."""
    marker = "Booting worker with pid: "
    lines = log.read_text(errors="replace").splitlines()
    return [int(line.split(marker)[1].split()[0]) for line in lines if marker in line]


def rss_mb(pids: list[int]) -> list[float]:
    """Resident memory of each live process, in MB."""
    sizes = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))
        sizes.append(int(kb) / 1024)
    return sizes


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-count", type=int, default=10)
    parser.add_argument(
        "--wait-s", type=float, default=1.0, help="ours: ?wait= of each GET (oep's); 0: poll"
    )
    parser.add_argument("--poll-ms", type=float, default=5.0, help="ours: between two GETs")
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--reads", type=int, default=20, help="per client, path and run")
    parser.add_argument("--entrants", type=int, default=1000, help="ranked users on the board")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn processes")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    queue_latency._setup_django()
    from django.conf import settings
    from django.db import connection

    from accounts.services import api_token_create

    if connection.vendor != "postgresql":
        sys.exit("bench-http needs PostgreSQL: set DATABASE_URL (and REDIS_URL)")
    user, task, model = queue_latency._fixtures()
    task.timing = floor_bench.MINIMAL_TIMING
    task.save(update_fields=["timing"])
    seed_entrants(task, args.entrants)
    token = api_token_create(user=user, name="bench-http").secret
    logs = Path(settings.VAR_DIR) / "bench-http"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **SITE_ENV, "DATABASE_CONN_MAX_AGE": "600"}
    env["RATE_LIMIT_UPLOADS"] = "100000000/hour"  # one user sends every burst
    options = floor_bench.floor_options()
    floor = floor_bench.Floor(logs / "floor", _dataset(task, logs), task.batch_size, options)
    web_log = logs / "gunicorn.log"
    try:
        with (
            web_log.open("wb") as log,
            chaos_stack.web(env, log, web_workers=args.web_workers) as base,
            Workers(2, logs) as ours,
            floor_bench.floor_workers(2, logs) as theirs,
        ):
            pids = {"ours": ours.pids(), "floor": theirs.pids(), "web": []}
            results = _runs(args, base, token, task, model, floor, pids, web_log)
    finally:
        cleanup()
        floor.cleanup()
    report(args, results)


def _dataset(task: Any, logs: Path) -> Path:
    dataset = logs / "floor" / "digits.npz"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    with task.dataset.open("rb") as stored:
        dataset.write_bytes(stored.read())
    return dataset


def _runs(
    args: argparse.Namespace,
    base: str,
    token: str,
    task: Any,
    model: bytes,
    floor: floor_bench.Floor,
    pids: dict[str, list[int]],
    web_log: Path,
) -> dict[str, Any]:
    http = Http(base, token, task.slug)
    http.upload(_variants(model, 1)[0])  # warm: a first upload, a first score, on each side
    floor.wait([floor.submit(_variants(model, 1)[0])])
    booted = gunicorn_workers(web_log)
    pids["web"] = booted
    memory_before = rss_mb(booted)
    reads = Reads(base, task.slug)
    latency, burst, board = [], [], []
    for run in range(args.runs):
        _alive(pids)
        latency.append(
            latency_round(http, floor, model, args.latency_count, args.poll_ms / 1000, args.wait_s)
        )
        burst.append(burst_round(http, floor, model, args.burst, run % 2 == 0, pids))
        board.append({c: read_round(reads, c, args.reads) for c in args.clients})
        print(f"run {run + 1} of {args.runs} done, load average {os.getloadavg()[0]:.2f}")
    http.close()
    all_booted = gunicorn_workers(web_log)
    return {
        "latency": latency,
        "burst": burst,
        "reads": board,
        "replaced": len(all_booted) - len(booted),
        "memory": (memory_before, rss_mb(all_booted)),
        "load": os.getloadavg(),
    }


def report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    from benchmarks.http_report import print_report

    print_report(args, results)


if __name__ == "__main__":
    main()
