"""The hostile corpus end to end: API upload, real Redis, a real worker and its model processes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rest_framework.test import APIClient
from rq.job import Job

from submissions.models import Submission
from tests.builders import digits_like, linear_classifier, linear_reference
from tests.conftest import onnx_upload
from tests.evaluation.hostile.corpus import Case, build_corpus

pytestmark = pytest.mark.django_db(transaction=True)
TIME_LIMIT_S = 2


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def upload(client: APIClient, task: str, data: bytes, filename: str = "model.onnx") -> Any:
    return client.post(
        "/api/submissions/", {"task": task, "file": onnx_upload(data, filename)}, format="multipart"
    )


def worker_name(queue: Any) -> str:
    return f"test-worker-{id(queue)}"  # the name the run_worker fixture gives its worker


def test_corpus_has_at_least_25_distinct_bad_files() -> None:
    cases = build_corpus()
    assert len(cases) >= 25
    assert len({case.name for case in cases}) == len(cases)
    assert len({(case.data, case.filename, case.task) for case in cases}) == len(cases)


def test_every_hostile_upload_gets_its_own_message_and_a_good_model_still_scores(
    alice: Any, make_task: Any, queue: Any, run_worker: Any, settings: Any
) -> None:
    # A tight memory limit so the bombs (1.6 GB each) fail fast; a good model needs far less.
    settings.EVAL_CPU_MEMORY_LIMIT_MB = 512
    # 37 uploads in a row: above the hourly upload rate limit, which has tests of its own.
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "uploads": "1000/hour"}
    arrays = digits_like(n=100, seed=5)
    # A GPU-class task never reaches this CPU worker: tests/workers/test_device_queues.py.
    limits = dict(
        time_limit_s=TIME_LIMIT_S,
        max_model_bytes=200_000,
        submissions_per_day=1000,
        queued_per_user=1000,
    )
    task = make_task(arrays, **limits)
    client = client_for(alice)
    cases = build_corpus(worker=worker_name(queue))

    wrong: list[str] = []
    queued: dict[int, Case] = {}
    for case in cases:
        response = upload(client, case.task, case.data, case.filename)
        if case.stage == "upload":
            message = response.json().get("file", [""])[0] if response.status_code == 400 else ""
            if response.status_code != 400 or not case.matches(message):
                wrong.append(f"{case.name}: upload answered {response.status_code} {message!r}")
        elif response.status_code != 201:
            wrong.append(f"{case.name}: refused at upload: {response.content!r}")
        else:
            queued[response.json()["id"]] = case
    assert not wrong, "\n".join(wrong)
    assert Submission.objects.count() == len(queued)  # refusals leave nothing behind

    # The rq job may run longer than the model's time limit: loading and scoring come on top,
    # and rq must never end a job that the watchdog is about to stop cleanly.
    a_job = Job.fetch(Submission.objects.first().job_id, connection=queue.connection)
    assert a_job.timeout > TIME_LIMIT_S + 60

    rng = np.random.default_rng(11)
    w, b = rng.normal(size=(64, 10)), rng.normal(size=10)
    good = upload(client, task.slug, linear_classifier(w, b), "good.onnx").json()

    run_worker()

    for submission in Submission.objects.filter(pk__in=queued):
        case = queued[submission.pk]
        if submission.status != "failed" or not case.matches(submission.error_message):
            wrong.append(f"{case.name}: {submission.status} {submission.error_message!r}")
        elif submission.failed_by_system or submission.attempts != 1:
            wrong.append(
                f"{case.name}: by_system={submission.failed_by_system} "
                f"attempts={submission.attempts}"
            )
    assert not wrong, "\n".join(wrong)

    detail = client.get(f"/api/submissions/{good['id']}/").json()
    logits = linear_reference(w, b, arrays["inputs"])
    public = arrays["split"] == "public"
    assert detail["status"] == "succeeded", detail["error_message"]
    assert detail["score"] == pytest.approx(
        float(np.mean(logits[public].argmax(1) == arrays["targets"][public])), abs=1e-12
    )
    assert detail["samples_evaluated"] == 100
    assert queue.count == 0
