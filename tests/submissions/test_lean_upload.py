"""The upload request does the least it can: one INSERT that already names the job, the job
enqueued under that id after the commit, one Redis connection pool per process, and the checks
before the INSERT served by indexes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queueing.queues import class_queue, evaluation_redis
from submissions.lifecycle import services
from submissions.models import Submission
from tests.builders import linear_classifier
from tests.conftest import onnx_upload

pytestmark = pytest.mark.django_db(transaction=True)


def upload(user: Any, task: Any, seed: int = 0) -> Submission:
    rng = np.random.default_rng(seed)
    model = linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))
    return services.submission_create(user=user, task=task, upload=onnx_upload(model))


def test_an_upload_writes_its_job_id_with_the_row_in_one_insert_and_no_update(
    alice: Any, make_task: Any, queue: Any
) -> None:
    task = make_task()
    with CaptureQueriesContext(connection) as queries:
        submission = upload(alice, task)
    writes = [
        q["sql"].split()[0]
        for q in queries.captured_queries
        if "submissions_submission" in q["sql"] and not q["sql"].startswith("SELECT")
    ]
    assert writes == ["INSERT"]
    assert submission.job_id
    assert Submission.objects.get(pk=submission.pk).job_id == submission.job_id
    assert queue.job_ids == [submission.job_id]  # enqueued under the id the row already had


def test_an_upload_looks_up_its_entrant_once_alone_and_in_a_team(
    alice: Any, bob: Any, make_task: Any, queue: Any
) -> None:
    """The team is looked up once for the lock, the duplicate check, the quota and the queued
    limit together; in a team, once more after its lock (a merge may have moved the member)."""
    from submissions.models import Team, TeamMembership

    def reads(user: Any, seed: int) -> tuple[int, int]:
        """Reads of memberships, and of teams, in one upload by ``user``."""
        with CaptureQueriesContext(connection) as queries:
            upload(user, task, seed)
        sql = [q["sql"] for q in queries.captured_queries]
        return (
            sum('FROM "submissions_teammembership"' in q for q in sql),
            sum('FROM "submissions_team"' in q for q in sql),
        )

    task = make_task()
    assert reads(alice, 0) == (1, 0)  # alone: no team to read
    team = Team.objects.create(task=task, name="Lab B", created_by=bob)
    TeamMembership.objects.create(task=task, team=team, user=bob)
    assert reads(bob, 1) == (2, 2)  # in a team: the check after its lock; its lock and its name


def test_uploads_in_one_process_share_one_redis_client(
    alice: Any, make_task: Any, queue: Any
) -> None:
    task = make_task(submissions_per_day=10)
    client = evaluation_redis()
    pool = client.connection_pool
    upload(alice, task, 0)
    opened = pool._created_connections
    for seed in (1, 2):
        upload(alice, task, seed)
    assert evaluation_redis() is client
    assert class_queue("cpu").connection is client
    assert pool._created_connections == opened  # the uploads reused it, none per request
    assert queue.count == 3


def test_an_uploads_job_goes_to_redis_in_one_transaction(
    alice: Any, make_task: Any, queue: Any
) -> None:
    """rq, given no pipeline, registers the queue in one round trip and saves and pushes the job
    in another; the upload hands it one. Read from Redis's own MONITOR of the commands."""
    task = make_task(submissions_per_day=10)
    upload(alice, task, 0)  # the client's connection is open before the monitor starts
    watcher = redis.Redis.from_url(django_settings.REDIS_URL, socket_timeout=10)
    with watcher.monitor() as monitor:
        submission = upload(alice, task, 1)
        commands: list[str] = []
        while not commands or commands[-1] != "EXEC":
            commands.append(monitor.next_command()["command"].split()[0].upper())

    assert commands[0] == "MULTI" and commands.count("MULTI") == 1
    assert {"SADD", "HSET", "RPUSH"} <= set(commands)
    assert queue.job_ids[-1] == submission.job_id


