"""Load test of the whole site: Locust participants against gunicorn, PostgreSQL, Redis and a real
evaluation worker, for a bounded time; prints requests/s and p50/p95/p99 per endpoint.

Usage (from the repository root; it creates and drops a database named after DATABASE_URL's with
a ``_load`` suffix, and uses REDIS_URL's database, which nothing else should use meanwhile):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/i17 REDIS_URL=redis://127.0.0.1:6379/4 \\
        .venv/bin/python -m benchmarks.site_load --users 200 --spawn-rate 20 --run-time 60

The site runs as production runs it (DEBUG=0, docker/gunicorn.conf.py) on loopback, plain HTTP
(no TLS proxy in front), with the per-user rate limits raised: one Locust process shares one
address, and 429s are not what this measures. tests/deploy/test_site_load.py runs a short mode.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import DEVNULL

ROOT = Path(__file__).resolve().parent.parent
TASK_SLUG = "digits"
SITE_ENV = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "127.0.0.1",
    "SECURE_SSL_REDIRECT": "0",
    "SESSION_COOKIE_SECURE": "0",
    "CSRF_COOKIE_SECURE": "0",
    "STATICFILES_MANIFEST": "0",
    "RATE_LIMIT_UPLOADS": "100000/hour",
    "RATE_LIMIT_API_USER": "100000/min",
    "RATE_LIMIT_API_ANON": "100000/min",
    "EVAL_DEVICE": "cpu",
    "LOG_LEVEL": "WARNING",
}


@dataclass(frozen=True)
class Row:
    name: str
    requests: int
    failures: int
    rps: float
    p50: float
    p95: float
    p99: float


def seed(*, accounts: int, ranked: int) -> list[dict[str, str]]:
    """The digits task (timed on CPU), ``ranked`` users already on its leaderboard and
    ``accounts`` participants with an API token each; returns their names and tokens."""
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.core.files.base import ContentFile

    from accounts.services import api_token_create
    from submissions.boards.leaderboard import leaderboard_rebuild
    from submissions.demo.datasets import load_digits_test
    from submissions.models import Submission, Task

    task = Task(
        slug=TASK_SLUG, title="Digits under load", batch_size=32, input_shape=[1, 8, 8],
        output_shape=[10], metric="accuracy", time_limit_s=60, queued_per_user=100,
    )  # fmt: skip
    buffer = io.BytesIO()
    np.savez(buffer, **load_digits_test())
    task.dataset.save("digits.npz", ContentFile(buffer.getvalue()), save=False)
    task.save()
    users = get_user_model().objects
    password = make_password(None)  # unusable: they sign in with tokens only
    users.bulk_create(
        [users.model(username=f"load{i:05d}", password=password) for i in range(accounts + ranked)]
    )
    rng = np.random.default_rng(1)
    board = list(users.filter(username__gte=f"load{accounts:05d}"))
    Submission.objects.bulk_create(
        Submission(
            user=user,
            task=task,
            sha256=f"{i:064x}",
            size_bytes=1000,
            original_name="m.onnx",
            status="succeeded",
            score=float(s),
            score_private=float(s) * 0.98,
            metrics={"accuracy": float(s)},
            latency_p50_ms=1.0,
            throughput=1e4,
        )
        for i, (user, s) in enumerate(zip(board, rng.beta(8, 2, size=len(board)), strict=True))
    )
    leaderboard_rebuild(task_id=task.pk)
    participants = users.filter(username__lt=f"load{accounts:05d}").order_by("username")
    return [
        {"username": u.username, "token": api_token_create(user=u, name="load").secret}
        for u in participants
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def site(env: dict[str, str], *, web_workers: int, threads: int) -> Iterator[str]:
    """gunicorn with the project's config and one CPU evaluation worker; both stopped on exit."""
    from workers.worker import worker_command

    env = {**os.environ, **SITE_ENV, **env}
    port = _free_port()
    gunicorn = [
        sys.executable, "-m", "gunicorn", "--config", "docker/gunicorn.conf.py",
        "--bind", f"127.0.0.1:{port}", "--workers", str(web_workers), "--threads", str(threads),
        "portal.wsgi:application",
    ]  # fmt: skip
    web = subprocess.Popen(gunicorn, cwd=ROOT, env=env, stdout=DEVNULL, stderr=DEVNULL)
    try:
        name = f"load-{port}"
        worker = subprocess.Popen(
            worker_command(name), cwd=ROOT, env=env, stdout=DEVNULL, stderr=DEVNULL
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_healthy(base, web)
            yield base
        finally:
            _stop(worker)
    finally:
        _stop(web)


def _wait_healthy(base: str, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def model_bytes() -> bytes:
    """A real digits classifier (the demo's nearest-centroid baseline)."""
    from submissions.demo import baselines, datasets

    models = baselines.digits_baselines(datasets.load_digits_train())
    return next(b.onnx_bytes for b in models if b.name == "nearest-centroid")


def run_locust(
    base: str,
    accounts: list[dict[str, str]],
    *,
    users: int,
    spawn_rate: float,
    run_time: int,
    upload_at_start: bool = False,
) -> tuple[list[Row], str]:
    """Run Locust headless until ``run_time`` seconds have passed; its stats and failures."""
    with tempfile.TemporaryDirectory(prefix="site-load-") as tmp:
        (Path(tmp) / "accounts.json").write_text(json.dumps(accounts))
        (Path(tmp) / "model.onnx").write_bytes(model_bytes())
        env = {
            **os.environ,
            "LOAD_ACCOUNTS": f"{tmp}/accounts.json",
            "LOAD_MODEL": f"{tmp}/model.onnx",
            "LOAD_TASK": TASK_SLUG,
            "LOAD_UPLOAD_AT_START": "1" if upload_at_start else "0",
        }
        command = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "benchmarks" / "locustfile.py"),
            "--headless", "--host", base, "--users", str(users), "--spawn-rate", str(spawn_rate),
            "--run-time", f"{run_time}s", "--stop-timeout", "10", "--csv", f"{tmp}/stats",
            "--only-summary", "--loglevel", "WARNING",
        ]  # fmt: skip
        # Locust exits 1 when a request failed: the stats say which, so that is no error here.
        subprocess.run(command, cwd=ROOT, env=env, timeout=run_time + 120, capture_output=True)
        rows = _rows(Path(f"{tmp}/stats_stats.csv").read_text())
        failures = Path(f"{tmp}/stats_failures.csv").read_text()
    return rows, failures


