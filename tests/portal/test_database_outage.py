"""A database outage: the API answers JSON 503 with Retry-After, the site a plain "down for a
moment" page (503, Retry-After) instead of a 500, each answers again once the database is back,
and a connection the server dropped (a restart) is replaced before the next request uses it
(issue 37)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from django.db import close_old_connections, connection
from django.test import Client
from rest_framework.test import APIClient

from plumbing.refusal_responses import DATABASE_RETRY_AFTER_S, DATABASE_UNAVAILABLE
from submissions.models import Task
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def database_down(tmp_path: Path) -> Iterator[None]:
    """The connection pointed at a database that is not there: a closed port for PostgreSQL, a
    file in a missing folder for SQLite. Real connection errors, from the real drivers."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=free_port())
    else:
        connection.settings_dict["NAME"] = str(tmp_path / "missing" / "portal.sqlite3")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


@pytest.fixture
def database_unreachable(tmp_path: Path) -> Iterator[None]:
    with database_down(tmp_path):
        yield


def test_the_api_answers_json_503_with_retry_after_while_the_database_is_down(
    database_unreachable: None,
) -> None:
    response = APIClient().get("/api/tasks/")
    assert response.status_code == 503
    assert response.json() == {"detail": DATABASE_UNAVAILABLE}
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_S)


def assert_down_for_a_moment(response: Any, where: str) -> None:
    assert response.status_code == 503, where
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_S), where
    assert response["Content-Type"].startswith("text/html"), where
    page = response.content.decode()
    assert "Down for a moment" in page and "data-database-unavailable" in page, where


@pytest.fixture
def signed_in(make_task: Any, alice: Any) -> tuple[Client, int]:
    """Alice, signed in (her session is a row in the database), with one submission."""
    task = make_task()
    submission = scored(task, alice, 0.9)
    client = Client()
    client.force_login(alice)
    return client, submission.pk


PAGES = ["/", "/tasks/digits/", "/submissions/"]


def test_the_site_answers_down_for_a_moment_while_the_database_is_down(
    signed_in: tuple[Client, int], tmp_path: Path
) -> None:
    client, pk = signed_in
    with database_down(tmp_path):
        for path in [*PAGES, f"/submissions/{pk}/"]:
            assert_down_for_a_moment(client.get(path), path)
        assert_down_for_a_moment(Client().get("/tasks/digits/"), "anonymous task page")


def test_the_site_answers_again_once_the_database_is_back(
    signed_in: tuple[Client, int], tmp_path: Path
) -> None:
    client, pk = signed_in
    with database_down(tmp_path):
        assert client.get("/submissions/").status_code == 503

    for path in [*PAGES, f"/submissions/{pk}/"]:
        response = client.get(path)
        assert response.status_code == 200, path
        assert "Down for a moment" not in response.content.decode()
    assert "digits" in client.get("/submissions/").content.decode()  # her session survived


def test_a_connection_the_server_closed_is_replaced_at_the_next_request(make_task: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL, whose backends can be terminated from another session")
    make_task()
    assert Task.objects.count() == 1  # a kept connection (CONN_MAX_AGE)
    backend = connection.connection.get_backend_pid()
    params = connection.get_connection_params()
    other = psycopg2.connect(**{k: v for k, v in params.items() if k != "cursor_factory"})
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
    finally:
        other.close()

    close_old_connections()  # what Django does at the start of every request

    assert Task.objects.count() == 1  # on a new connection, not "server closed the connection"
    assert connection.connection.get_backend_pid() != backend
