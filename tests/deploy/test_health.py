"""GET /healthz: 200 when the database and Redis answer, 503 naming what does not."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # released on close: nothing listens there


def test_healthz_is_ok_when_database_and_redis_answer_even_from_an_unlisted_host(
    settings: Any,
) -> None:
    settings.ALLOWED_HOSTS = ["portal.example.org"]
    response = Client().get("/healthz", HTTP_HOST="10.0.3.7:8000")  # a probe calls by IP
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_healthz_is_503_and_names_redis_when_redis_is_unreachable(settings: Any) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy" and body["database"] == "ok"
    assert body["redis"].startswith("unreachable (")


def test_other_paths_still_go_through_host_validation(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["portal.example.org"]
    assert Client().get("/", HTTP_HOST="10.0.3.7:8000").status_code == 400


def test_healthz_is_503_and_names_the_database_when_it_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real database connection to nowhere: a closed port (PostgreSQL) or an impossible path.
    from django.db import connections

    import portal.health

    connection = connections["default"]
    broken = dict(connection.settings_dict)
    if connection.vendor == "sqlite":
        broken["NAME"] = "/nonexistent-directory/portal.sqlite3"
    else:
        broken.update(HOST="127.0.0.1", PORT=str(_closed_port()))
    unreachable = type(connection)(broken, alias="default")
    monkeypatch.setattr(portal.health, "connections", {"default": unreachable})
    try:
        response = Client().get("/healthz")
    finally:
        unreachable.close()
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "unreachable (OperationalError)" and body["redis"] == "ok"
