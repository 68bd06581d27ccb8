"""Uploads in bounded memory: the web process stores what a child process's inspection found,
and when every inspection slot of the host is taken an upload is answered 503 with Retry-After,
keeping nothing (no row, no stored file, no temporary file). A model under
UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES is inspected in the web process and needs no slot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.services import api_token_create
from evaluation.inspect import inspect_model
from plumbing.host_slots import slot_held
from submissions.lifecycle.inspection import UPLOAD_BUSY, UPLOAD_BUSY_RETRY_AFTER_S
from submissions.models import Submission
from tests.builders import linear_classifier
from tests.conftest import onnx_upload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def temporary_files(settings: Any, tmp_path: Path) -> Path:
    """Where Django streams upload bodies, and the slot files, in this test's own folders."""
    uploads = tmp_path / "upload-bodies"
    uploads.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(uploads)
    settings.UPLOAD_INSPECTIONS_DIR = tmp_path / "slots"
    settings.UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES = 0  # these small test models too
    settings.UPLOAD_INSPECTIONS_MAX = 1
    settings.UPLOAD_INSPECTIONS_WAIT_S = 0
    return uploads


def model_bytes() -> bytes:
    rng = np.random.default_rng(5)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))


def api_client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='t').secret}")
    return client


def stored_models(settings: Any) -> list[Path]:
    return [p for p in Path(settings.MEDIA_ROOT).rglob("*.onnx")]


def test_an_upload_stores_what_inspection_finds_and_leaves_no_temporary_file(
    alice: Any, make_task: Any, queue: Any, settings: Any, temporary_files: Path, tmp_path: Path
) -> None:
    task = make_task()
    response = api_client(alice).post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(model_bytes())},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    submission = Submission.objects.get()
    reference = tmp_path / "reference.onnx"
    reference.write_bytes(model_bytes())
    found = inspect_model(reference, task.spec())
    assert submission.model_info == found.as_dict()
    assert found.costs is not None
    assert (submission.macs, submission.parameters) == (found.costs.macs, found.costs.parameters)
    assert list(temporary_files.iterdir()) == []
    with slot_held(settings.UPLOAD_INSPECTIONS_DIR, 1):  # the upload gave its slot back
        pass


def test_an_api_upload_finding_every_slot_taken_is_answered_503_and_keeps_nothing(
    alice: Any, make_task: Any, queue: Any, settings: Any, temporary_files: Path
) -> None:
    task = make_task()
    client = api_client(alice)
    with slot_held(settings.UPLOAD_INSPECTIONS_DIR, 1):  # another upload is being inspected
        response = client.post(
            "/api/submissions/",
            {"task": task.slug, "file": onnx_upload(model_bytes())},
            format="multipart",
        )
    assert response.status_code == 503
    assert response["Retry-After"] == str(UPLOAD_BUSY_RETRY_AFTER_S)
    assert response.json() == {"detail": UPLOAD_BUSY}
    assert Submission.objects.count() == 0
    assert stored_models(settings) == []
    assert list(temporary_files.iterdir()) == []
    assert queue.count == 0

    again = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(model_bytes())},
        format="multipart",
    )
    assert again.status_code == 201, again.content  # the same file, once a slot is free


def test_a_form_upload_finding_every_slot_taken_says_so_with_503_and_keeps_nothing(
    alice: Any, make_task: Any, queue: Any, settings: Any, temporary_files: Path
) -> None:
    task = make_task()
    client = Client()
    client.force_login(alice)
    with slot_held(settings.UPLOAD_INSPECTIONS_DIR, 1):
        response = client.post(
            f"/tasks/{task.slug}/submit/",
            {"file": onnx_upload(model_bytes()), "description": "my wide variant"},
        )
    assert response.status_code == 503
    assert response["Retry-After"] == str(UPLOAD_BUSY_RETRY_AFTER_S)
    assert UPLOAD_BUSY in response.content.decode()
    assert "my wide variant" in response.content.decode()  # what they typed is still there
    assert Submission.objects.count() == 0
    assert stored_models(settings) == []
    assert list(temporary_files.iterdir()) == []


def test_a_refused_model_leaves_no_temporary_file_and_frees_its_slot(
    alice: Any, make_task: Any, queue: Any, settings: Any, temporary_files: Path
) -> None:
    task = make_task()
    response = api_client(alice).post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(model_bytes()[:200])},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["file"][0].startswith("This is not an ONNX model")
    assert list(temporary_files.iterdir()) == []
    with slot_held(settings.UPLOAD_INSPECTIONS_DIR, 1):
        pass


def test_a_model_under_the_out_of_process_size_needs_no_slot(
    alice: Any, make_task: Any, queue: Any, settings: Any, temporary_files: Path
) -> None:
    settings.UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES = len(model_bytes()) + 1
    task = make_task()
    with slot_held(settings.UPLOAD_INSPECTIONS_DIR, 1):
        response = api_client(alice).post(
            "/api/submissions/",
            {"task": task.slug, "file": onnx_upload(model_bytes())},
            format="multipart",
        )
    assert response.status_code == 201, response.content
    assert list(temporary_files.iterdir()) == []
