"""The task page's data section: files operators publish, downloaded with the task's access rules
(a hidden task's files are as unknown as the task), never the hidden dataset; the admin inline
records each file's size and sha256; the demo publishes its training rows and a starter script."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from evaluation.inspect import inspect_model
from submissions.demo import datasets
from submissions.models import Task
from submissions.models.task_files import TaskFile
from submissions.tasks.files import task_file_publish
from tests.submissions.admin_support import task_change_data

pytestmark = pytest.mark.django_db

STARTER = b"print('train here')\n"


def client_for(who: str, users: dict[str, Any]) -> Client:
    client = Client()
    if who != "anonymous":
        client.force_login(users[who])
    return client


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


@pytest.fixture
def users(alice: Any, operator: Any) -> dict[str, Any]:
    return {"participant": alice, "staff": operator}


@pytest.fixture
def published(make_task: Any) -> dict[str, Any]:
    task = make_task()
    starter = task_file_publish(task=task, title="Starter", filename="starter.py", content=STARTER)
    draft = task_file_publish(
        task=task, title="Draft", filename="draft.txt", content=b"not yet", public=False
    )
    return {"task": task, "starter": starter, "draft": draft}


def test_publishing_records_size_and_sha256_and_stores_under_task_files(
    published: dict[str, Any],
) -> None:
    starter = published["starter"]
    assert starter.size_bytes == len(STARTER)
    assert starter.sha256 == hashlib.sha256(STARTER).hexdigest()
    assert starter.file.name == "task-files/digits/starter.py"


@pytest.mark.parametrize(
    ("who", "hidden", "status"),
    [
        ("anonymous", False, 200),
        ("participant", False, 200),
        ("staff", False, 200),
        ("anonymous", True, 404),
        ("participant", True, 404),
        ("staff", True, 200),
    ],
)
def test_a_public_file_is_downloadable_by_whoever_may_see_the_task(
    published: dict[str, Any], users: dict[str, Any], who: str, hidden: bool, status: int
) -> None:
    Task.objects.filter(pk=published["task"].pk).update(is_hidden=hidden)
    url = f"/tasks/digits/files/{published['starter'].pk}/"
    response = client_for(who, users).get(url)
    assert response.status_code == status
    page = client_for(who, users).get("/tasks/digits/")
    assert (url in page.content.decode()) == (status == 200)
    if status == 200:
        assert body(response) == STARTER
        assert response["Content-Disposition"] == 'attachment; filename="starter.py"'


@pytest.mark.parametrize(
    ("who", "status"), [("anonymous", 404), ("participant", 404), ("staff", 200)]
)
def test_a_draft_file_is_for_operators_only(
    published: dict[str, Any], users: dict[str, Any], who: str, status: int
) -> None:
    response = client_for(who, users).get(f"/tasks/digits/files/{published['draft'].pk}/")
    assert response.status_code == status


def test_a_file_is_only_found_under_its_own_task(
    published: dict[str, Any], make_task: Any, operator: Any
) -> None:
    make_task(slug="other")
    client = client_for("staff", {"staff": operator})
    assert client.get(f"/tasks/other/files/{published['starter'].pk}/").status_code == 404


@pytest.mark.parametrize("who", ["anonymous", "participant", "staff"])
def test_the_hidden_dataset_is_never_served_even_by_a_row_pointing_at_it(
    published: dict[str, Any], users: dict[str, Any], who: str
) -> None:
    task = published["task"]
    forged = TaskFile.objects.create(task=task, title="Leak", file=task.dataset.name)
    TaskFile.objects.filter(pk=published["starter"].pk).update(file=f"../{task.dataset.name}")
    TaskFile.objects.filter(pk=published["draft"].pk).update(
        file=f"task-files/../{task.dataset.name}", public=True
    )
    client = client_for(who, users)
    for pk in (forged.pk, published["starter"].pk, published["draft"].pk):
        assert client.get(f"/tasks/digits/files/{pk}/").status_code == 404
    assert task.dataset.name not in client.get("/tasks/digits/").content.decode()


def test_operator_publishes_a_file_through_the_admin_inline(make_task: Any, operator: Any) -> None:
    task = make_task()
    client = client_for("staff", {"staff": operator})
    url = f"/admin/submissions/task/{task.pk}/change/"
    data = task_change_data(client, task.pk)
    data.update(
        {
            "files-TOTAL_FORMS": "1",
            "files-INITIAL_FORMS": "0",
            "files-0-title": "Training rows",
            "files-0-file": SimpleUploadedFile("train.npz", b"PK rows"),
            "files-0-public": "on",
            "files-0-position": "0",
        }
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    (task_file,) = TaskFile.objects.filter(task=task)
    assert (task_file.size_bytes, task_file.sha256) == (7, hashlib.sha256(b"PK rows").hexdigest())
    assert body(Client().get(f"/tasks/digits/files/{task_file.pk}/")) == b"PK rows"


# --- The demo ------------------------------------------------------------------------------------


def test_digits_training_rows_are_the_797_rows_that_are_not_hidden() -> None:
    train, hidden = datasets.digits_training_rows(), datasets.load_digits_test()
    assert train["inputs"].shape == (797, 1, 8, 8) and train["targets"].shape == (797,)
    hidden_rows = {row.tobytes() for row in hidden["inputs"]}
    assert not any(row.tobytes() in hidden_rows for row in train["inputs"])


def test_depth_training_scenes_are_not_the_hidden_ones() -> None:
    train, hidden = datasets.build_depth_training(n=2), datasets.build_depth_dataset(n=2, seed=0)
    assert train["inputs"].shape == (2, 3, 448, 448) and "split" not in train
    assert not np.allclose(train["targets"][0], hidden["targets"][0])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_seed_demo_publishes_training_rows_and_a_starter_that_makes_an_accepted_model(
    queue: Any, tmp_path: Path
) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    call_command("seed_demo", stdout=io.StringIO())  # idempotent: nothing published twice
    client = Client()
    for slug, rows in [("digits", 797), ("depth-448", datasets.DEPTH_TRAIN_SCENES)]:
        task = Task.objects.get(slug=slug)
        files = {f.title: f for f in TaskFile.objects.filter(task=task)}
        assert sorted(files) == ["Starter script", "Training rows"]
        starter = body(client.get(f"/tasks/{slug}/files/{files['Starter script'].pk}/"))
        assert starter == datasets.STARTER_PATH.read_bytes()
        training = body(client.get(f"/tasks/{slug}/files/{files['Training rows'].pk}/"))
        assert hashlib.sha256(training).hexdigest() == files["Training rows"].sha256
        with np.load(io.BytesIO(training), allow_pickle=False) as arrays:
            assert len(arrays["inputs"]) == rows and "split" not in arrays.files

        # A participant without PyTorch: the starter fits and exports; the portal accepts it.
        (tmp_path / "starter.py").write_bytes(starter)
        (tmp_path / "train.npz").write_bytes(training)
        model = tmp_path / f"{slug}.onnx"
        subprocess.run(
            [sys.executable, "starter.py", "train.npz", model.name],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            timeout=120,
        )
        inspect_model(model, task.spec())
