"""Dataset versions: a task keeps every dataset file it has had; each result records the version
it was scored on; replacing the dataset takes the old results off the board and, when the
operator asks, re-scores every ranked submission behind new uploads without touching quotas;
a worker's cache serves exactly the version asked for."""

from __future__ import annotations

import hashlib
import os
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from submissions.lifecycle.quotas import quota_get
from submissions.lifecycle.selectors import leaderboard, task_rescoring_count
from submissions.lifecycle.services import submission_create, submission_start
from submissions.lifecycle.turns import fair_order
from submissions.models import DatasetVersion, Submission, Task
from submissions.models.boards import LeaderboardEntry
from submissions.tasks.dataset_cache import DatasetMismatch, cached_copy
from submissions.tasks.datasets import task_dataset_replace
from tests.builders import digits_like, linear_classifier, linear_reference, npz_bytes
from tests.conftest import onnx_upload
from tests.submissions.test_admin import RULE_FORMSET, task_form
from tests.submissions.test_read_api import scored
from workers import jobs


def replace_dataset(task: Task, arrays: dict[str, np.ndarray], **options: Any) -> Any:
    """What the admin does: the new file is saved on the task (read afresh, as the admin's form
    reads it), then recorded as a version."""
    task.refresh_from_db()
    task.dataset.save("digits.npz", ContentFile(npz_bytes(arrays)), save=True)
    return task_dataset_replace(task_id=task.pk, **options)


def check() -> str:
    out = StringIO()
    call_command("leaderboard_rebuild", "--check", stdout=out)
    return out.getvalue()


def public_accuracy(w: np.ndarray, b: np.ndarray, arrays: dict[str, np.ndarray]) -> float:
    public = arrays["split"] == "public"
    logits = linear_reference(w, b, arrays["inputs"])
    return float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))


@pytest.mark.django_db
def test_each_replacement_is_a_new_version_with_its_facts_and_the_old_file_kept(
    make_task: Any, operator: Any
) -> None:
    first, second = digits_like(n=40, seed=1), digits_like(n=60, seed=2)
    task = make_task(first)
    v1 = task_dataset_replace(task_id=task.pk, note="launch").version
    v2 = replace_dataset(task, second, note="more rows", user=operator).version
    task.refresh_from_db()
    assert task.current_dataset == v2
    assert [(v.number, v.rows, v.note) for v in task.dataset_versions.order_by("number")] == [
        (1, 40, "launch"),
        (2, 60, "more rows"),
    ]
    public = int((second["split"] == "public").sum())
    assert (v2.public_rows, v2.private_rows, v2.created_by) == (public, 60 - public, operator)
    assert v1.file.name != v2.file.name
    with v1.file.open("rb") as old, np.load(old) as arrays:  # the history keeps the old file
        assert len(arrays["inputs"]) == 40


@pytest.mark.django_db
def test_the_same_bytes_again_make_no_new_version(make_task: Any) -> None:
    arrays = digits_like(n=40, seed=1)
    task = make_task(arrays)
    v1 = task_dataset_replace(task_id=task.pk).version
    again = replace_dataset(task, arrays)
    assert (again.created, again.version, DatasetVersion.objects.count()) == (False, v1, 1)


