"""``oep download`` and ``oep select`` against the real API: a task's published files, checked by
sha256, with the task's access rules (a hidden task's files reach its operators' tokens only;
drafts likewise); choosing finals, and the server's refusal past the task's limit."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.services import api_token_create
from submissions.tasks.files import task_file_publish
from tests.portal.client_support import Oep
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db(transaction=True)

STARTER = b"print('train here')\n" * 100
ROWS = bytes(range(256)) * 64


@pytest.fixture
def task_with_files(make_task: Any) -> Any:
    task = make_task(slug="files-task")
    task_file_publish(task=task, title="Starter", filename="starter.py", content=STARTER)
    task_file_publish(task=task, title="Training rows", filename="train.npz", content=ROWS)
    task_file_publish(task=task, title="Draft", filename="draft.txt", content=b"x", public=False)
    return task


def test_the_api_lists_public_files_with_size_sha256_and_a_download_url(
    task_with_files: Any,
) -> None:
    listed = APIClient().get("/api/tasks/files-task/files/").json()

    assert [(f["name"], f["size"]) for f in listed] == [
        ("starter.py", len(STARTER)),
        ("train.npz", len(ROWS)),
    ]
    assert listed[0]["sha256"] == hashlib.sha256(STARTER).hexdigest()
    response = APIClient().get(listed[1]["url"])
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == ROWS


def test_oep_download_writes_each_file_and_skips_what_is_already_there(
    task_with_files: Any, alice: Any, live_portal: str, tmp_path: Path
) -> None:
    token = api_token_create(user=alice, name="tests").secret
    oep = Oep(tmp_path, url=live_portal, token=token)

    first = oep("download", "files-task", "--dir", str(tmp_path / "data"))
    again = oep("download", "files-task", "--dir", str(tmp_path / "data"))

    assert first.returncode == 0, first.stderr
    assert (tmp_path / "data" / "starter.py").read_bytes() == STARTER
    assert (tmp_path / "data" / "train.npz").read_bytes() == ROWS
    assert not (tmp_path / "data" / "draft.txt").exists()
    assert again.returncode == 0 and "already here" in again.stdout


def test_a_hidden_tasks_files_reach_only_an_operators_token(
    make_task: Any, alice: Any, operator: Any, live_portal: str, tmp_path: Path
) -> None:
    task = make_task(slug="secret-files", is_hidden=True)
    task_file_publish(task=task, title="Starter", filename="starter.py", content=STARTER)
    participant = Oep(
        tmp_path / "a", url=live_portal, token=api_token_create(user=alice, name="t").secret
    )
    staff = Oep(
        tmp_path / "o", url=live_portal, token=api_token_create(user=operator, name="t").secret
    )

    refused = participant("download", "secret-files", "--dir", str(tmp_path / "a-data"))
    fetched = staff("download", "secret-files", "--dir", str(tmp_path / "o-data"))

    assert refused.returncode != 0 and "secret-files" in refused.stderr + refused.stdout
    assert not (tmp_path / "a-data" / "starter.py").exists()
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "o-data" / "starter.py").read_bytes() == STARTER


def test_oep_select_chooses_and_unselects_a_final_and_says_why_it_refuses(
    make_task: Any, alice: Any, live_portal: str, tmp_path: Path
) -> None:
    task = make_task(slug="finals", final_selections=1)
    first = scored(task, alice, 0.5, score_private=0.4)
    second = scored(task, alice, 0.6, score_private=0.7)
    oep = Oep(tmp_path, url=live_portal, token=api_token_create(user=alice, name="t").secret)

    chosen = oep("select", str(first.pk))
    over_limit = oep("select", str(second.pk))
    status = oep("status", str(first.pk))
    taken_back = oep("select", str(first.pk), "--unselect")

    assert chosen.returncode == 0 and "is one of your finals" in chosen.stdout, chosen.stderr
    assert over_limit.returncode != 0 and "HTTP 409" in over_limit.stderr
    assert "selected for the private board" in status.stdout
    assert taken_back.returncode == 0 and "is not one of your finals" in taken_back.stdout
    first.refresh_from_db()
    second.refresh_from_db()
    assert not first.selected and not second.selected
