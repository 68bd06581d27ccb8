"""Server-rendered pages: the upload form with a real worker, and every page renders."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from django.test import Client

from evaluation import formats
from submissions.models import Submission
from tests.builders import digits_like, linear_classifier, linear_reference
from tests.conftest import onnx_upload


def logged_in(username: str, password: str) -> Client:
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302, response.content
    return client


@pytest.mark.django_db(transaction=True)
def test_form_upload_is_scored_by_a_real_worker_exactly_like_numpy(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    arrays = digits_like(n=60, seed=11)
    task = make_task(arrays)
    rng = np.random.default_rng(5)
    w, b = rng.normal(size=(64, 10)), rng.normal(size=10)
    client = logged_in("alice", "alice-password-1")

    response = client.post(
        f"/tasks/{task.slug}/submit/",
        {"file": onnx_upload(linear_classifier(w, b), "mine.onnx"), "description": "form"},
    )
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert response["Location"] == f"/submissions/{submission.pk}/"
    assert "Progress" in client.get(response["Location"]).content.decode()

    run_worker()

    submission.refresh_from_db()
    logits = linear_reference(w, b, arrays["inputs"])
    public = arrays["split"] == "public"
    expected = float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))
    assert submission.status == "succeeded", submission.error_message
    assert submission.score == pytest.approx(expected, abs=1e-12)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert f'<dd class="num" data-score>{formats.score(expected)}</dd>' in page
    board = client.get(f"/tasks/{task.slug}/").content.decode()
    assert re.search(r"data-user=\"alice\">\s*<td class=\"num\">1</td>", board)


@pytest.mark.django_db
def test_form_refusal_shows_the_reason_and_stores_nothing(alice: Any, make_task: Any) -> None:
    task = make_task()
    client = logged_in("alice", "alice-password-1")
    response = client.post(f"/tasks/{task.slug}/submit/", {"file": onnx_upload(b"")})
    assert response.status_code == 400
    assert "The file is empty." in response.content.decode()
    assert Submission.objects.count() == 0


@pytest.mark.django_db
def test_upload_page_requires_login(make_task: Any) -> None:
    task = make_task()
    response = Client().get(f"/tasks/{task.slug}/submit/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_pages_render_for_a_signed_in_user(alice: Any, make_task: Any) -> None:
    task = make_task()
    client = logged_in("alice", "alice-password-1")
    for url in ["/", f"/tasks/{task.slug}/", f"/tasks/{task.slug}/submit/", "/submissions/"]:
        response = client.get(url)
        assert response.status_code == 200, url
    assert "[16, 1, 8, 8]" in client.get(f"/tasks/{task.slug}/").content.decode()


@pytest.mark.django_db
def test_someone_elses_submission_page_is_404(alice: Any, bob: Any, make_task: Any) -> None:
    theirs = Submission.objects.create(
        task=make_task(), user=bob, sha256="0" * 64, size_bytes=1, original_name="b.onnx"
    )
    assert (
        logged_in("alice", "alice-password-1").get(f"/submissions/{theirs.pk}/").status_code == 404
    )
