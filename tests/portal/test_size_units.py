"""One unit for sizes (issue 35, item 3): a model-size limit an operator types is that many MiB
(2**20 bytes), and the admin, the task page, the API, ``oep`` and the refusal all state the same
number in the same unit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from evaluation.inspect import ModelRejected, inspect_model
from submissions.models import Task
from tests.builders import digits_like
from tests.portal.client_support import Oep
from tests.submissions.test_admin import task_form

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 2**20


def test_a_limit_typed_as_400_mib_reads_400_mib_everywhere(
    operator: Any, live_portal: str, tmp_path: Path
) -> None:
    console = Client()
    console.force_login(operator)
    response = console.post(
        "/admin/submissions/task/add/", task_form(digits_like(n=40), max_model_mb="400")
    )
    assert response.status_code == 302
    task = Task.objects.get()
    assert task.max_model_bytes == 400 * MIB

    admin_page = console.get(f"/admin/submissions/task/{task.pk}/change/").content.decode()
    assert "Max model size (MiB)" in admin_page and 'name="max_model_mb" value="400"' in admin_page
    assert "400 MiB per model" in console.get(task.get_absolute_url()).content.decode()

    api = APIClient().get("/api/tasks/digits/").json()
    assert (api["max_model_bytes"], api["max_model_mib"]) == (400 * MIB, 400)

    shown = Oep(tmp_path, url=live_portal)("task", "digits")
    assert shown.returncode == 0, shown.stderr
    assert "up to 400 MiB" in shown.stdout

    one_byte_over = tmp_path / "big.onnx"
    with one_byte_over.open("wb") as file:  # sparse: nothing is written but the last byte
        file.truncate(400 * MIB + 1)
    with pytest.raises(ModelRejected) as refused:
        inspect_model(one_byte_over, task.spec())
    assert str(refused.value) == (
        "The model is 400 MiB (419,430,401 bytes); this task accepts models up to 400 MiB."
    )
