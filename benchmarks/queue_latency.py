"""Submit-to-scored latency with one idle worker, and throughput of a burst with two workers.

Everything is real: the upload goes through the REST API view (DRF test client, in process, so
no HTTP server is timed), the row is written to the configured database, the job goes through
the configured Redis, and separate ``manage.py rqworker`` processes with the EvaluationWorker
class run each submission's model in a model process and write the result.

- latency: one worker, idle; submit one digits model (logistic-regression baseline, 1,000 hidden
  images at batch 32), poll the row every 2 ms until it is scored, repeat; p50 of each run.
- throughput: two workers; submit 200 such models as fast as the API takes them; the time from
  the first upload to the last score; submissions scored per second.

It creates a user ``bench-user`` and a task ``bench-digits`` and deletes both afterwards. Run it
against a database and Redis that no other worker serves. ``floor_bench`` (``make bench``)
measures the same path beside the floor; this one is kept for its plain figures.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.timer import seconds

ROOT = Path(__file__).resolve().parent.parent
TASK_SLUG = "bench-digits"
FINAL = ("succeeded", "failed", "cancelled")


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django
    from django.conf import settings

    django.setup()
    # A burst of hundreds of uploads from one user is what this measures, not the upload rate
    # limit (20 an hour), which is read per request and would answer 429.
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "uploads": "1000000/hour"}


def _fixtures() -> tuple[Any, Any, bytes]:
    import io

    import numpy as np
    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile
    from django.core.management import call_command

    from submissions.demo import baselines, datasets
    from submissions.demo.tasks import TASKS
    from submissions.models import Task

    call_command("migrate", verbosity=0)
    _cleanup()
    user = get_user_model().objects.create_user("bench-user")
    fields = {**TASKS["digits"], "title": "Benchmark digits", "submissions_per_day": 100_000}
    fields["queued_per_user"] = 100_000  # one user sends the whole burst
    task = Task(slug=TASK_SLUG, **fields)
    buffer = io.BytesIO()
    np.savez(buffer, **datasets.load_digits_test())  # type: ignore[arg-type]
    task.dataset.save(f"{TASK_SLUG}.npz", ContentFile(buffer.getvalue()), save=False)
    task.save()
    model = next(
        b
        for b in baselines.digits_baselines(datasets.load_digits_train())
        if b.name == "logistic-regression"
    )
    return user, task, model.onnx_bytes


def _cleanup() -> None:
    from django.contrib.auth import get_user_model

    from submissions.models import Submission, Task

    for submission in Submission.objects.filter(task__slug=TASK_SLUG):
        submission.model_file.delete(save=False)
    Submission.objects.filter(task__slug=TASK_SLUG).delete()
    for task in Task.objects.filter(slug=TASK_SLUG):
        task.dataset.delete(save=False)
        task.delete()
    get_user_model().objects.filter(username="bench-user").delete()


class Workers:
    """``count`` real worker processes, stopped on exit: ours (``worker_command``), or those
    ``command(name)`` starts, named ``{prefix}-{pid}-{i}``."""

    def __init__(
        self,
        count: int,
        log_dir: Path,
        command: Callable[[str], list[str]] | None = None,
        prefix: str = "bench",
    ) -> None:
        self.count, self.log_dir, self.command, self.prefix = count, log_dir, command, prefix
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Workers:
        from django.conf import settings
        from rq import Worker

        from queueing.queues import evaluation_redis
        from workers.worker import worker_command

        command = self.command or worker_command
        self.log_dir.mkdir(parents=True, exist_ok=True)
        names = [f"{self.prefix}-{os.getpid()}-{i}" for i in range(self.count)]
        env = {**os.environ, "REDIS_URL": settings.REDIS_URL}
        for name in names:
            log = (self.log_dir / f"{name}.log").open("wb")
            self.procs.append(
                subprocess.Popen(
                    command(name), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
        connection = evaluation_redis()
        deadline = time.monotonic() + 120
        while {w.name for w in Worker.all(connection=connection)} & set(names) != set(names):
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers did not start; see {self.log_dir}")
            time.sleep(0.1)
        time.sleep(1.0)  # let each settle into its blocking dequeue
        return self

    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.terminate()  # SIGTERM: rq's warm shutdown
        for proc in self.procs:
            proc.wait(timeout=60)


def _client(user: Any) -> Any:
    from django.conf import settings
    from rest_framework.test import APIClient

    if "testserver" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS.append("testserver")
    client = APIClient()
    client.force_authenticate(user)
    return client


def _submit(client: Any, task: Any, model: bytes) -> int:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("bench.onnx", model, content_type="application/octet-stream")
    response = client.post(  # secure: as behind the TLS proxy (no redirect to https)
        "/api/submissions/", {"task": task.slug, "file": upload}, format="multipart", secure=True
    )
    if response.status_code != 201:
        raise RuntimeError(f"upload refused: {response.status_code} {response.content!r}")
    return int(response.json()["id"])


def _wait_scored(ids: list[int], poll_s: float = 0.002, timeout_s: float = 600) -> None:
    """Poll the rows until every one is final, as cheaply as the floor polls its jobs (a Redis
    read): one plain SQL statement per poll. An ORM query is compiled again at every poll, and
    that CPU is taken from the cores the worker under test needs."""
    from django.db import connection

    from submissions.models import Submission

    table = connection.ops.quote_name(Submission._meta.db_table)
    finals = ", ".join(f"'{status}'" for status in FINAL)
    deadline = time.monotonic() + timeout_s
    pending = set(ids)
    with connection.cursor() as cursor:
        while pending:
            marks = ", ".join(["%s"] * len(pending))
            cursor.execute(
                f"SELECT id, status, error_message FROM {table} "
                f"WHERE id IN ({marks}) AND status IN ({finals})",
                list(pending),
            )
            for pk, status, message in cursor.fetchall():
                if status != "succeeded":
                    raise RuntimeError(f"submission {pk} {status}: {message}")
                pending.discard(pk)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(pending)} submissions not scored in {timeout_s} s")
            if pending:
                time.sleep(poll_s)


_variant_numbers = itertools.count()


def _variants(model: bytes, count: int) -> list[bytes]:
    """The same model with a different doc string each: the same file twice is refused as a
    duplicate, and a doc string changes the bytes but not what runs."""
    import onnx

    proto = onnx.load_from_string(model)
    variants = []
    for _ in range(count):
        proto.doc_string = f"benchmark variant {next(_variant_numbers)}"
        variants.append(proto.SerializeToString())
    return variants


def latency_run(client: Any, task: Any, model: bytes, count: int) -> float:
    """p50 in seconds of ``count`` one-at-a-time submissions to an idle worker."""
    latencies = []
    for variant in _variants(model, count):
        latencies.append(seconds(lambda v=variant: _wait_scored([_submit(client, task, v)])))
        time.sleep(0.2)  # the worker goes back to idle (its blocking dequeue)
    return statistics.median(latencies)


def throughput_run(client: Any, task: Any, model: bytes, count: int) -> float:
    """Submissions scored per second for a burst of ``count``."""
    variants = _variants(model, count)

    def burst() -> None:
        _wait_scored([_submit(client, task, variant) for variant in variants], poll_s=0.02)

    return count / seconds(burst)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-count", type=int, default=20)
    parser.add_argument("--burst", type=int, default=200)
    args = parser.parse_args(argv)
    _setup_django()
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "sqlite":
        # SQLite lets one writer at a time: with workers saving results it would measure lock
        # waits, or stop with "database is locked". The figures are for PostgreSQL.
        print("Skipped: set DATABASE_URL to a PostgreSQL database (and REDIS_URL) to measure.")
        return {}
    user, task, model = _fixtures()
    client = _client(user)
    logs = Path(settings.VAR_DIR) / "bench"
    try:
        with Workers(1, logs):
            p50s = [latency_run(client, task, model, args.latency_count) for _ in range(args.runs)]
        with Workers(2, logs):
            rates = [throughput_run(client, task, model, args.burst) for _ in range(args.runs)]
    finally:
        _cleanup()
    where = f"{connection.vendor} + Redis"
    print(f"| measure ({where}) | runs | each run | median of runs |")
    print("|---|---|---|---|")
    print(
        f"| submit-to-scored latency, 1 idle worker, p50 | {args.runs} "
        f"| {', '.join(f'{p * 1000:.0f} ms' for p in p50s)} "
        f"| {statistics.median(p50s) * 1000:.0f} ms |"
    )
    print(
        f"| burst of {args.burst} submissions, 2 workers | {args.runs} "
        f"| {', '.join(f'{r:.1f}/s' for r in rates)} | {statistics.median(rates):.1f} scored/s |"
    )
    return {"latency_p50_s": p50s, "throughput_per_s": rates}


if __name__ == "__main__":
    main()
