"""Leaderboard page and API server time with 10,000 users and 100,000 submissions in Postgres.

Usage (from the repository root):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/wt6 \
        .venv/bin/python benchmarks/leaderboard_bench.py

It creates a throw-away database named after DATABASE_URL's with a ``_bench`` suffix, fills it,
times requests through Django's full request stack in this process (middleware, view, queries,
template or serializer; no network), counts the SQL queries of each, prints a table, and drops the
database (``--keep`` leaves it for a second run with ``--reuse``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _bench_url(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_bench"
    admin = urlunsplit(parts._replace(path="/postgres"))
    return urlunsplit(parts._replace(path=f"/{name}")), admin, name


def _admin_sql(admin_url: str, sql: str) -> None:
    import psycopg2

    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(sql)
    connection.close()


def _fill(users: int, submissions: int, seed: int) -> None:
    import numpy as np
    from django.contrib.auth.models import User
    from django.core.files.base import ContentFile
    from django.utils import timezone

    from submissions.models import Submission, Task

    rng = np.random.default_rng(seed)
    task = Task(
        slug="digits", title="Digits", batch_size=32, input_shape=[1, 8, 8],
        output_shape=[10], metric="accuracy",
    )  # fmt: skip
    task.dataset.save("bench.npz", ContentFile(b"not read by the leaderboard"), save=False)
    task.save()
    User.objects.bulk_create(
        [User(username=f"user{i:05d}", password="!") for i in range(users)], batch_size=5000
    )
    user_ids = list(User.objects.order_by("id").values_list("id", flat=True))
    owners = rng.choice(user_ids, size=submissions)  # about 10 per user, some 0, some 25+
    start = timezone.now() - timezone.timedelta(days=60)
    minutes = np.sort(rng.integers(0, 60 * 24 * 60, size=submissions))
    statuses = rng.choice(
        ["succeeded", "failed", "cancelled"], p=[0.9, 0.08, 0.02], size=submissions
    )
    scores = rng.beta(8, 2, size=submissions)
    rows = []
    for i in range(submissions):
        ok = statuses[i] == "succeeded"
        score = float(scores[i])
        rows.append(
            Submission(
                user_id=int(owners[i]),
                task=task,
                sha256="0" * 64,
                size_bytes=1000,
                original_name="m.onnx",
                status=str(statuses[i]),
                created_at=start + timezone.timedelta(minutes=int(minutes[i])),
                score=score if ok else None,
                score_private=score * 0.98 if ok else None,
                metrics={
                    "accuracy": score,
                    "top5_accuracy": min(1.0, score + 0.05),
                    "macro_f1": score * 0.97,
                }
                if ok
                else {},
                latency_p50_ms=float(rng.uniform(0.5, 20)) if ok else None,
                throughput=float(rng.uniform(1e3, 1e5)) if ok else None,
                provider="CUDAExecutionProvider",
                device_name="NVIDIA H100",
                hidden=bool(rng.random() < 0.01),
            )
        )
    Submission.objects.bulk_create(rows, batch_size=5000)


def _time(client: Any, url: str, runs: int) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # secure=True: as behind the TLS proxy, so production settings do not redirect to https.
    client.get(url, secure=True)  # warm caches and connection
    times = []
    queries = 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url, secure=True)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(captured)
    return times, queries


def _refresh_times(runs: int) -> tuple[list[float], int]:
    """What a worker pays per result to keep the read models: one user's refresh."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from submissions.boards.leaderboard import leaderboard_submissions_changed
    from submissions.models import Submission

    ids = list(Submission.objects.order_by("?").values_list("pk", flat=True)[:runs])
    times, queries = [], 0
    for submission_id in ids:
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            leaderboard_submissions_changed(submission_ids=[submission_id])
            times.append((time.perf_counter() - started) * 1000)
        queries = len(captured)
    return times, queries


def _report(label: str, times: list[float], queries: int) -> str:
    ordered = sorted(times)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return (
        f"| {label} | {len(times)} | {statistics.median(ordered):.1f} | {p95:.1f} | "
        f"{ordered[-1]:.1f} | {queries} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--submissions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="leave the bench database")
    parser.add_argument("--reuse", action="store_true", help="use a bench database kept before")
    args = parser.parse_args()

    url, admin_url, name = _bench_url(os.environ["DATABASE_URL"])
    if not args.reuse:
        _admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
        _admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    # Production settings: DEBUG off (templates and queries are not instrumented).
    os.environ.update(DATABASE_URL=url, DEBUG="0", DATABASE_CONN_MAX_AGE="600")
    os.environ.update(ALLOWED_HOSTS="testserver", SECRET_KEY="bench-only-" + "x" * 50)
    os.environ.setdefault("MEDIA_ROOT", str(ROOT / "var" / "bench-media"))
    # Hundreds of reads a minute from one client: above the API's per-client rate limits,
    # which would answer 429 and which are not what this measures.
    os.environ.update(RATE_LIMIT_API_ANON="100000/min", RATE_LIMIT_API_USER="100000/min")
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            started = time.perf_counter()
            _fill(args.users, args.submissions, seed=1)
            from submissions.boards.leaderboard import leaderboard_rebuild
            from submissions.models import Task

            leaderboard_rebuild(task_id=Task.objects.get().pk)
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")  # what autovacuum does on a live database
            print(f"filled in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        from submissions.models import Submission

        ranked = Submission.objects.on_leaderboard().values("user").distinct().count()
        print(f"{User.objects.count()} users, {Submission.objects.count()} submissions, "
              f"{ranked} on the board")  # fmt: skip
        anonymous, signed_in = Client(), Client()
        signed_in.force_login(User.objects.get(username="user05000"))
        print("| request | runs | p50 ms | p95 ms | max ms | SQL queries |")
        print("|---|---|---|---|---|---|")
        page, by_speed = "/tasks/digits/", "sort=throughput&dir=desc&page=40"
        cases = [
            ("page, anonymous", anonymous, "/tasks/digits/"),
            ("page, signed in (own row pinned)", signed_in, "/tasks/digits/"),
            ("page 40, sorted by throughput", anonymous, f"{page}?{by_speed}"),
            ("API, first 50 rows", anonymous, "/api/tasks/digits/leaderboard/"),
            ("API, page 100 of 50 rows", anonymous, "/api/tasks/digits/leaderboard/?page=100"),
        ]  # fmt: skip
        for label, client, path in cases:
            print(_report(label, *_time(client, path, args.runs)), flush=True)
        print(_report("write side: refresh after one result", *_refresh_times(args.runs)))
    finally:
        connection.close()
        if not args.keep:
            _admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')


if __name__ == "__main__":
    main()
