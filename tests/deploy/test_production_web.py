"""The production web set-up of docs/operations.md for real: collectstatic, then gunicorn with the
project's config serving the site against this test run's database and Redis, static files by
whitenoise."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from tests.deploy.conftest import S3_PORTS, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    for port in reversed(S3_PORTS):  # the S3 server takes the low end of the range
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port")


def _get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    # As behind the TLS-terminating proxy production runs behind (SECURE_PROXY_SSL_HEADER=1);
    # without it the portal would redirect every request to https.
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https", **headers})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, dict(response.headers), response.read()


@pytest.fixture
def production_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "production-test-secret-key-not-for-real-use",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_PROXY_SSL_HEADER": "1",
        "DATABASE_URL": database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        "STATIC_ROOT": str(tmp_path / "static"),
        "STATICFILES_MANIFEST": "1",
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": "2",
    }


@pytest.fixture
def gunicorn(production_env: dict[str, str]) -> Iterator[str]:
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=production_env,
        check=True,
        capture_output=True,
    )
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,  # gunicorn as a module: works whatever the venv's bin/ holds
            "-m",
            "gunicorn",
            "--config",
            "docker/gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "portal.wsgi:application",
        ],
        cwd=ROOT,
        env=production_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/healthz")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_gunicorn_serves_pages_api_health_and_hashed_compressed_static_files(
    make_task: Any, gunicorn: str
) -> None:
    make_task(slug="digits", title="Digits for production")

    status, _, body = _get(f"{gunicorn}/healthz")
    assert status == 200 and json.loads(body) == {"status": "ok", "database": "ok", "redis": "ok"}

    status, _, page = _get(f"{gunicorn}/")
    html = page.decode()
    assert status == 200 and "Digits for production" in html

    status, _, api = _get(f"{gunicorn}/api/tasks/")
    tasks = json.loads(api)
    rows = tasks["results"] if isinstance(tasks, dict) else tasks  # paginated or not
    assert status == 200 and "digits" in {t["slug"] for t in rows}

    css = re.search(r'href="(/static/css/portal\.[0-9a-f]{12}\.css)"', html)
    assert css, "the page must link the hashed stylesheet from the manifest"
    status, headers, content = _get(f"{gunicorn}{css.group(1)}", **{"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    assert "immutable" in headers["Cache-Control"]
    assert content  # served by whitenoise from STATIC_ROOT
