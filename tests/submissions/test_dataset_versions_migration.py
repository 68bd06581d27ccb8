"""The migration that starts dataset versions: each existing task's dataset becomes its version 1
(with its sha256 and row counts) and every result so far records it."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.builders import digits_like, npz_bytes

BEFORE = ("submissions", "0011_notifications")
AFTER = ("submissions", "0012_dataset_versions")


def migrate(target: tuple[str, str]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


@pytest.mark.django_db(transaction=True)
def test_existing_tasks_get_version_one_and_their_results_record_it() -> None:
    old = migrate(BEFORE)
    data = npz_bytes(digits_like(n=30, seed=4))
    name = default_storage.save("datasets/old.npz", ContentFile(data))
    user = old.get_model("auth", "User").objects.create(username="early")
    task = old.get_model("submissions", "Task").objects.create(
        slug="old", title="Old", batch_size=4, input_shape=[1, 8, 8], output_shape=[10],
        metric="accuracy", dataset=name,
    )  # fmt: skip
    common = dict(task=task, user=user, sha256="0" * 64, size_bytes=1, original_name="m.onnx")
    Submission = old.get_model("submissions", "Submission")
    done = Submission.objects.create(status="succeeded", score=0.5, **common)
    waiting = Submission.objects.create(status="queued", **common)
    try:
        new = migrate(AFTER)
        version = new.get_model("submissions", "DatasetVersion").objects.get()
        migrated = new.get_model("submissions", "Task").objects.get(pk=task.pk)
        assert migrated.current_dataset_id == version.pk
        assert (version.number, version.file.name) == (1, name)
        assert version.sha256 == hashlib.sha256(data).hexdigest() and version.rows == 30
        results = new.get_model("submissions", "Submission").objects
        assert results.get(pk=done.pk).dataset_version_id == version.pk
        assert results.get(pk=waiting.pk).dataset_version_id is None  # scored when it runs
    finally:
        migrate(("submissions", sorted_latest()))


def sorted_latest() -> str:
    executor = MigrationExecutor(connection)
    return max(n for app, n in executor.loader.graph.leaf_nodes() if app == "submissions")
