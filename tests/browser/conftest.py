"""Browser tests: Debian's Chromium driven by Playwright against pytest-django's live server,
with a real evaluation worker in a subprocess sharing the test database and Redis database."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from tests.chromium import chromium_or_fail
from workers.worker import worker_command

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")  # not session: see the comment below
def browser() -> Iterator[Any]:
    executable = chromium_or_fail()
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread, and Django refuses ORM calls
    # where a loop runs. The test code itself is synchronous, so the check does not apply.
    # Both end with this module: a later test whose worker ran in this process failed with a
    # shared-connection error ("no results to fetch") while they lingered.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def _live_server_closes_its_connections() -> Iterator[None]:
    """The live server answers each request in a new thread; with persistent connections
    (CONN_MAX_AGE) each thread would leave one open and the test database could not be dropped."""
    db = connections.settings[DEFAULT_DB_ALIAS]
    previous = db["CONN_MAX_AGE"]
    db["CONN_MAX_AGE"] = 0
    yield
    db["CONN_MAX_AGE"] = previous


@pytest.fixture
def screenshot() -> Callable[[Any, str], Path]:
    """Save a full-page PNG under test-artifacts/ (kept after the run, gitignored)."""
    ARTIFACTS.mkdir(exist_ok=True)

    def save(page: Any, name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save


def _database_url() -> str:
    """The test database (pytest-django has renamed it by now) as a URL for another process."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def live_worker(queue: Any, live_portal: str) -> Iterator[subprocess.Popen[bytes]]:
    """``manage.py rqworker`` with the EvaluationWorker class, as operators run it, on the test
    database, the test Redis database and this test's media directory."""
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "EVAL_CACHE_DIR": str(settings.EVAL_CACHE_DIR),
        "EVAL_WORKER_NAME": "browser-test-worker",
        "EVAL_DEVICE": "cpu",
        "SECRET_KEY": settings.SECRET_KEY,
        "BOARD_CACHE_NAMESPACE": settings.BOARD_CACHE_NAMESPACE,  # it bumps what pages read
    }
    command = worker_command("browser-test-worker")
    worker = subprocess.Popen(command, cwd=settings.BASE_DIR, env=env)
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what or condition}")
