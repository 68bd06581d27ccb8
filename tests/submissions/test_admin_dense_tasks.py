"""Segmentation and restoration tasks in the admin (issue 35, item 5): the metric's options are
checked against the metric, the dataset against what the family reads, and the summary says
which classes the task declares and which its labels use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.models import Task
from tests.portal.client_support import Oep
from tests.submissions.test_admin import task_form

ADD_TASK = "/admin/submissions/task/add/"


@pytest.fixture
def console(operator: Any) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def segmentation_data(n: int = 10) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    targets = rng.integers(0, 3, size=(n, 8, 8))  # 3 of the 21 declared classes
    targets[:, 0, :] = 255  # a border nobody labelled
    split = np.array(["public", "private"] * (n // 2))
    return {
        "inputs": rng.random((n, 1, 8, 8), dtype=np.float32),
        "targets": targets,
        "split": split,
    }


def segmentation_form(arrays: dict[str, np.ndarray], **overrides: Any) -> dict[str, Any]:
    return task_form(arrays, metric="miou", output_shape="[21, 8, 8]", **overrides)


def test_a_segmentation_task_keeps_its_options_and_its_summary_counts_classes(
    console: Client,
) -> None:
    form = segmentation_form(segmentation_data(), metric_options='{"ignore_index": 255}')
    response = console.post(ADD_TASK, form, follow=True)
    assert "targets: 21 classes declared, 3 present (labels 0..2) per pixel, label 255 not " in (
        response.content.decode()
    )
    task = Task.objects.get()
    assert task.metric_options == {"ignore_index": 255}
    assert task.spec().metric_options == {"ignore_index": 255}


def test_an_option_the_metric_does_not_take_is_refused_on_its_field(console: Client) -> None:
    response = console.post(
        ADD_TASK, segmentation_form(segmentation_data(), metric_options='{"crop_border": 2}')
    )
    errors = response.context["adminform"].form.errors
    assert "miou has no option 'crop_border'; its options: ignore_index, miou_all_declared" in (
        " ".join(errors["metric_options"])
    )


@pytest.mark.parametrize("typed", ["[255]", '"255"', "255"])
def test_settings_that_are_not_a_json_object_are_refused_on_their_field(
    console: Client, typed: str
) -> None:
    response = console.post(ADD_TASK, segmentation_form(segmentation_data(), metric_options=typed))
    errors = response.context["adminform"].form.errors
    assert errors["metric_options"] == [
        'The metric\'s settings are a JSON object, e.g. {"ignore_index": 255}.'
    ]


def test_an_empty_settings_box_is_the_metrics_defaults(console: Client) -> None:
    console.post(ADD_TASK, segmentation_form(segmentation_data(), metric_options=""))
    assert Task.objects.get().metric_options == {}


def test_labels_outside_the_declared_classes_are_refused_unless_ignored(console: Client) -> None:
    arrays = segmentation_data()
    arrays["targets"][0, 1, 1] = 40
    response = console.post(ADD_TASK, segmentation_form(arrays))
    assert "labels outside 0..20 other than the ignore label 255" in " ".join(
        response.context["adminform"].form.errors["dataset"]
    )


def test_a_restoration_task_takes_images_and_its_crop(console: Client) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "inputs": rng.random((4, 1, 8, 8), dtype=np.float32),
        "targets": rng.random((4, 1, 16, 16), dtype=np.float32),
        "split": np.array(["public", "private"] * 2),
    }
    form = task_form(
        arrays, metric="psnr", output_shape="[1, 16, 16]", metric_options='{"crop_border": 2}'
    )
    assert console.post(ADD_TASK, form).status_code == 302
    assert Task.objects.get().spec().metric_options == {"crop_border": 2}


@pytest.mark.django_db(transaction=True)
def test_participants_read_the_metric_options_on_the_page_the_api_and_oep(
    console: Client, live_portal: str, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "inputs": rng.random((4, 1, 8, 8), dtype=np.float32),
        "targets": rng.random((4, 1, 16, 16), dtype=np.float32),
    }
    form = task_form(
        arrays, metric="psnr", output_shape="[1, 16, 16]", metric_options='{"crop_border": 2}'
    )
    assert console.post(ADD_TASK, form).status_code == 302
    page = console.get("/tasks/digits/").content.decode()
    assert "crop_border 2 · y_channel true · data_range 1 · quantize true" in page
    assert APIClient().get("/api/tasks/digits/").json()["metric_options"] == {"crop_border": 2}
    shown = Oep(tmp_path, url=live_portal)("task", "digits")
    assert "Options:    crop_border 2\n" in shown.stdout, shown.stdout
