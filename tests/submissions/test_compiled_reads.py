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


def _fields(instance: Any) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_a_compiled_object_is_the_instance_the_orm_gives_with_its_related_objects(
    alice: Any, make_task: Any
) -> None:
    from submissions.dataset_services import task_dataset_replace
    from submissions.services import JOB_START_READ, JOB_START_RELATED

    task = make_task(requires_gpu=True, leaderboard_frozen_at=timezone.now())
    task_dataset_replace(task_id=task.pk)  # a current dataset version to join
    scored = stored(
        task,
        alice,
        status=Status.SUCCEEDED,
        score=0.5,
        metrics={"accuracy": 0.5},
        batch_latencies_ms=[1.5, 2.0],
        finished_at=timezone.now(),
    )
    bare = stored(make_task(slug="bare"), alice)  # no dataset version: a null join

    for submission in (scored, bare):
        orm = Submission.objects.select_related(*JOB_START_RELATED).get(pk=submission.pk)
        with CaptureQueriesContext(connection) as queries:
            compiled = JOB_START_READ({"id": submission.pk})
            # The related objects came with it, as select_related brings them: no query here.
            pairs = [
                (compiled, orm),
                (compiled.task, orm.task),
                (compiled.task.device_class, orm.task.device_class),
                (compiled.task.current_dataset, orm.task.current_dataset),
            ]
        assert len(queries) == 1
        for mine, django in pairs:
            if django is None:
                assert mine is None
                continue
            assert type(mine) is type(django)
            assert _fields(mine) == _fields(django)
            assert not mine._state.adding and mine._state.db == django._state.db
    assert JOB_START_READ({"id": scored.pk}).metrics == {"accuracy": 0.5}  # JSON decoded
    assert JOB_START_READ({"id": 10**9}) is None


def test_a_compiled_object_compiles_without_a_query_and_refuses_what_it_cannot_bind(
    alice: Any, make_task: Any
) -> None:
    from submissions.compiled import CompiledObject

    task = make_task()
    read = CompiledObject(
        lambda values: Submission.objects.filter(task_id=values["task"]),
        sentinels={"task": -918_273_652},
    )
    with CaptureQueriesContext(connection) as queries:
        read.prepare()  # as a worker does before it forks its horses
    assert len(queries) == 0
    assert read({"task": task.pk}) is None
    stored(task, alice)
    assert read({"task": task.pk}).task_id == task.pk
    stored(task, alice)
    with pytest.raises(RuntimeError, match="more than one row"):
        read({"task": task.pk})
    derived = CompiledObject(
        lambda values: Submission.objects.filter(original_name__icontains=values["name"]),
        sentinels={"name": "sentinel name"},
    )
    with pytest.raises(RuntimeError, match="follows the values but is none of them"):
        derived.prepare()


def test_the_upload_reads_a_hidden_task_for_staff_only(
    alice: Any, operator: Any, make_task: Any
) -> None:
    from submissions.models import Task
    from submissions.selectors import task_get_for_upload

    hidden = make_task(slug="hidden", is_hidden=True)
    open_task = make_task(slug="open")
    assert task_get_for_upload(slug="open", user=alice).pk == open_task.pk
    assert task_get_for_upload(slug="hidden", user=operator).pk == hidden.pk
    with pytest.raises(Task.DoesNotExist):
        task_get_for_upload(slug="hidden", user=alice)
    with pytest.raises(Task.DoesNotExist):
        task_get_for_upload(slug="no-such-task", user=operator)
