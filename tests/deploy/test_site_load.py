"""The site load test (benchmarks/site_load.py) in its short mode: a few Locust participants
browse, poll and upload against gunicorn, PostgreSQL, Redis and a real worker, and nothing fails.
The full run is a benchmark (docs/benchmarks.md), not a test: no timings are asserted here."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from benchmarks import site_load
from tests.deploy.conftest import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_short_load_run_of_the_whole_site_has_no_errors(settings: Any) -> None:
    accounts = site_load.seed(accounts=10, ranked=50)
    env = {
        "DATABASE_URL": database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        "MEDIA_ROOT": str(Path(settings.MEDIA_ROOT)),
        "SECRET_KEY": "load-test-only-" + "x" * 50,
    }
    with site_load.site(env, web_workers=1, threads=4) as base:
        rows, failures = site_load.run_locust(
            base, accounts, users=10, spawn_rate=10, run_time=5, upload_at_start=True
        )

    by_name = {row.name: row for row in rows}
    assert by_name["Aggregated"].failures == 0, failures
    assert {
        "GET / (task list)",
        "GET /tasks/[slug]/ (leaderboard page)",
        "GET /api/tasks/[slug]/leaderboard/",
        "GET /api/submissions/",
    } <= set(by_name)
    assert by_name["POST /api/submissions/ (upload)"].requests == 10  # one each, all accepted
    with socket.socket() as s:  # what the load test started, it stopped
        assert s.connect_ex(("127.0.0.1", int(urlsplit(base).port or 0))) != 0