def _rows(text: str) -> list[Row]:
    return [
        Row(
            name=row["Name"],
            requests=int(row["Request Count"]),
            failures=int(row["Failure Count"]),
            rps=float(row["Requests/s"]),
            p50=float(row["50%"]),
            p95=float(row["95%"]),
            p99=float(row["99%"]),
        )
        for row in csv.DictReader(io.StringIO(text))
    ]


def table(rows: list[Row]) -> str:
    lines = [
        "| endpoint | requests | errors | req/s | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        name = "**all**" if r.name == "Aggregated" else r.name
        lines.append(
            f"| {name} | {r.requests} | {r.failures} | {r.rps:.1f} | {r.p50:.0f} | "
            f"{r.p95:.0f} | {r.p99:.0f} |"
        )
    return "\n".join(lines)


def _admin_sql(admin_url: str, sql: str) -> None:
    import psycopg2

    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(sql)
    connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--spawn-rate", type=float, default=20)
    parser.add_argument("--run-time", type=int, default=60, help="seconds")
    parser.add_argument("--ranked", type=int, default=2000, help="users already on the board")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(os.environ["DATABASE_URL"])
    name = parts.path.lstrip("/") + "_load"
    url = urlunsplit(parts._replace(path=f"/{name}"))
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    _admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
    _admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    media = tempfile.TemporaryDirectory(prefix="site-load-media-")
    os.environ.update(SITE_ENV, DATABASE_URL=url, MEDIA_ROOT=media.name)
    os.environ.setdefault("SECRET_KEY", "load-test-only-" + "x" * 50)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    try:
        call_command("migrate", verbosity=0)
        accounts = seed(accounts=args.users, ranked=args.ranked)
        connection.close()
        with site({}, web_workers=args.web_workers, threads=args.threads) as base:
            rows, failures = run_locust(
                base, accounts, users=args.users, spawn_rate=args.spawn_rate,
                run_time=args.run_time,
            )  # fmt: skip
            from submissions.models import Submission

            done = Submission.objects.filter(description="load test", status="succeeded").count()
        print(f"{args.users} users, {args.run_time} s, {args.ranked} on the leaderboard; "
              f"{done} uploaded models evaluated during the run\n")  # fmt: skip
        print(table(rows))
        if any(r.failures for r in rows):
            print("\nFailures:\n" + failures)
    finally:
        connection.close()
        _admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
        media.cleanup()


if __name__ == "__main__":
    main()