@pytest.mark.django_db
def test_after_a_replacement_no_board_row_is_on_the_old_version(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task(digits_like(n=40, seed=1))
    v1 = task_dataset_replace(task_id=task.pk).version
    mine = scored(task, alice, 0.9, dataset_version=v1)
    scored(task, bob, 0.8, dataset_version=v1)
    assert len(leaderboard(task=task)) == 2

    replace_dataset(task, digits_like(n=40, seed=2))  # not re-scored
    assert leaderboard(task=task) == []
    assert not LeaderboardEntry.objects.filter(task=task).exists()
    assert "in step" in check()
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get(f"/api/submissions/{mine.pk}/").json()["notices"] == [
        "Scored on an earlier version of the task's dataset: not on the board until it is "
        "re-scored."
    ]


@pytest.mark.django_db
def test_re_scores_queue_behind_new_uploads_and_cost_no_quota(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task(digits_like(n=40, seed=1), queued_per_user=1, submissions_per_day=3)
    v1 = task_dataset_replace(task_id=task.pk).version
    ranked = scored(task, alice, 0.9, dataset_version=v1)
    hidden = scored(task, alice, 0.95, dataset_version=v1, hidden=True, hidden_reason="x")
    quota_before = quota_get(user=alice, task=task)

    replaced = replace_dataset(task, digits_like(n=40, seed=2), rescore=True)

    assert replaced.rescored == 1
    ranked.refresh_from_db()
    hidden.refresh_from_db()
    assert (ranked.status, ranked.score, ranked.dataset_version) == ("queued", None, None)
    assert ranked.priority == Submission.RESCORE_PRIORITY
    assert hidden.status == "succeeded"  # not ranked: left as it was
    assert quota_get(user=alice, task=task) == quota_before
    # Her re-score neither holds her one waiting place nor a quota slot: she may upload.
    w, b = np.zeros((64, 10)), np.zeros(10)
    upload = submission_create(user=alice, task=task, upload=onnx_upload(linear_classifier(w, b)))
    theirs = submission_create(user=bob, task=task, upload=onnx_upload(linear_classifier(w, b)))
    order = [row[0] for row in fair_order(classes=[task.device_class_slug])]
    assert order.index(upload.pk) < order.index(ranked.pk)
    assert order.index(theirs.pk) < order.index(ranked.pk)
    assert task_rescoring_count(task=Task.objects.get(pk=task.pk)) == 1
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get(f"/api/submissions/{ranked.pk}/").json()["notices"] == [
        "Being re-scored on the task's new dataset."
    ]


@pytest.mark.django_db
def test_replacing_the_dataset_in_the_admin_asks_whether_to_re_score(
    make_task: Any, alice: Any, operator: Any
) -> None:
    first = digits_like(n=40, seed=1)
    task = make_task(first, submissions_per_day=5, queued_per_user=5)
    v1 = task_dataset_replace(task_id=task.pk).version
    entry = scored(task, alice, 0.9, dataset_version=v1)
    console = Client()
    console.force_login(operator)
    form = task_form(
        digits_like(n=50, seed=3),
        dataset_note="relabelled",
        rescore="on",
        max_model_bytes=str(task.max_model_bytes),
        time_limit_s=str(task.time_limit_s),
        **{f"ranking_rule-{k}": v for k, v in RULE_FORMSET.items()},
    )
    response = console.post(f"/admin/submissions/task/{task.pk}/change/", form, follow=True)
    assert response.status_code == 200
    assert "Dataset v2 is current; 1 submission(s) queued for re-scoring" in (
        response.content.decode()
    )
    task.refresh_from_db()
    assert (task.current_dataset.number, task.current_dataset.note) == (2, "relabelled")
    entry.refresh_from_db()
    assert entry.status == "queued" and entry.priority == Submission.RESCORE_PRIORITY
    page = Client().get(task.get_absolute_url()).content.decode()
    assert "1 submission is being re-scored" in page
    assert APIClient().get(f"/api/tasks/{task.slug}/leaderboard/").json()["rescoring"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_re_scores_on_the_new_version_and_the_board_follows(
    make_task: Any, alice: Any, queue: Any, run_worker: Any
) -> None:
    first, second = digits_like(n=60, seed=11), digits_like(n=60, seed=12)
    task = make_task(first)
    v1 = task_dataset_replace(task_id=task.pk).version
    rng = np.random.default_rng(5)
    w, b = rng.normal(size=(64, 10)), rng.normal(size=10)
    submission = submission_create(
        user=alice, task=task, upload=onnx_upload(linear_classifier(w, b))
    )
    run_worker()
    submission.refresh_from_db()
    assert submission.status == "succeeded", submission.error_message
    assert submission.dataset_version == v1
    assert submission.score == pytest.approx(public_accuracy(w, b, first), abs=1e-12)
    quota_before = quota_get(user=alice, task=task)

    v2 = replace_dataset(task, second, rescore=True).version
    assert leaderboard(task=task) == []
    run_worker()

    submission.refresh_from_db()
    assert submission.status == "succeeded", submission.error_message
    assert submission.dataset_version == v2
    assert submission.score == pytest.approx(public_accuracy(w, b, second), abs=1e-12)
    rows = leaderboard(task=task)
    assert [(r.submission.pk, r.submission.dataset_version_id) for r in rows] == [
        (submission.pk, v2.pk)
    ]
    assert task_rescoring_count(task=task) == 0
    assert quota_get(user=alice, task=task) == quota_before
    assert "in step" in check()


def started_submission(task: Task, user: Any) -> Submission:
    """A submission of ``task`` as a job starts it: its task row read then."""
    pending = Submission.objects.create(
        task=task, user=user, sha256="0" * 64, size_bytes=1, original_name="m.onnx"
    )
    pending.model_file.save("m.onnx", ContentFile(b"x"), save=True)
    started = submission_start(submission_id=pending.pk, worker_name="w")
    assert started is not None
    return started


@pytest.mark.django_db
def test_a_worker_holding_the_old_version_loads_the_new_one(make_task: Any, alice: Any) -> None:
    task = make_task(digits_like(n=40, seed=1))
    task_dataset_replace(task_id=task.pk)
    jobs.task_dataset(Task.objects.get(pk=task.pk))  # the worker's last job ran on v1
    replace_dataset(task, digits_like(n=24, seed=2))
    _, data = jobs._load(started_submission(task, alice))
    assert len(data.inputs) == 24


def test_the_cache_serves_the_version_asked_for_and_refuses_changed_bytes(
    tmp_path: Path,
) -> None:
    storage = FileSystemStorage(location=tmp_path / "bucket")
    v1, v2 = b"first version", b"second version"
    name = storage.save("datasets/d.npz", ContentFile(v1))
    sha = {v: hashlib.sha256(v).hexdigest() for v in (v1, v2)}
    cache = tmp_path / "cache"

    first = cached_copy(storage, name, cache, sha256=sha[v1])
    assert first.read_bytes() == v1 and sha[v1][:16] in first.name

    Path(storage.path(name)).write_bytes(v2)  # replaced in storage under the same name
    assert cached_copy(storage, name, cache, sha256=sha[v1]).read_bytes() == v1  # kept copy
    second = cached_copy(storage, name, cache, sha256=sha[v2])
    assert second.read_bytes() == v2 and second != first
    with pytest.raises(DatasetMismatch, match="changed in storage"):
        cached_copy(storage, name, tmp_path / "fresh-cache", sha256=sha[v1])
    assert not list((tmp_path / "fresh-cache").rglob("*.npz"))  # no wrong copy left behind


def _count_reads(monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    """Each read of a dataset file appends its process's id to ``log``."""
    read = jobs._read_dataset

    def counted(task: Task) -> Any:
        with log.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return read(task)

    monkeypatch.setattr(jobs, "_read_dataset", counted)


@pytest.mark.django_db
def test_a_dataset_the_worker_holds_is_what_its_next_job_evaluates_on_without_reading_it(
    make_task: Any, alice: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    task = make_task(digits_like(n=40, seed=1))
    reads = tmp_path / "reads"
    _count_reads(monkeypatch, reads)
    jobs.task_dataset(Task.objects.get(pk=task.pk))  # a job of the task
    _, data = jobs._load(started_submission(task, alice))  # the next one
    assert len(data.inputs) == 40 and len(reads.read_text().split()) == 1
    # A new version is another dataset: the held one is dropped, the new one read.
    replace_dataset(task, digits_like(n=24, seed=2))
    jobs.task_dataset(Task.objects.get(pk=task.pk))
    assert [len(d.inputs) for d in jobs._held.values()] == [24]
    assert len(reads.read_text().split()) == 2


@pytest.mark.django_db
def test_a_dataset_too_large_to_hold_is_read_for_each_job_and_let_go(
    make_task: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    task = Task.objects.get(pk=make_task(digits_like(n=40, seed=1)).pk)
    reads = tmp_path / "reads"
    _count_reads(monkeypatch, reads)
    monkeypatch.setattr(jobs, "HELD_DATASET_MAX_BYTES", 1000)  # 40 x 64 floats: 10 kB
    assert len(jobs.task_dataset(task).inputs) == 40
    assert len(jobs.task_dataset(task).inputs) == 40
    assert jobs._held == {}
    assert len(reads.read_text().split()) == 2


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_reads_a_tasks_dataset_once_for_the_jobs_that_follow(
    make_task: Any, alice: Any, run_worker: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    w, b = np.eye(64, 10, dtype=np.float32), np.zeros(10, dtype=np.float32)
    task = make_task(digits_like(n=40, seed=1), submissions_per_day=10)
    reads = tmp_path / "reads"
    _count_reads(monkeypatch, reads)
    for bias in (0.0, 1.0):
        submission_create(user=alice, task=task, upload=onnx_upload(linear_classifier(w, b + bias)))

    run_worker()  # in this process

    done = Submission.objects.filter(task=task).order_by("pk")
    assert [s.status for s in done] == ["succeeded"] * 2, [s.error_message for s in done]
    assert reads.read_text().split() == [str(os.getpid())]  # the first job read it, once
