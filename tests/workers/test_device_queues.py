"""Device-aware queues and fair turns, with real rq workers on the real test Redis.

This machine has no GPU: "GPU workers" here are CPU processes told which classes they serve
(EVAL_DEVICE_CLASSES); the NVML/CUDA side of the derivation is the pure ``served_classes``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient
from rq import Queue

from evaluation.runner import CUDA_NOT_ACTIVE
from queueing.queues import queue_name
from submissions.lifecycle.quotas import quota_get
from submissions.lifecycle.services import submission_cancel, submission_rerun
from submissions.models import DeviceClass, Submission
from submissions.teams.services import team_create, team_invite_create, team_join
from tests.conftest import onnx_upload
from tests.workers.fleet_support import (
    fast_model,
    final,
    online_workers,
    row,
    start_worker,
    submit,
    wait_for,
)
from workers import recovery
from workers.classes import ClassRule, served_classes
from workers.dispatch import fair_pick, submission_id_of
from workers.worker import EvaluationWorker

pytestmark = pytest.mark.django_db(transaction=True)
_ = start_worker  # a fixture, used by name
A40 = ClassRule("a40", gpu_name_contains="A40")


def test_a_worker_serves_the_classes_of_its_device() -> None:
    rules = [ClassRule("cpu"), ClassRule("gpu"), A40, ClassRule("h100", "H100")]

    assert served_classes(device="cpu", gpu_name=None, override=[], rules=rules) == ["cpu"]
    assert served_classes(device="cuda", gpu_name="NVIDIA A40", override=[], rules=rules) == [
        "gpu",
        "a40",
    ]
    assert served_classes(device="cuda", gpu_name="Tesla T4", override=[], rules=rules) == ["gpu"]
    override = ["a40", "gpu", "a40"]
    assert served_classes(device="cpu", gpu_name=None, override=override, rules=rules) == [
        "a40",
        "gpu",
    ]


def api_upload(client: APIClient, slug: str) -> Any:
    upload = onnx_upload(fast_model())
    return client.post("/api/submissions/", {"task": slug, "file": upload}, format="multipart")


def class_queue_ids(queue: Any, device_class: str) -> list[str]:
    return Queue(queue_name(device_class), connection=queue.connection).job_ids


def cpu_worker(queue: Any) -> EvaluationWorker:
    """A real rq worker started on the evaluation queue: it resolves its device's classes."""
    return EvaluationWorker([queue], connection=queue.connection, name="cpu-burst")


