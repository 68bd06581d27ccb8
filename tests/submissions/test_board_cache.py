"""The board's rows, kept in the shared cache per board version and page: a reload of an
unchanged board does not read them again, and every event that changes the board (a result, an
operator hiding a submission, a new ranking rule) is seen on the very next read, with or without
an ETag. Only what every viewer sees alike may be kept by a cache in front of the site: an
anonymous reader's public board, for a few seconds; never a signed-in viewer's page, a private
board or a hidden one. The site keeps that answer itself for as long, and gives it to the next
anonymous reader without reading the database while the board is unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.renderers import JSONRenderer

from plumbing.redis_client import redis_client
from submissions.admin.services import submission_flag_set, task_leaderboard_set
from submissions.lifecycle import selectors
from submissions.lifecycle.services import submission_succeed
from submissions.models import Task
from submissions.models.boards import LeaderboardEntry
from submissions.web.serializers import LeaderboardRowSerializer, leaderboard_rows_data
from tests.submissions.admin_support import task_change_data
from tests.submissions.test_leaderboard_read_models import result, running
from tests.submissions.test_ranking_rules import rule_set, timed
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

PAGE = "/tasks/digits/"
API = "/api/tasks/digits/leaderboard/"
SHARED = "public, max-age=5"
PRIVATE = "private, no-cache"


def api_users(client: Client | None = None, url: str = API) -> list[str]:
    return [row["user"] for row in (client or Client()).get(url).json()["rows"]]


def board_reads(client: Client, url: str) -> int:
    """How many of the queries answering ``url`` read the board's kept rows."""
    table = LeaderboardEntry._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return sum(table in q["sql"] for q in queries.captured_queries)


@pytest.mark.parametrize("url", [PAGE, API])
def test_a_reload_of_an_unchanged_board_does_not_read_its_rows_again(
    make_task: Any, bob: Any, url: str
) -> None:
    scored(make_task(), bob, 0.5)
    client = Client()
    assert board_reads(client, url) > 0
    assert board_reads(client, url) == 0
    assert board_reads(Client(), url) == 0  # another reader, no ETag: the same kept rows


