"""The client's CPU per Redis round trip, with the reply parser redis-py has here.

A worker and the upload make some thirty-five round trips per model (rq's
bookkeeping, the device lock, the fleet heartbeat, the enqueue): on a small model the client's
CPU for them adds up. redis-py parses replies in Python unless ``hiredis`` (its C parser, a
dependency of ours through ``redis[hiredis]``) is importable. This times a fixed mix of three
round trips: an ``HGETALL`` of a job-sized hash, a ``GET`` of a missing key, and a pipeline of one
``HSET`` and two ``EXPIRE`` (rq's heartbeat).

Run: ``REDIS_URL=redis://... python -m benchmarks.redis_round_trip``; compare with the Python
parser by putting a ``hiredis.py`` that raises ImportError first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import redis
from redis.utils import HIREDIS_AVAILABLE

KEYS = ("bench-rt-job", "bench-rt-worker", "bench-rt-executions")


def mix(client: redis.Redis) -> None:
    job, worker, executions = KEYS
    client.hgetall(job)
    client.get("bench-rt-missing")
    with client.pipeline(transaction=False) as pipe:
        pipe.hset(worker, "last_heartbeat", "now")
        pipe.expire(worker, 100)
        pipe.expire(executions, 100)
        pipe.execute()


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixes", type=int, default=3000, help="mixes per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    client.hset(KEYS[0], mapping={f"field{i}": "x" * 50 for i in range(20)})
    cpu, wall = [], []
    try:
        for _ in range(args.rounds):
            started_cpu, started = time.process_time(), time.perf_counter()
            for _ in range(args.mixes):
                mix(client)
            cpu.append((time.process_time() - started_cpu) / args.mixes / 3)
            wall.append((time.perf_counter() - started) / args.mixes / 3)
    finally:
        client.delete(*KEYS)
    parser_name = "hiredis" if HIREDIS_AVAILABLE else "Python"
    row = {
        "parser": parser_name,
        "cpu_us": 1e6 * statistics.median(cpu),
        "wall_us": 1e6 * statistics.median(wall),
        "rounds_cpu_us": [round(1e6 * c, 1) for c in cpu],
    }
    print(
        f"{parser_name} parser: {row['cpu_us']:.1f} µs of client CPU and {row['wall_us']:.1f} µs "
        f"of wall time per round trip (medians of {args.rounds} rounds of {args.mixes} mixes; "
        f"rounds: {row['rounds_cpu_us']} µs)"
    )
    return row


if __name__ == "__main__":
    main()
