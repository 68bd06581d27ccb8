"""A real S3-compatible server on loopback (moto in server mode, its own process) and settings
that point the portal's default storage at it, built by the real settings module from env."""

from __future__ import annotations

import runpy
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

SETTINGS_FILE = Path(__file__).resolve().parents[2] / "portal" / "settings.py"
# This engineer's port range on the shared machine; the first free one is used.
S3_PORTS = range(8171, 8180)
S3_KEYS = {"AWS_ACCESS_KEY_ID": "portal-test", "AWS_SECRET_ACCESS_KEY": "portal-test-secret"}


def _free_port() -> int:
    for port in S3_PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {S3_PORTS}")


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"moto server did not listen on {port} within {timeout_s}s")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def database_url() -> str:
    """The URL of the database this test run uses, for processes started by the test."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def settings_from_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, Any]:
    """Execute portal/settings.py as production would, with ``env`` set; return its globals."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


@pytest.fixture
def s3_client(s3_endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture
def s3_bucket(s3_client: Any) -> str:
    name = f"portal-test-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_storage(
    settings: Any, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str, s3_bucket: str
) -> dict[str, Any]:
    """The portal's default storage is S3 (the bucket above), configured exactly as
    production configures it: through STORAGE_BACKEND=s3 and the AWS_* variables."""
    production = settings_from_env(
        monkeypatch,
        {
            "STORAGE_BACKEND": "s3",
            "AWS_STORAGE_BUCKET_NAME": s3_bucket,
            "AWS_S3_ENDPOINT_URL": s3_endpoint,
            "AWS_S3_REGION_NAME": "us-east-1",
            "AWS_S3_ADDRESSING_STYLE": "path",
            **S3_KEYS,
        },
    )
    settings.STORAGES = production["STORAGES"]
    return production