def test_the_uploads_one_read_of_the_entrant_is_served_by_the_quota_index(
    alice: Any, make_task: Any
) -> None:
    from submissions.lifecycle.quotas import quota_and_duplicate

    with connection.cursor() as cursor:  # what the database has (PostgreSQL or SQLite)
        present = set(connection.introspection.get_constraints(cursor, "submissions_submission"))
    assert "submission_quota_idx" in present
    if connection.vendor != "postgresql":
        return
    task = make_task()
    with CaptureQueriesContext(connection) as queries:
        quota_and_duplicate(user=alice, task=task, team_id=None, sha256="0" * 64)
    (aggregate,) = [q["sql"] for q in queries.captured_queries if "COUNT" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # an empty table would be read whole
        try:
            cursor.execute("EXPLAIN " + aggregate)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")
    assert "submission_quota_idx" in plan


def test_a_jobs_start_reads_the_task_with_all_its_evaluation_needs(
    alice: Any, make_task: Any, queue: Any, django_assert_num_queries: Any
) -> None:
    """The other end of the upload: the worker's first read brings the task's spec along
    (its device class included), so the evaluation asks the database nothing more before its
    result."""
    submission = upload(alice, make_task())
    started = services.submission_start(submission_id=submission.pk, worker_name="w")
    assert started is not None
    with django_assert_num_queries(0):
        assert started.task.spec().requires_gpu is False
        assert started.task.current_dataset_id is None


def test_the_duplicate_check_the_quota_and_the_queued_limit_share_one_read(
    alice: Any, make_task: Any, queue: Any
) -> None:
    """An upload reads the entrant's submissions once: one aggregate for the duplicate check,
    the quota and the queued limit together (each had a query of its own)."""
    task = make_task()
    with CaptureQueriesContext(connection) as queries:
        upload(alice, task)
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and 'FROM "submissions_submission"' in q["sql"]
    ]
    assert len(reads) == 1
    assert "COUNT" in reads[0] and '"sha256" =' in reads[0]


def test_the_submission_serializers_build_their_fields_once_per_class(
    alice: Any, make_task: Any, queue: Any
) -> None:
    """The fields are built once per serializer class and copied for each serializer, which
    binds its own copies: two submissions come out as themselves, and a subclass keeps its
    extra field."""
    from rest_framework import serializers

    from submissions.web.serializers import SubmissionDetailSerializer, SubmissionSerializer

    task = make_task()
    first, second = upload(alice, task, 1), upload(alice, task, 2)
    one, two = SubmissionSerializer(first), SubmissionSerializer(second)
    assert one.data["url"] == f"/submissions/{first.pk}/"
    assert two.data["url"] == f"/submissions/{second.pk}/"
    assert one.fields["notices"] is not two.fields["notices"]
    assert one.fields["notices"].parent is one and two.fields["notices"].parent is two
    built = serializers.ModelSerializer.get_fields(SubmissionSerializer(first))  # uncached
    assert list(one.fields) == list(built)
    detail = SubmissionDetailSerializer(first)
    assert list(detail.fields) == [*built, "queue_position", "run_report"]
    assert "queue_position" not in SubmissionSerializer(second).fields


def test_an_api_upload_reads_the_task_and_its_device_class_in_one_query_and_nothing_else(
    alice: Any, make_task: Any, queue: Any
) -> None:
    """One read of the task with its device class (the inspection and the notice need it), not
    its current dataset, and no other read of either."""
    from rest_framework.test import APIClient

    task = make_task()
    client = APIClient()
    client.force_authenticate(alice)
    model = linear_classifier(np.ones((64, 10)), np.zeros(10))
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/api/submissions/", {"task": task.slug, "file": onnx_upload(model)})
    assert response.status_code == 201, response.content
    assert response.json()["notice"].startswith("No evaluation machine")  # none online

    sql = [q["sql"] for q in queries.captured_queries]
    (task_read,) = [q for q in sql if 'FROM "submissions_task"' in q]
    assert 'JOIN "submissions_deviceclass"' in task_read
    assert "datasetversion" not in task_read
    assert not any('FROM "submissions_deviceclass"' in q for q in sql)
