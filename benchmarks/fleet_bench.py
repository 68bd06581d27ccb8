"""Cost of the fleet machinery: one heartbeat, an hour of history, one recovery pass.

Run against a Redis database and a Postgres/SQLite database that nothing else uses (it empties
the evaluation queue of that Redis database at the end and deletes only the rows it created):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench REDIS_URL=redis://127.0.0.1:6379/9 \\
        DEBUG=1 .venv/bin/python benchmarks/fleet_bench.py --queued 1000

It prints milliseconds per heartbeat (NVML attempt + CPU/RAM read + one Redis round trip), Redis
bytes for one worker's hour of history, and the time of one recovery pass over N queued
submissions when their jobs are present (the steady state) and after the jobs were lost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queued", type=int, default=1000)
    parser.add_argument("--heartbeats", type=int, default=200)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    bench_heartbeat(args.heartbeats)
    bench_recovery(args.queued)


def bench_heartbeat(count: int) -> None:
    import django_rq
    from django.conf import settings

    from queueing import heartbeat
    from workers.worker import EvaluationWorker

    queue = django_rq.get_queue(settings.EVALUATION_QUEUE)
    worker = EvaluationWorker([queue], connection=queue.connection, name="bench-worker")
    times = []
    for _ in range(count):
        start = time.perf_counter()
        worker._last_publish = 0.0
        worker.publish_heartbeat()
        times.append((time.perf_counter() - start) * 1000)
    hour = heartbeat.history_length()
    for _ in range(max(0, hour - count)):
        worker._last_publish = 0.0
        heartbeat.publish(queue.connection, worker.fleet_state)
    history_bytes = queue.connection.memory_usage(heartbeat.history_key("bench-worker"))
    print(
        f"heartbeat: median {statistics.median(times):.2f} ms, p95 "
        f"{sorted(times)[int(len(times) * 0.95)]:.2f} ms over {count} "
        f"(gpu: {'yes' if worker.fleet_state.gpu else 'no: ' + worker.fleet_state.no_gpu_reason})"
    )
    print(
        f"history: {hour} samples ({settings.EVAL_HEARTBEAT_HISTORY_S} s at "
        f"{settings.EVAL_HEARTBEAT_INTERVAL_S:g} s) take {history_bytes} bytes in Redis"
    )
    for key in (heartbeat.worker_key("bench-worker"), heartbeat.history_key("bench-worker")):
        queue.connection.delete(key)
    queue.connection.zrem(heartbeat.NAMES_KEY, "bench-worker")


def bench_recovery(count: int) -> None:
    import django_rq
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from submissions.lifecycle.services import submission_enqueue
    from submissions.models import Submission, Task
    from workers.recovery import reconcile

    user, _ = get_user_model().objects.get_or_create(username="fleet-bench")
    task, _ = Task.objects.get_or_create(
        slug="fleet-bench",
        defaults=dict(
            title="bench",
            batch_size=1,
            input_shape=[1],
            output_shape=[1],
            metric="accuracy",
            dataset="datasets/none.npz",
            is_hidden=True,
        ),
    )
    queue = django_rq.get_queue(settings.EVALUATION_QUEUE)
    rows = Submission.objects.bulk_create(
        Submission(
            user=user,
            task=task,
            model_file="models/none.onnx",
            sha256="0" * 64,
            size_bytes=1,
            original_name="none.onnx",
        )
        for _ in range(count)
    )
    try:
        for row in rows:
            submission_enqueue(submission_id=row.pk)
        start = time.perf_counter()
        steady = reconcile(blocking=True)
        steady_ms = (time.perf_counter() - start) * 1000
        assert not steady.enqueued, steady
        queue.empty()  # the jobs are lost, as after FLUSHDB
        start = time.perf_counter()
        lost = reconcile(blocking=True)
        lost_ms = (time.perf_counter() - start) * 1000
        assert len(lost.enqueued) == count, lost
        print(
            f"recovery over {count} queued: {steady_ms:.0f} ms with their jobs present, "
            f"{lost_ms:.0f} ms re-enqueueing all {count} after the jobs were lost"
        )
    finally:
        queue.empty()
        Submission.objects.filter(task=task).delete()
        task.delete()
        user.delete()


if __name__ == "__main__":
    main()
