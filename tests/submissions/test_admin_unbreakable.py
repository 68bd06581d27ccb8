"""An admin that cannot break (issue 14, item 6): whatever an operator types answers with a
clear message and never a 500; sizes in MiB; the target format per metric; a dataset summary;
the dataset kept across a failed form; result fields read-only; "Add submission" through the
upload service; staff file links that work; no upload form on a closed task; baselines with a
display name, each its own board row."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.core.files.storage import default_storage
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from submissions.admin.services import PENDING_DIR
from submissions.boards.leaderboard import leaderboard_differences
from submissions.lifecycle.selectors import leaderboard
from submissions.models import Submission, Task
from tests.builders import digits_like, linear_classifier, npz_bytes
from tests.conftest import onnx_upload
from tests.submissions.test_admin import task_form
from tests.submissions.test_read_api import scored

ADD_TASK = "/admin/submissions/task/add/"
MB = 1024 * 1024


@pytest.fixture
def console(operator: Any) -> Client:
    client = Client()  # raises the view's exception instead of answering 500: none may happen
    client.force_login(operator)
    return client


def form_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, response.status_code
    return dict(response.context["adminform"].form.errors)


BAD_SHAPES = [
    ("13", "is not a list"),
    ('["a"]', 'Dimension 1 is "a", not a whole number'),
    ('{"a": 1}', "is not a list"),
    ("[13.5]", "Dimension 1 is 13.5, not a whole number"),
    ("[13.0]", "not a whole number"),
    ('"13"', "is not a list"),
    ('["13"]', "not a whole number"),
    ("abc", "is not a list"),
    ("[1, 8", "is not a list"),
    ("[-1, 8, 8]", "Dimension 1 is -1; every dimension is at least 1"),
    ("[1, 0, 8]", "Dimension 2 is 0"),
    ("[[1, 8], 8]", "Dimension 1 is [1, 8], not a whole number"),
    ("[1e400]", "not a whole number"),
    ("[NaN]", "not a whole number"),
    ("[99999999999999999999999]", "at most 2147483647"),
    ("9" * 5000, "is not a list"),  # past Python's int-from-string limit
    ("[" * 100_000 + "]" * 100_000, "is not a list"),  # past the JSON parser's recursion limit
    ("", "This field is required"),
    ("   ", "The shape is empty"),
    ("[]", "at least one dimension"),
    ("null", "is not a list"),
    ("true", "is not a list"),
    ("[true, 8, 8]", "Dimension 1 is true, not a whole number"),
    ("[1, 1, 1, 1, 1, 1, 1, 1, 1]", "at most 8"),
]


@pytest.mark.parametrize("field", ["input_shape", "output_shape"])
@pytest.mark.parametrize(("typed", "message"), BAD_SHAPES)
def test_a_bad_shape_is_refused_with_a_clear_message_on_add(
    console: Client, field: str, typed: str, message: str
) -> None:
    response = console.post(ADD_TASK, task_form(digits_like(n=40), **{field: typed}))
    errors = form_errors(response)
    assert message in " ".join(errors[field]), errors
    assert not Task.objects.exists()


@pytest.mark.parametrize(("typed", "message"), BAD_SHAPES)
def test_a_bad_shape_is_refused_on_change_and_the_task_keeps_its_shape(
    console: Client, make_task: Any, typed: str, message: str
) -> None:
    task = make_task(digits_like(n=40))
    form = task_form(digits_like(n=40), input_shape=typed, slug=task.slug)
    form.pop("dataset")  # keep the stored one
    errors = form_errors(console.post(f"/admin/submissions/task/{task.pk}/change/", form))
    assert message in " ".join(errors["input_shape"]), errors
    task.refresh_from_db()
    assert task.input_shape == [1, 8, 8]
    assert APIClient().get("/api/tasks/digits/").json()["batch_shape"] == [16, 1, 8, 8]


def test_a_classification_output_is_one_dimension_of_classes(console: Client) -> None:
    errors = form_errors(
        console.post(ADD_TASK, task_form(digits_like(n=40), output_shape="[2, 5]"))
    )
    assert "one score per class" in " ".join(errors["output_shape"])


def test_the_max_model_size_is_typed_in_mib(console: Client) -> None:
    response = console.post(ADD_TASK, task_form(digits_like(n=40), max_model_mb="1.5"))
    assert response.status_code == 302
    task = Task.objects.get()
    assert task.max_model_bytes == int(1.5 * MB)
    page = console.get(f"/admin/submissions/task/{task.pk}/change/").content.decode()
    assert 'name="max_model_mb" value="1.5"' in page
    assert "Max model size (MiB)" in page


@pytest.mark.parametrize(
    ("typed", "message"),
    [("0", "greater than or equal to 0.01"), ("-3", "greater than or equal"), ("ten", "number")],
)
def test_a_bad_model_size_is_refused(console: Client, typed: str, message: str) -> None:
    errors = form_errors(console.post(ADD_TASK, task_form(digits_like(n=40), max_model_mb=typed)))
    assert message in " ".join(errors["max_model_mb"])


def test_the_metric_says_what_targets_each_family_needs(console: Client) -> None:
    page = console.get(ADD_TASK).content.decode()
    assert "classification (accuracy, top5_accuracy, macro_f1): 'targets' are integer" in (page)
    assert "positive and finite are scored" in page  # depth
    assert "all finite" in page  # regression


def test_regression_and_depth_targets_are_checked_for_what_the_metric_needs(
    console: Client,
) -> None:
    rng = np.random.default_rng(0)
    arrays = {"inputs": rng.random((10, 1, 8, 8), dtype=np.float32)}
    arrays["targets"] = np.full((10, 8, 8), np.nan, dtype=np.float32)
    form = task_form(arrays, metric="abs_rel", output_shape="[8, 8]")
    assert "no positive finite depth" in " ".join(
        form_errors(console.post(ADD_TASK, form))["dataset"]
    )
    form = task_form(arrays, metric="mse", output_shape="[8, 8]")
    assert "NaN or infinite" in " ".join(form_errors(console.post(ADD_TASK, form))["dataset"])


def test_the_dataset_summary_is_shown_after_upload_and_on_the_change_page(console: Client) -> None:
    response = console.post(ADD_TASK, task_form(digits_like(n=40)), follow=True)
    summary = (
        "40 rows (20 public, 20 private); inputs [1, 8, 8] float32; "
        "targets: 10 classes declared, 10 present (labels 0..9)."
    )
    assert summary in response.content.decode()  # the message after the save
    task = Task.objects.get()
    page = console.get(f"/admin/submissions/task/{task.pk}/change/").content.decode()
    assert summary in page


def test_the_summary_tells_declared_classes_from_those_present(console: Client) -> None:
    arrays = digits_like(n=40)
    arrays["targets"] = np.where(arrays["targets"] % 2 == 0, 22, 997).astype(np.int64)
    response = console.post(ADD_TASK, task_form(arrays, output_shape="[1000]"), follow=True)
    summary = "targets: 1000 classes declared, 2 present (labels 22..997)."
    assert summary in response.content.decode()
    task = Task.objects.get()
    page = console.get(f"/admin/submissions/task/{task.pk}/change/").content.decode()
    assert summary in page


def test_a_dataset_is_kept_across_a_form_that_failed_elsewhere(console: Client) -> None:
    arrays = digits_like(n=40)
    # The input shape is mistyped, so the dataset fails its check against it: fix the shape only.
    first = console.post(ADD_TASK, task_form(arrays, input_shape="[1, 8]", timing_passes="0"))
    form = first.context["adminform"].form
    token = form.data["dataset_pending"]
    assert token and re.search(
        rf'name="dataset_pending" value="{re.escape(token)}"', first.content.decode()
    )
    assert "Kept from your last attempt: digits.npz" in first.content.decode()

    retry = task_form(arrays, dataset_pending=token)
    retry.pop("dataset")  # the operator does not choose the file again
    second = console.post(ADD_TASK, retry)
    assert second.status_code == 302, form_errors(second)
    task = Task.objects.get()
    with task.dataset.open("rb") as stored:
        assert stored.read() == npz_bytes(arrays)
    assert not default_storage.exists(f"{PENDING_DIR}/{token}")  # the kept copy is gone


@pytest.mark.parametrize("token", ["../../etc/passwd", "nonsense", "0" * 32 + "/missing.npz"])
def test_a_token_that_names_no_kept_dataset_just_asks_for_the_file(
    console: Client, token: str
) -> None:
    form = task_form(digits_like(n=40), dataset_pending=token)
    form.pop("dataset")
    assert "This field is required" in " ".join(
        form_errors(console.post(ADD_TASK, form))["dataset"]
    )


RESULT_FIELDS = {"score", "score_private", "metrics", "status", "latency_p50_ms", "worker_name"}


def test_result_fields_are_read_only(console: Client, make_task: Any, alice: Any) -> None:
    submission = scored(make_task(), alice, 0.5)
    url = f"/admin/submissions/submission/{submission.pk}/change/"
    form = console.get(url).context["adminform"].form
    # Hiding and disqualifying are actions that ask the reason the owner is shown.
    assert set(form.fields) == {"description", "display_name", "is_baseline"}
    response = console.post(
        url,
        {
            "description": "checked",
            "score": "0.99",
            "status": "failed",
            "metrics": "{}",
            "hidden": "on",
            "disqualified": "on",
        },
    )
    assert response.status_code == 302
    submission.refresh_from_db()
    assert (submission.description, submission.score, submission.status) == (
        "checked",
        0.5,
        "succeeded",
    )
    assert submission.metrics == {"accuracy": 0.5}
    assert not (submission.hidden or submission.disqualified)


def test_the_model_file_link_points_at_the_staff_only_view(
    console: Client, make_task: Any, alice: Any, queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task = make_task()
    model = linear_classifier(np.zeros((64, 10)), np.zeros(10))
    with django_capture_on_commit_callbacks(execute=True):
        response = console.post(
            "/admin/submissions/submission/upload/",
            {"task": task.pk, "file": onnx_upload(model, "zero.onnx"), "display_name": ""},
        )
    submission = Submission.objects.get()
    page = console.get(response["Location"]).content.decode()
    assert f'href="/submissions/{submission.pk}/model/"' in page
    assert "/media/" not in page
    download = console.get(f"/submissions/{submission.pk}/model/")
    assert b"".join(download.streaming_content) == model
    participant = Client()
    participant.force_login(alice)
    assert participant.get(f"/submissions/{submission.pk}/model/").status_code == 302  # to login


def test_the_dataset_link_on_the_task_page_works_for_staff_only(
    console: Client, make_task: Any, alice: Any
) -> None:
    arrays = digits_like(n=40)
    task = make_task(arrays)
    page = console.get(f"/admin/submissions/task/{task.pk}/change/").content.decode()
    url = f"/admin/submissions/task/{task.pk}/dataset/"
    assert f'href="{url}"' in page and "/media/" not in page
    assert b"".join(console.get(url).streaming_content) == npz_bytes(arrays)
    participant = Client()
    participant.force_login(alice)
    assert participant.get(url).status_code == 302  # to the admin login


def test_add_submission_uploads_a_baseline_through_the_service(
    console: Client, make_task: Any, queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task = make_task()
    assert console.get("/admin/submissions/submission/add/")["Location"] == (
        "/admin/submissions/submission/upload/"
    )
    model = linear_classifier(np.zeros((64, 10)), np.zeros(10))
    with django_capture_on_commit_callbacks(execute=True):
        response = console.post(
            "/admin/submissions/submission/upload/",
            {"task": task.pk, "file": onnx_upload(model, "ref.onnx"), "display_name": "Zero"},
        )
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert (submission.display_name, submission.is_baseline) == ("Zero", True)
    assert submission.size_bytes == len(model) and submission.model_info  # inspected, stored
    assert queue.connection.exists(f"rq:job:{submission.job_id}")  # and queued


@pytest.mark.parametrize(
    ("upload", "closed", "field", "message"),
    [
        (b"not onnx", False, "file", ""),
        (None, True, "task", "closed for submissions"),
    ],
)
def test_add_submission_shows_the_services_refusal_on_the_form(
    console: Client, make_task: Any, upload: bytes | None, closed: bool, field: str, message: str
) -> None:
    task = make_task(closes_at=timezone.now() - timedelta(days=1) if closed else None)
    data = upload if upload is not None else linear_classifier(np.zeros((64, 10)), np.zeros(10))
    response = console.post(
        "/admin/submissions/submission/upload/",
        {"task": task.pk, "file": onnx_upload(data, "m.onnx"), "display_name": "X"},
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors.get(field) and message in " ".join(errors[field])
    assert not Submission.objects.exists()


@pytest.mark.parametrize(
    ("opens", "closes", "says"),
    [
        (-10, -1, "this task closed for submissions at"),
        (2, 10, "this task opens for submissions at"),
    ],
)
def test_a_closed_task_shows_why_instead_of_an_upload_form(
    make_task: Any, alice: Any, opens: int, closes: int, says: str
) -> None:
    now = timezone.now()
    make_task(opens_at=now + timedelta(days=opens), closes_at=now + timedelta(days=closes))
    client = Client()
    client.force_login(alice)
    page = client.get("/tasks/digits/submit/").content.decode()
    assert says in page
    assert 'enctype="multipart/form-data"' not in page and 'type="file"' not in page


def test_two_baselines_with_display_names_are_two_rows_named_by_them(
    make_task: Any, operator: Any, alice: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.7)
    scored(task, operator, 0.8, is_baseline=True, display_name="ResNet-18")
    scored(task, operator, 0.6, is_baseline=True, display_name="Linear")
    scored(task, operator, 0.5)  # the operator's own entry is a third row

    names = [row.submission.board_name for row in leaderboard(task=task)]
    assert names == ["ResNet-18", "alice", "Linear", "operator"]
    api = APIClient().get("/api/tasks/digits/leaderboard/").json()
    assert [r["user"] for r in api["rows"]] == names
    exported = Client().get("/tasks/digits/leaderboard.csv").content.decode()
    assert [line[1] for line in csv.reader(io.StringIO(exported))][1:] == names
    assert "Linear" in Client().get("/tasks/digits/").content.decode()
    assert leaderboard_differences(task_id=task.pk) == []  # the kept rows match a rebuild


def test_marking_a_submission_as_baseline_moves_it_to_a_row_of_its_own(
    console: Client, make_task: Any, operator: Any
) -> None:
    task = make_task()
    first = scored(task, operator, 0.8)
    scored(task, operator, 0.6)
    assert len(leaderboard(task=task)) == 1
    response = console.post(
        "/admin/submissions/submission/",
        {"action": "mark_baseline", "_selected_action": [str(first.pk)]},
    )
    assert response.status_code == 302
    assert [r.submission.is_baseline for r in leaderboard(task=task)] == [True, False]
