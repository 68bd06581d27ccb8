"""Leaderboard ranking: best visible succeeded submission per user, metric direction, ties."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from submissions.lifecycle.selectors import leaderboard
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db


def ranking(task: Any) -> list[tuple[str, float]]:
    return [(row.submission.user.username, row.submission.score) for row in leaderboard(task=task)]


def test_higher_is_better_metric_ranks_descending(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.6)
    scored(task, bob, 0.9)
    scored(task, operator, 0.75)
    assert ranking(task) == [("bob", 0.9), ("operator", 0.75), ("alice", 0.6)]


def test_lower_is_better_metric_ranks_ascending(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task(metric="mse")
    scored(task, alice, 0.2)
    scored(task, bob, 0.1)
    scored(task, bob, 0.3)
    assert ranking(task) == [("bob", 0.1), ("alice", 0.2)]


def test_ties_go_to_the_earlier_submission(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task()
    now = timezone.now()
    scored(task, bob, 0.8, created_at=now)
    scored(task, alice, 0.8, created_at=now - timedelta(hours=1))
    assert ranking(task) == [("alice", 0.8), ("bob", 0.8)]


def test_hidden_disqualified_and_unfinished_submissions_are_left_out(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.99, hidden=True)
    scored(task, alice, 0.5)
    scored(task, bob, 0.98, disqualified=True)
    scored(task, operator, 0.97, status="failed")
    assert ranking(task) == [("alice", 0.5)]


def test_leaderboard_query_count_does_not_grow_with_submissions(
    make_task: Any, alice: Any, bob: Any, django_assert_num_queries: Any
) -> None:
    task = make_task()
    for i in range(30):
        scored(task, alice if i % 2 else bob, i / 100)
    with django_assert_num_queries(1):
        rows = leaderboard(task=task)
        assert [row.submission.user.username for row in rows] == ["alice", "bob"]
