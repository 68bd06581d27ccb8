"""Reads compiled once per process (submissions/compiled.py): the upload's quota read gives what
the ORM gives in every shape, on this test run's database (PostgreSQL in CI, SQLite embedded),
and a compiled read runs one statement and compiles it once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from submissions import quotas
from submissions.compiled import CompiledRead
from submissions.models import Submission
from submissions.teams import team_create
from submissions.turns import fair_order, next_candidates
from tests.submissions.test_quota import stored

pytestmark = pytest.mark.django_db
Status = Submission.Status


def entrant_rows(task: Any, user: Any, team_id: int | None = None) -> None:
    """One of each kind a quota tells apart, two of them older than a day."""
    for fields in (
        {"status": Status.QUEUED},
        {"status": Status.QUEUED, "attempts": 1},
        {"status": Status.RUNNING},
        {"status": Status.SUCCEEDED, "sha256": "a" * 64},
        {"status": Status.SUCCEEDED, "sha256": "a" * 64},
        {"status": Status.CANCELLED, "sha256": "b" * 64},
        {"status": Status.FAILED, "failed_by_system": True},
        {"status": Status.QUEUED, "priority": Submission.RESCORE_PRIORITY},
    ):
        stored(task, user, team_id=team_id, **fields)
    old = [stored(task, user, team_id=team_id, status=Status.SUCCEEDED) for _ in range(2)]
    Submission.objects.filter(pk__in=[s.pk for s in old]).update(
        created_at=timezone.now() - timedelta(hours=30)
    )


def test_the_quota_read_gives_what_the_orm_gives_in_every_shape(
    alice: Any, bob: Any, make_task: Any
) -> None:
    task = make_task(max_team_size=3, submissions_per_day=50)
    entrant_rows(task, alice)
    team = team_create(user=bob, task=task, name="Lab")
    entrant_rows(task, bob, team_id=team.pk)
    now = timezone.now()

    for user, team_id in ((alice, None), (bob, team.pk)):
        first_a = (
            Submission.objects.filter(task=task, user=user, sha256="a" * 64).order_by("pk").first()
        )
        assert first_a is not None
        duplicate = {None: None, "a" * 64: first_a.pk, "b" * 64: None, "c" * 64: None}
        for sha256 in (None, "a" * 64, "b" * 64, "c" * 64):
            values = {
                "user": user.pk,
                "task": task.pk,
                "team": team_id,
                "since": now - quotas.DAY,
                "sha256": sha256,
            }
            shape = (team_id is not None, sha256 is not None)
            compiled = quotas._counts(user=user, task=task, team_id=team_id, now=now, sha256=sha256)
            assert compiled == quotas._counts_orm(values, shape)
            assert compiled["total"] == 7 and compiled["today"] == 5  # the old two: not today
            assert compiled["waiting"] == 1 and compiled["active"] == 3
            assert compiled["oldest_today"] is not None and timezone.is_aware(
                compiled["oldest_today"]
            )
            if sha256 is not None:  # a cancelled submission's file may be sent again
                assert compiled["duplicate"] == duplicate[sha256]


def test_a_compiled_read_runs_one_statement_and_compiles_it_once(
    alice: Any, make_task: Any
) -> None:
    task = make_task()
    stored(task, alice, status=Status.QUEUED)
    runs: list[Any] = []

    def orm_read(values: Any, shape: Any) -> Any:
        runs.append(values["task"])
        return Submission.objects.filter(task_id=values["task"]).values("status").first()

    read = CompiledRead(orm_read, sentinels={"task": -918_273_649})

    with CaptureQueriesContext(connection) as queries:
        first = read({"task": task.pk})
        second = read({"task": task.pk})

    assert first == second == {"status": Status.QUEUED}
    # The ORM ran twice, with two sets of sentinels, to capture the SQL and tell its slots
    assert runs == [-918_273_649, -918_273_650]
    assert len(queries.captured_queries) == 4  # the captures, then one statement per read
    assert read({"task": task.pk + 1}) == {}  # no row


def test_a_constant_equal_to_a_sentinel_stays_a_constant(alice: Any, make_task: Any) -> None:
    task = make_task()
    stored(task, alice, status=Status.QUEUED)

    def orm_read(values: Any, shape: Any) -> Any:
        rows = Submission.objects.filter(task_id=values["task"]).exclude(task_id=-918_273_651)
        return rows.values("status").first()

    read = CompiledRead(orm_read, sentinels={"task": -918_273_651})

    # Bound to the caller's value, the exclusion would drop the row.
    assert read({"task": task.pk}) == {"status": Status.QUEUED}


def test_a_value_django_derives_from_a_sentinel_is_refused() -> None:
    def orm_read(values: Any, shape: Any) -> Any:  # icontains sends "%value%", not the value
        return Submission.objects.filter(original_name__icontains=values["name"]).first()

    read = CompiledRead(orm_read, sentinels={"name": "sentinel name"})
    with pytest.raises(RuntimeError, match="follows the values but is none of them"):
        read({"name": "x"})
    equal = CompiledRead(orm_read, sentinels={"name": "same", "other": "same"})
    with pytest.raises(ValueError, match="two sentinels are equal"):
        equal({"name": "x", "other": "x"})


def test_the_fair_order_read_gives_what_the_orm_gives_for_any_classes(
    alice: Any, bob: Any, make_task: Any
) -> None:
    cpu_task = make_task()
    gpu_task = make_task(slug="gpu-digits", requires_gpu=True)
    for task in (cpu_task, gpu_task, cpu_task):
        for user in (alice, bob, alice):
            stored(task, user, status=Status.QUEUED)
    stored(gpu_task, bob, status=Status.RUNNING)

    for classes in (["cpu"], ["gpu"], ["cpu", "gpu"], ["gpu", "cpu"], ["other"]):
        for limit in (1, 8):
            orm = fair_order(classes=classes).values_list(
                "id", "job_id", "task__device_class__slug"
            )
            expected = list(orm[:limit])
            assert next_candidates(classes=classes, limit=limit) == expected
            queued = {"cpu": 6, "gpu": 3, "other": 0}
            assert len(expected) == min(limit, sum(queued[name] for name in classes))