def test_a_cpu_worker_never_takes_a_gpu_class_job_and_the_upload_says_why(
    queue: Any, alice: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    cpu_task = make_task()
    gpu_task = make_task(slug="digits-gpu", requires_gpu=True)
    client = APIClient()
    client.force_authenticate(alice)
    page = Client()
    page.force_login(alice)

    before = client.get(f"/api/tasks/{gpu_task.slug}/").json()
    upload_page = page.get(f"/tasks/{gpu_task.slug}/submit/").content.decode()
    response = api_upload(client, gpu_task.slug)
    on_cpu = submit(alice, cpu_task, fast_model())
    worker = cpu_worker(queue)
    worker.work(burst=True, with_scheduler=False)

    assert worker.device_classes == ["cpu"]
    assert before["device_class"] == "gpu" and before["requires_gpu"] is True
    assert before["device_notice"].startswith("No evaluation machine for this task's device")
    assert "data-device-notice" in upload_page
    assert response.status_code == 201 and response.json()["notice"] == before["device_notice"]
    waiting = Submission.objects.get(pk=response.json()["id"])
    assert waiting.status == "queued" and waiting.attempts == 0  # never taken
    assert class_queue_ids(queue, "gpu") == [waiting.job_id]
    assert row(on_cpu).status == "succeeded"
    quota = quota_get(user=alice, task=gpu_task)
    assert (quota.used_today, quota.used_total, quota.waiting) == (0, 0, 1)
    detail = client.get(f"/api/submissions/{waiting.pk}/").json()
    assert detail["queue"]["waiting_for_device"] is True and detail["queue_position"] == 1


def test_a_gpu_class_worker_takes_the_job_and_a_cuda_fallback_costs_no_quota(
    queue: Any, alice: Any, make_task: Any, start_worker: Any
) -> None:
    gpu_task = make_task(slug="digits-gpu", requires_gpu=True)
    submission = submit(alice, gpu_task, fast_model())
    worker = start_worker("gpu-host-7", EVAL_DEVICE_CLASSES="gpu")

    online = wait_for("the worker", lambda: online_workers(queue).get(worker.name), 30, [worker])
    done = wait_for("the evaluation", lambda: final(submission), 60, [worker])

    assert online.device_classes == ["gpu"]
    # No CUDA on this machine: the runner refuses to score on CPU, the participant is told
    # plainly, without the worker's (host's) name, and the quota is not charged.
    assert done.status == "failed" and done.error_message == CUDA_NOT_ACTIVE
    assert "gpu-host-7" not in done.error_message and "gpu-host-7" in done.log
    assert done.failed_by_system
    assert quota_get(user=alice, task=gpu_task).used_today == 0


def test_user_bs_single_job_starts_before_user_as_tenth(
    queue: Any, alice: Any, bob: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    task = make_task(submissions_per_day=100, queued_per_user=20)
    alices = [submit(alice, task, fast_model()) for _ in range(10)]
    bobs = submit(bob, task, fast_model())

    cpu_worker(queue).work(burst=True, with_scheduler=False)

    starts = sorted(Submission.objects.all(), key=lambda s: s.started_at)
    assert all(s.status == "succeeded" for s in starts)
    assert [s.pk for s in starts[:2]] == [alices[0].pk, bobs.pk]  # then alice's turn again
    assert row(bobs).started_at < row(alices[1]).started_at


def test_a_teams_members_share_their_turns(
    queue: Any, alice: Any, bob: Any, django_user_model: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    task = make_task(submissions_per_day=100, queued_per_user=20, max_team_size=2)
    team = team_create(user=alice, task=task, name="Lab A")
    team_join(user=bob, code=team_invite_create(user=alice, team=team).code)
    carol = django_user_model.objects.create_user("carol")
    alices = [submit(alice, task, fast_model()) for _ in range(2)]
    bobs = submit(bob, task, fast_model())
    carols = submit(carol, task, fast_model())

    cpu_worker(queue).work(burst=True, with_scheduler=False)

    starts = sorted(Submission.objects.all(), key=lambda s: s.started_at)
    # Lab A's first, carol's first, then Lab A's second and third: bob's first upload is his
    # team's second turn, not a turn of his own.
    assert [s.pk for s in starts] == [alices[0].pk, carols.pk, alices[1].pk, bobs.pk]


def test_an_operator_rerun_and_a_baseline_go_first(
    queue: Any, alice: Any, bob: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    task = make_task(submissions_per_day=100)
    old = submit(bob, task, fast_model())
    cpu_worker(queue).work(burst=True, with_scheduler=False)
    waiting = [submit(alice, task, fast_model()) for _ in range(3)]
    baseline = submit(bob, task, fast_model())
    Submission.objects.filter(pk=baseline.pk).update(is_baseline=True)
    assert submission_rerun(submission_id=old.pk)

    cpu_worker(queue).work(burst=True, with_scheduler=False)

    starts = sorted(Submission.objects.all(), key=lambda s: s.started_at)
    assert [s.pk for s in starts[:2]] == [old.pk, baseline.pk]
    assert [s.pk for s in starts[2:]] == [s.pk for s in waiting]


def test_a_cancelled_submission_is_never_swapped_in(
    queue: Any, alice: Any, bob: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    task = make_task(submissions_per_day=100)
    alices = [submit(alice, task, fast_model()) for _ in range(3)]
    bobs = submit(bob, task, fast_model())
    assert submission_cancel(submission_id=bobs.pk, user=bob)

    cpu_worker(queue).work(burst=True, with_scheduler=False)

    assert row(bobs).status == "cancelled" and row(bobs).started_at is None
    assert [row(s).status for s in alices] == ["succeeded"] * 3
    assert queue.count == 0


def test_the_per_user_limit_of_queued_submissions_refuses_with_a_message(
    queue: Any, alice: Any, bob: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100, queued_per_user=2)
    client = APIClient()
    client.force_authenticate(alice)

    codes = [api_upload(client, task.slug).status_code for _ in range(2)]
    refused = api_upload(client, task.slug)

    assert codes == [201, 201] and refused.status_code == 400
    assert refused.json() == {
        "file": [
            "You already have 2 submission(s) queued or running for this task, the most allowed "
            "at once (2). Upload again when one has finished, or cancel one you no longer need."
        ]
    }
    assert Submission.objects.count() == 2 and queue.count == 2
    submit(bob, task, fast_model())  # the limit is per user


def test_a_teams_members_share_its_limit_of_queued_submissions(
    queue: Any, alice: Any, bob: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100, queued_per_user=2, max_team_size=2)
    team = team_create(user=alice, task=task, name="Lab A")
    team_join(user=bob, code=team_invite_create(user=alice, team=team).code)
    submit(alice, task, fast_model())
    client = APIClient()
    client.force_authenticate(bob)

    codes = [api_upload(client, task.slug).status_code for _ in range(2)]

    assert codes == [201, 400]
    assert (
        api_upload(client, task.slug)
        .json()["file"][0]
        .startswith("Your team already has 2 submission(s) queued or running for this task")
    )
    assert Submission.objects.filter(team=team).count() == 2


def test_the_queue_api_gives_positions_and_estimates_per_class(
    queue: Any, alice: Any, bob: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    task = make_task(submissions_per_day=100)
    cpu_worker(queue).publish_heartbeat(force=True)  # one CPU worker online, idle
    for _ in range(2):
        submit(bob, task, fast_model())
    mine = submit(alice, task, fast_model())
    client = APIClient()
    client.force_authenticate(alice)
    Submission.objects.create(  # one finished run of 40 s: the class's median run time
        user=alice, task=task, sha256="f" * 64, size_bytes=1, original_name="x.onnx",
        status="succeeded", started_at=row(mine).created_at,
        finished_at=row(mine).created_at + timedelta(seconds=40),
    )  # fmt: skip

    body = client.get("/api/queue/").json()
    classes = {c["slug"]: c for c in body["device_classes"]}

    # Turns: bob has never started one, alice has: bob's first, then alice's, then bob's second.
    assert body["mine"] == [
        {
            "id": mine.pk,
            "task": task.slug,
            "device_class": "cpu",
            "position": 2,
            "estimated_wait_s": 40.0,
            "waiting_for_device": False,
        }
    ]
    assert classes["cpu"]["queued"] == 3 and classes["cpu"]["workers_online"] == 1
    assert classes["cpu"]["median_run_s"] == 40.0 and classes["cpu"]["warning"] == ""
    detail = client.get(f"/api/submissions/{mine.pk}/").json()
    assert detail["queue_position"] == 2 and detail["queue"]["estimated_wait_s"] == 40.0


def test_redis_lost_gpu_class_submissions_come_back_on_their_own_queue(
    queue: Any, alice: Any, make_task: Any
) -> None:
    gpu_task = make_task(slug="digits-gpu", requires_gpu=True)
    submission = submit(alice, gpu_task, fast_model())
    queue.connection.flushdb()

    report = recovery.reconcile(connection=queue.connection)

    assert report.enqueued == [submission.pk]
    assert class_queue_ids(queue, "gpu") == [row(submission).job_id] and queue.count == 0


def test_a_job_whose_task_moved_to_another_class_goes_to_that_class(
    queue: Any, alice: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    DeviceClass.objects.create(slug="a40", name="NVIDIA A40", gpu_name_contains="A40")
    task = make_task()
    submission = submit(alice, task, fast_model())
    task.device_class_id = "a40"
    task.save()

    cpu_worker(queue).work(burst=True, with_scheduler=False)

    assert row(submission).status == "queued"
    assert class_queue_ids(queue, "a40") == [row(submission).job_id] and queue.count == 0


def test_the_fair_order_is_asked_only_while_other_jobs_wait_and_spares_the_row_read(
    queue: Any, alice: Any, bob: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    task = make_task(submissions_per_day=100)
    worker = cpu_worker(queue)
    first, second = submit(alice, task, fast_model()), submit(bob, task, fast_model())

    def pick_next() -> tuple[Any, list[str]]:
        job, popped_from = Queue.dequeue_any(
            list(worker.class_queues.values()), None, connection=queue.connection
        )
        with CaptureQueriesContext(connection) as queries:
            picked = fair_pick(
                job, popped_from, classes=worker.device_classes, queues=worker.class_queues
            )
        assert picked is not None
        return picked[0], [q["sql"] for q in queries.captured_queries]

    # bob's waits too: the fair order is asked, and puts the popped job first, so its row is
    # not read as well
    job, asked = pick_next()
    assert submission_id_of(job) == first.pk
    assert len(asked) == 1 and "WITH queued" in asked[0]
    job, asked = pick_next()  # nothing else waits: only the popped job's row is read
    assert submission_id_of(job) == second.pk
    assert len(asked) == 1 and "WITH queued" not in asked[0]
