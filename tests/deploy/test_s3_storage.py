"""S3 storage against a real S3-compatible server on loopback (moto, its own process): uploads go
through the API into a private bucket, a real worker reads model and dataset back from S3."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from submissions.lifecycle import services
from submissions.models import Submission
from submissions.tasks import dataset_cache
from tests.builders import digits_like, linear_classifier, linear_reference, npz_bytes
from tests.conftest import onnx_upload
from tests.deploy.conftest import S3_KEYS, database_url, settings_from_env
from workers.worker import worker_command

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _anonymous_get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _upload(user: Any, task: Any, model: bytes) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(user)
    response = client.post(
        "/api/submissions/",
        {"task": task.slug, "file": onnx_upload(model)},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    return dict(response.json())


def test_upload_through_the_api_lands_privately_in_s3_and_a_real_worker_scores_it(
    s3_storage: Any,
    s3_client: Any,
    s3_bucket: str,
    s3_endpoint: str,
    settings: Any,
    alice: Any,
    make_task: Any,
    queue: Any,
    run_worker: Any,
) -> None:
    arrays = digits_like(n=100, seed=11)
    task = make_task(arrays)
    rng = np.random.default_rng(5)
    w, b = rng.normal(size=(64, 10)), rng.normal(size=10)
    model = linear_classifier(w, b)

    body = _upload(alice, task, model)

    submission = Submission.objects.get(pk=body["id"])
    stored = s3_client.get_object(Bucket=s3_bucket, Key=submission.model_file.name)
    assert stored["Body"].read() == model
    keys = {o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]}
    assert keys == {submission.model_file.name, task.dataset.name}
    for key in keys:  # private: only the owner's grant, and an anonymous GET is refused
        grants = s3_client.get_object_acl(Bucket=s3_bucket, Key=key)["Grants"]
        assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]
        assert grants[0]["Grantee"]["Type"] == "CanonicalUser"
        assert _anonymous_get(f"{s3_endpoint}/{s3_bucket}/{key}") == 403
    assert not Path(settings.MEDIA_ROOT).exists()  # nothing went to a local disk

    run_worker()

    submission.refresh_from_db()
    logits = linear_reference(w, b, arrays["inputs"])
    public = arrays["split"] == "public"
    expected = float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))
    assert submission.status == Submission.Status.SUCCEEDED, submission.error_message
    assert submission.score == pytest.approx(expected, abs=1e-12)
    assert submission.samples_evaluated == 100
    # The worker read the dataset from S3 into its cache, not from any shared path.
    cached = list(Path(settings.EVAL_CACHE_DIR).rglob("*.npz"))
    assert len(cached) == 1 and cached[0].read_bytes() == npz_bytes(arrays)


def test_a_worker_on_another_host_needs_only_the_connection_settings(
    s3_storage: Any,
    s3_bucket: str,
    s3_endpoint: str,
    settings: Any,
    tmp_path: Path,
    alice: Any,
    make_task: Any,
    queue: Any,
) -> None:
    arrays = digits_like(n=64, seed=21)
    task = make_task(arrays)
    w, b = np.eye(64, 10), np.zeros(10)
    body = _upload(alice, task, linear_classifier(w, b))
    host2 = tmp_path / "host2"  # shares no directory with this process
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DEBUG": "0",
        "SECRET_KEY": "another-host-secret-key",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "STORAGE_BACKEND": "s3",
        "AWS_STORAGE_BUCKET_NAME": s3_bucket,
        "AWS_S3_ENDPOINT_URL": s3_endpoint,
        "AWS_S3_REGION_NAME": "us-east-1",
        "AWS_S3_ADDRESSING_STYLE": "path",
        **S3_KEYS,
        "PORTAL_VAR_DIR": str(host2 / "var"),
        "EVAL_CACHE_DIR": str(host2 / "cache"),
        "MEDIA_ROOT": str(host2 / "media"),
        "BOARD_CACHE_NAMESPACE": settings.BOARD_CACHE_NAMESPACE,
    }
    worker = worker_command("host2-gpu0", burst=True)

    result = subprocess.run(worker, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)

    assert result.returncode == 0, result.stderr[-2000:]
    submission = Submission.objects.get(pk=body["id"])
    logits = linear_reference(w, b, arrays["inputs"])
    public = arrays["split"] == "public"
    expected = float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))
    assert submission.status == Submission.Status.SUCCEEDED, submission.error_message
    assert submission.worker_name == "host2-gpu0"
    assert submission.score == pytest.approx(expected, abs=1e-12)
    assert [p.read_bytes() for p in (host2 / "cache").rglob("*.npz")] == [npz_bytes(arrays)]
    assert not (host2 / "media").exists()


def test_signed_model_url_works_and_outlives_the_longest_job(
    s3_storage: Any, s3_endpoint: str, s3_bucket: str, alice: Any, make_task: Any, queue: Any
) -> None:
    task = make_task(time_limit_s=3600)
    model = linear_classifier(np.ones((64, 10)), np.zeros(10))
    submission = Submission.objects.get(pk=_upload(alice, task, model)["id"])

    url = submission.model_file.url
    expires = int(parse_qs(urlsplit(url).query)["X-Amz-Expires"][0])
    assert expires == s3_storage["AWS_QUERYSTRING_EXPIRE"]
    assert expires > services.job_timeout_s(time_limit_s=3600, timing=task.timing_protocol())
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == model
    assert _anonymous_get(url.split("?")[0]) == 403


def test_dataset_replaced_in_the_bucket_is_fetched_again(
    s3_storage: Any, s3_client: Any, s3_bucket: str, settings: Any, make_task: Any
) -> None:
    first, second = digits_like(n=20, seed=1), digits_like(n=30, seed=2)
    task = make_task(first)

    path_a = services.task_dataset_path(task)
    assert path_a.read_bytes() == npz_bytes(first)
    assert services.task_dataset_path(task) == path_a  # cached: same version, same file

    s3_client.put_object(Bucket=s3_bucket, Key=task.dataset.name, Body=npz_bytes(second))
    path_b = services.task_dataset_path(task)

    assert path_b != path_a
    assert path_b.read_bytes() == npz_bytes(second)
    with np.load(path_b) as arrays:
        assert len(arrays["inputs"]) == 30


def test_concurrent_workers_download_a_dataset_once_and_never_see_a_partial_file(
    s3_storage: Any, settings: Any, make_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrays = digits_like(n=2000, seed=3)
    task = make_task(arrays)
    downloads: list[Path] = []
    real_download = dataset_cache._download

    def counted(stored: Any, target: Path, *args: Any) -> None:
        downloads.append(target)
        real_download(stored, target, *args)

    monkeypatch.setattr(dataset_cache, "_download", counted)

    def fetch(_: int) -> bytes:
        return dataset_cache.cached_copy(
            default_storage, task.dataset.name, settings.EVAL_CACHE_DIR
        ).read_bytes()

    with ThreadPoolExecutor(max_workers=8) as pool:
        contents = list(pool.map(fetch, range(16)))

    assert len(downloads) == 1
    assert all(content == npz_bytes(arrays) for content in contents)
    assert not list(Path(settings.EVAL_CACHE_DIR).rglob("*.part"))


def test_s3_settings_refuse_a_missing_bucket_and_an_expiry_s3_would_reject(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_STORAGE_BUCKET_NAME", raising=False)
    with pytest.raises(ImproperlyConfigured, match="AWS_STORAGE_BUCKET_NAME must be set"):
        settings_from_env(monkeypatch, {"STORAGE_BACKEND": "s3"})
    with pytest.raises(ImproperlyConfigured, match="exceeds S3's limit of 604800"):
        settings_from_env(
            monkeypatch,
            {
                "STORAGE_BACKEND": "s3",
                "AWS_STORAGE_BUCKET_NAME": "b",
                "AWS_QUERYSTRING_EXPIRE": "700000",
            },
        )


def test_dataset_replaced_during_the_download_is_fetched_again_not_mixed_up(
    s3_storage: Any,
    s3_client: Any,
    s3_bucket: str,
    settings: Any,
    make_task: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old, new = digits_like(n=20, seed=4), digits_like(n=40, seed=5)
    task = make_task(old)
    real_download = dataset_cache._download
    calls: list[Path] = []

    def replace_then_download(stored: Any, target: Path, *args: Any) -> None:
        calls.append(target)
        if len(calls) == 1:  # the operator replaces the file after the worker looked it up
            s3_client.put_object(Bucket=s3_bucket, Key=task.dataset.name, Body=npz_bytes(new))
        real_download(stored, target, *args)

    monkeypatch.setattr(dataset_cache, "_download", replace_then_download)

    path = services.task_dataset_path(task)

    assert len(calls) == 2  # S3 refused the first GET (If-Match), the second got the new version
    assert path == calls[1] and path.read_bytes() == npz_bytes(new)
    assert not calls[0].exists()  # no copy of the new bytes under the old version's name
    assert not list(Path(settings.EVAL_CACHE_DIR).rglob("*.part"))
