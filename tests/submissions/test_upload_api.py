"""The core path through the REST API: upload, a real rq worker evaluates, results read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rest_framework.test import APIClient

from submissions.models import Submission
from tests.builders import digits_like, linear_classifier, linear_reference
from tests.conftest import onnx_upload

pytestmark = pytest.mark.django_db(transaction=True)


def token_client(username: str, password: str) -> APIClient:
    client = APIClient()
    response = client.post("/api/auth/token/", {"username": username, "password": password})
    assert response.status_code == 200, response.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    return client


def test_api_upload_is_scored_by_a_real_worker_exactly_like_numpy(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    arrays = digits_like(n=100, seed=7)
    task = make_task(arrays)
    rng = np.random.default_rng(3)
    w, b = rng.normal(size=(64, 10)), rng.normal(size=10)
    client = token_client("alice", "alice-password-1")

    response = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(linear_classifier(w, b)), "description": "linear"},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued"
    assert queue.count == 1

    run_worker()

    detail = client.get(f"/api/submissions/{body['id']}/").json()
    logits = linear_reference(w, b, arrays["inputs"])
    public = arrays["split"] == "public"
    expected = float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))
    assert detail["status"] == "succeeded", detail["error_message"]
    assert detail["score"] == pytest.approx(expected, abs=1e-12)
    assert detail["progress"] == 1.0
    assert detail["provider"] == "CPUExecutionProvider"
    assert detail["samples_evaluated"] == 100
    assert detail["latency_p50_ms"] > 0 and detail["throughput"] > 0
    assert set(detail["metrics"]) == {"accuracy", "top5_accuracy", "macro_f1"}
    assert "score_private" not in detail  # private scores stay hidden until revealed
    assert detail["ort_version"]


def test_refused_upload_answers_400_with_a_field_error_and_stores_nothing(
    alice: Any, make_task: Any, queue: Any
) -> None:
    task = make_task()
    client = token_client("alice", "alice-password-1")
    response = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(b"not a model")},
        format="multipart",
    )
    assert response.status_code == 400
    assert "not an ONNX model" in response.json()["file"][0]
    assert Submission.objects.count() == 0
    assert queue.count == 0


def test_upload_with_wrong_extension_is_refused(alice: Any, make_task: Any, queue: Any) -> None:
    task = make_task()
    client = token_client("alice", "alice-password-1")
    data = linear_classifier(np.zeros((64, 10)), np.zeros(10))
    response = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(data, "model.pt")},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json() == {"file": ["Upload a file with the .onnx extension."]}


def test_upload_to_unknown_task_is_a_400_naming_the_task_field(alice: Any, queue: Any) -> None:
    client = token_client("alice", "alice-password-1")
    data = linear_classifier(np.zeros((64, 10)), np.zeros(10))
    response = client.post(
        "/api/submissions/", {"task": "nope", "file": onnx_upload(data)}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json() == {"task": ["No task 'nope'."]}


def test_upload_to_a_hidden_task_reads_as_unknown(alice: Any, make_task: Any, queue: Any) -> None:
    make_task(slug="secret", is_hidden=True)
    client = token_client("alice", "alice-password-1")
    data = linear_classifier(np.zeros((64, 10)), np.zeros(10))
    response = client.post(
        "/api/submissions/", {"task": "secret", "file": onnx_upload(data)}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json() == {"task": ["No task 'secret'."]}
    assert Submission.objects.count() == 0


@pytest.mark.parametrize("field", ["task", "file", "description"])
def test_a_field_given_twice_is_refused_naming_it(
    field: str, alice: Any, make_task: Any, queue: Any
) -> None:
    make_task()
    make_task(slug="other")
    first, second = (
        onnx_upload(linear_classifier(np.full((64, 10), v), np.zeros(10))) for v in (0.0, 1.0)
    )
    fields: dict[str, Any] = {
        "task": ["digits", "other"] if field == "task" else "digits",
        "file": [first, second] if field == "file" else first,
        "description": ["one", "two"] if field == "description" else "one",
    }
    client = token_client("alice", "alice-password-1")

    response = client.post("/api/submissions/", fields, format="multipart")

    assert response.status_code == 400
    assert response.json() == {field: [f"Give '{field}' once, not 2 times."]}
    assert Submission.objects.count() == 0


def test_an_emoji_only_file_name_is_stored_under_a_visible_name(
    alice: Any, make_task: Any, queue: Any
) -> None:
    make_task()
    client = token_client("alice", "alice-password-1")
    data = linear_classifier(np.zeros((64, 10)), np.zeros(10))

    response = client.post(
        "/api/submissions/",
        {"task": "digits", "file": onnx_upload(data, "\U0001f600\U0001f680.onnx")},
        format="multipart",
    )

    assert response.status_code == 201, response.content
    stored = Submission.objects.get()
    assert stored.original_name == "\U0001f600\U0001f680.onnx"  # shown as the user named it
    assert Path(stored.model_file.name).name.startswith("model")
    assert stored.model_file.storage.exists(stored.model_file.name)


def test_anonymous_upload_is_refused(make_task: Any, queue: Any) -> None:
    task = make_task()
    data = linear_classifier(np.zeros((64, 10)), np.zeros(10))
    response = APIClient().post(
        "/api/submissions/", {"task": task.slug, "file": onnx_upload(data)}, format="multipart"
    )
    assert response.status_code == 401
    assert Submission.objects.count() == 0


def test_wrong_password_gets_no_token(alice: Any) -> None:
    response = APIClient().post("/api/auth/token/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 400


def test_model_failing_in_the_worker_ends_failed_and_the_worker_goes_on(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    task = make_task()
    client = token_client("alice", "alice-password-1")
    bad_w, bad_b = np.zeros((64, 10)), np.full(10, np.nan)
    good_w, good_b = np.eye(64, 10), np.zeros(10)
    bad = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(linear_classifier(bad_w, bad_b), "bad.onnx")},
        format="multipart",
    ).json()
    good = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(linear_classifier(good_w, good_b), "good.onnx")},
        format="multipart",
    ).json()

    run_worker()

    bad_detail = client.get(f"/api/submissions/{bad['id']}/").json()
    assert bad_detail["status"] == "failed"
    assert bad_detail["error_message"] == "The model's output contains NaN or infinity (batch 1)."
    assert client.get(f"/api/submissions/{good['id']}/").json()["status"] == "succeeded"


def test_cancelling_a_queued_submission_stops_it_from_running(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    task = make_task()
    client = token_client("alice", "alice-password-1")
    # Two different models: the same file twice would be refused as a duplicate.
    data_a = linear_classifier(np.eye(64, 10), np.zeros(10))
    data_b = linear_classifier(np.eye(64, 10), np.ones(10))
    first = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(data_a, "a.onnx")},
        format="multipart",
    ).json()
    second = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(data_b, "b.onnx")},
        format="multipart",
    ).json()
    assert client.get(f"/api/submissions/{second['id']}/").json()["queue_position"] == 2

    response = client.post(f"/api/submissions/{first['id']}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert client.post(f"/api/submissions/{first['id']}/cancel/").status_code == 409
    assert client.get(f"/api/submissions/{second['id']}/").json()["queue_position"] == 1

    run_worker()

    assert client.get(f"/api/submissions/{first['id']}/").json()["status"] == "cancelled"
    assert client.get(f"/api/submissions/{second['id']}/").json()["status"] == "succeeded"


def test_nobody_else_can_cancel_my_submission(
    alice: Any, bob: Any, make_task: Any, queue: Any
) -> None:
    task = make_task()
    data = linear_classifier(np.eye(64, 10), np.zeros(10))
    mine = (
        token_client("alice", "alice-password-1")
        .post(
            "/api/submissions/", {"task": task.slug, "file": onnx_upload(data)}, format="multipart"
        )
        .json()
    )
    assert (
        token_client("bob", "bob-password-1")
        .post(f"/api/submissions/{mine['id']}/cancel/")
        .status_code
        == 404
    )
    assert Submission.objects.get(pk=mine["id"]).status == "queued"
