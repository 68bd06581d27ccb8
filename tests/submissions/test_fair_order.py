"""The fair order (submissions/lifecycle/turns.py) is one SQL statement; here it is held to the
rules of
the module's docstring written out in Python, on a mix of entrants (users, teams, operator
re-runs, baselines, re-scores, two device classes, entrants who never started), on this run's
database (PostgreSQL in CI, SQLite embedded). On PostgreSQL, an entrant's latest start is looked
up once per entrant, not once per queued submission: that was 880-885 ms a pick with 2,099
queued (benchmarks/fair_order.py)."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from submissions.lifecycle import turns
from submissions.models import Submission
from submissions.teams.services import team_create
from tests.submissions.test_quota import stored

pytestmark = pytest.mark.django_db
Status = Submission.Status


def rules_order(classes: Sequence[str]) -> list[int]:
    """The fair order as the docstring of submissions/lifecycle/turns.py states it, computed in
    Python."""
    every = Submission.objects.select_related("task")
    rows = [s for s in every if s.task.device_class_id in classes]

    def entrant(s: Submission) -> tuple[str, int]:
        return ("team", s.team_id) if s.team_id is not None else ("user", s.user_id)

    latest: dict[tuple[str, int], Any] = {}
    for s in rows:
        if s.started_at is not None:
            latest[entrant(s)] = max(latest.get(entrant(s), s.started_at), s.started_at)

    def first(s: Submission) -> tuple[int, int]:
        return (-s.priority, -int(s.is_baseline))

    queued = [s for s in rows if s.status == Status.QUEUED]
    turn: dict[int, int] = {}
    counted: dict[tuple[str, int], int] = defaultdict(int)
    for s in sorted(queued, key=lambda s: (*first(s), s.created_at, s.pk)):
        counted[entrant(s)] += 1
        turn[s.pk] = counted[entrant(s)]

    def key(s: Submission) -> tuple[Any, ...]:
        last = latest.get(entrant(s))  # never started: first within the turn
        return (*first(s), turn[s.pk], last is not None, last or s.created_at, s.created_at, s.pk)

    return [s.pk for s in sorted(queued, key=key)]


@pytest.fixture
def mixed_queue(alice: Any, bob: Any, django_user_model: Any, make_task: Any) -> Iterator[None]:
    cpu_task = make_task(max_team_size=3)
    gpu_task = make_task(slug="gpu-digits", requires_gpu=True, max_team_size=3)
    carol = django_user_model.objects.create_user("carol")
    dave = django_user_model.objects.create_user("dave")
    teams = {
        cpu_task.pk: team_create(user=carol, task=cpu_task, name="Lab").pk,
        gpu_task.pk: team_create(user=dave, task=gpu_task, name="Lab GPU").pk,
    }
    rng = random.Random(20261126)
    now = timezone.now()
    statuses = [Status.QUEUED] * 5 + [Status.SUCCEEDED, Status.FAILED, Status.RUNNING]
    for _ in range(90):
        task = rng.choice([cpu_task, cpu_task, gpu_task])
        user = rng.choice([alice, bob, carol, dave])
        status = rng.choice(statuses)
        # Uploads share a second now and then: the id decides between them.
        created = now - timedelta(seconds=rng.randrange(0, 400, 2))
        started = None
        if status != Status.QUEUED and rng.random() < 0.9:
            started = created + timedelta(seconds=rng.randrange(1, 100))
        stored(
            task,
            user,
            status=status,
            created_at=created,
            started_at=started,
            team_id=teams[task.pk] if user in (carol, dave) and rng.random() < 0.7 else None,
            priority=rng.choice([0] * 8 + [turns.RERUN_PRIORITY, Submission.RESCORE_PRIORITY]),
            is_baseline=rng.random() < 0.08,
            job_id=f"job-{rng.randrange(10**9)}",
        )
    yield


@pytest.mark.usefixtures("mixed_queue")
def test_the_fair_order_follows_the_rules_for_any_classes() -> None:
    seen = 0
    for classes in (["cpu"], ["gpu"], ["cpu", "gpu"], ["gpu", "cpu"], ["other"], []):
        expected = rules_order(classes)
        order = turns.fair_order(classes=classes)
        assert [row[0] for row in order] == expected
        jobs = dict(Submission.objects.values_list("pk", "job_id"))
        assert all(row[1] == jobs[row[0]] for row in order)
        assert turns.next_candidates(classes=classes, limit=3) == order[:3]
        seen += len(expected)
    assert seen > 60  # the mix queued enough to tell orders apart, in both classes


@pytest.mark.usefixtures("mixed_queue")
def test_queue_positions_are_places_in_each_classs_fair_order() -> None:
    cpu, gpu = rules_order(["cpu"]), rules_order(["gpu"])
    asked = [*cpu[::3], *gpu[1::2]]
    done = Submission.objects.exclude(status=Status.QUEUED).first()
    assert done is not None
    ours = list(Submission.objects.filter(pk__in=[*asked, done.pk]).select_related("task"))

    positions = turns.queue_positions(submissions=ours)

    expected = {pk: cpu.index(pk) + 1 for pk in cpu[::3]}
    expected |= {pk: gpu.index(pk) + 1 for pk in gpu[1::2]}
    assert positions == expected  # a submission that is not queued has no place
    assert turns.queue_positions(submissions=[]) == {}


def _subplan_loops(plan: dict[str, Any]) -> Iterator[int]:
    if plan.get("Parent Relationship") == "SubPlan":
        yield plan["Actual Loops"]
    for child in plan.get("Plans", []):
        yield from _subplan_loops(child)


def test_an_entrants_latest_start_is_looked_up_once_per_entrant(
    alice: Any, bob: Any, make_task: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's plan")
    task = make_task(submissions_per_day=1000, queued_per_user=1000)
    for user in (alice, bob):
        stored(task, user, status=Status.SUCCEEDED, started_at=timezone.now())
        for _ in range(40):
            stored(task, user, status=Status.QUEUED)

    sql, params = turns._fair_order_statement([task.device_class_id], limit=8)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (explained,) = cursor.fetchone()
    plan = explained if isinstance(explained, list) else json.loads(explained)
    loops = list(_subplan_loops(plan[0]["Plan"]))
    assert loops, "the latest start is no longer a subplan: check how it is looked up"
    assert sum(loops) == 2  # alice's and bob's, not 80 queued rows
    assert len(turns.next_candidates(classes=[task.device_class_id])) == 8