def test_a_result_landing_is_on_the_next_read_of_the_cached_page_and_api(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    assert api_users() == ["bob"] and b"alice" not in Client().get(PAGE).content
    assert submission_succeed(submission_id=running(task, alice).pk, result=result(0.9))
    assert api_users() == ["alice", "bob"]
    assert b"alice" in Client().get(PAGE).content


def test_an_operator_hiding_a_submission_takes_it_off_the_cached_board(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.9)
    shown = scored(task, bob, 0.5)
    assert api_users() == ["alice", "bob"] and b"bob" in Client().get(PAGE).content
    submission_flag_set(submission_ids=[shown.pk], flag="hidden", value=True, reason="a copy")
    assert api_users() == ["alice"]
    assert b'data-user="bob"' not in Client().get(PAGE).content


def test_a_new_ranking_rule_re_ranks_the_cached_board(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task()
    scored(task, alice, 0.70, **timed(1.0))
    scored(task, bob, 0.95, **timed(40.0))
    assert api_users() == ["bob", "alice"]
    rule_set(task_id=task.pk, kind="constrained", latency_percentile="p95", latency_budget_ms=20)
    rows = Client().get(API).json()["rows"]
    assert [(r["user"], r["rank"]) for r in rows] == [("alice", 1), ("bob", None)]


def test_the_apis_rows_are_the_row_serializers_json_to_the_byte(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.9, **timed(2.5, parameters=1_000))
    scored(task, bob, 0.5)  # never timed: its latency and costs are null
    rows = selectors.leaderboard_page(task=task).rows
    expected = LeaderboardRowSerializer(rows, many=True, context={"metric": task.metric}).data
    data = leaderboard_rows_data(rows, metric=task.metric)
    assert JSONRenderer().render(data) == JSONRenderer().render(expected)
    assert json.loads(JSONRenderer().render(expected))[1]["latency_p50_ms"] is None


@pytest.mark.parametrize("url", [PAGE, API])
def test_an_anonymous_reader_of_a_public_board_may_be_served_by_a_shared_cache(
    make_task: Any, bob: Any, url: str
) -> None:
    scored(make_task(), bob, 0.5)
    response = Client().get(url)
    assert response["Cache-Control"] == SHARED and response["ETag"]
    # a cache in front keeps it apart from a signed-in viewer's, who sends a session cookie
    assert "Cookie" in response["Vary"]


@pytest.mark.parametrize("url", [PAGE, API])
def test_a_signed_in_viewers_board_is_never_kept_by_a_shared_cache(
    make_task: Any, alice: Any, bob: Any, url: str
) -> None:
    scored(make_task(), bob, 0.5)
    client = Client()
    client.force_login(alice)
    assert client.get(url)["Cache-Control"] == PRIVATE


@pytest.mark.parametrize("url", [PAGE, API])
def test_a_revealed_private_board_is_never_kept_by_a_shared_cache(
    make_task: Any, bob: Any, url: str
) -> None:
    task = make_task()
    scored(task, bob, 0.5, score_private=0.4)
    task_leaderboard_set(task_ids=[task.pk], private_revealed=True)
    response = Client().get(url + "?board=private")
    assert response.status_code == 200 and response["Cache-Control"] == PRIVATE


@pytest.mark.parametrize("url", [PAGE, API])
def test_a_hidden_board_is_never_kept_by_a_shared_cache(
    make_task: Any, bob: Any, operator: Any, url: str
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    task_leaderboard_set(task_ids=[task.pk], leaderboard=Task.Leaderboard.HIDDEN)
    staff = Client()
    staff.force_login(operator)
    assert api_users(staff) == ["bob"]  # operators still see it, privately
    assert staff.get(url)["Cache-Control"] == PRIVATE
    assert "public" not in Client().get(url).get("Cache-Control", "")


def test_a_signed_in_viewer_never_gets_the_page_kept_for_anonymous_readers(
    make_task: Any, alice: Any, bob: Any
) -> None:
    scored(make_task(), alice, 0.5)
    assert b"Log in" in Client().get(PAGE).content
    client = Client()
    client.force_login(alice)
    page = client.get(PAGE).content.decode()
    assert "Log out alice" in page and "chip-you" in page


@pytest.mark.parametrize("url", [PAGE, API])
def test_an_anonymous_reload_of_a_public_board_reads_nothing_from_the_database(
    make_task: Any, bob: Any, url: str, django_assert_num_queries: Any
) -> None:
    scored(make_task(), bob, 0.5)
    first = Client().get(url)
    with django_assert_num_queries(0):
        again = Client().get(url)
        unchanged = Client().get(url, HTTP_IF_NONE_MATCH=first["ETag"])
        junk = Client().get(url + "?utm_source=mail")  # the same board: the same kept answer
    assert again.content == first.content and again["ETag"] == first["ETag"]
    assert again["Cache-Control"] == SHARED and "Cookie" in again["Vary"]
    assert unchanged.status_code == 304
    assert junk.status_code == 200 and junk["ETag"] == first["ETag"]


@pytest.mark.parametrize("url", [PAGE, API])
def test_the_answer_kept_for_anonymous_readers_follows_results_and_operators(
    make_task: Any, alice: Any, bob: Any, url: str
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    kept = Client().get(url)
    assert b"alice" not in kept.content
    assert submission_succeed(submission_id=running(task, alice).pk, result=result(0.9))
    landed = Client().get(url, HTTP_IF_NONE_MATCH=kept["ETag"])
    assert landed.status_code == 200 and b"alice" in landed.content
    task_leaderboard_set(task_ids=[task.pk], leaderboard=Task.Leaderboard.HIDDEN)
    assert b"alice" not in Client().get(url).content


@pytest.mark.parametrize("url", [PAGE, API])
def test_the_answer_kept_for_anonymous_readers_is_read_by_the_next_release_too(
    make_task: Any, bob: Any, url: str
) -> None:
    """After a deploy, web processes of the new release read answers the old one kept (for up
    to ``PUBLIC_MAX_AGE_S``): they are kept as plain values, never as a pickled class of ours
    that the next release may have moved, and one in a shape this release does not know is made
    afresh, not an error."""
    scored(make_task(), bob, 0.5)
    first = Client().get(url)
    prefix = cache.make_key("")
    redis = redis_client(settings.REDIS_URL)
    (raw_key,) = redis.keys(f"{prefix}public-answer{settings.BOARD_CACHE_NAMESPACE}:*")
    assert b"submissions." not in redis.get(raw_key)  # no class of ours in the pickle
    cache.set(raw_key.decode().removeprefix(prefix), {"kept": "by another release"}, 5)
    again = Client().get(url)
    assert again.status_code == 200 and again.content == first.content
    assert again["ETag"] == first["ETag"] and again["Cache-Control"] == SHARED


def test_an_edit_of_the_task_in_the_admin_is_on_the_next_anonymous_read(
    make_task: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    assert b"Rules of the house" not in Client().get(PAGE).content  # kept for the next reader
    staff = Client()
    staff.force_login(operator)
    data = task_change_data(staff, task.pk, rules="Rules of the house")
    assert staff.post(f"/admin/submissions/task/{task.pk}/change/", data).status_code == 302
    assert b"Rules of the house" in Client().get(PAGE).content
