"""A huge upload is refused before it is read; a large one is streamed to disk, not to memory.

The body comes from a stream that produces bytes only when the server reads them and counts what
was read, fed to the real WSGI application (every middleware, the upload handlers, the view):
nothing is buffered on the client side, so the memory traced is the server's.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from accounts.services import api_token_create
from submissions.models import Submission
from tests.portal.lazy_body import LazyMultipartBody, post_through_wsgi

pytestmark = pytest.mark.django_db(transaction=True)

GB = 1024**3
MB = 1024**2


def traced(call: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_a_5_gb_body_is_refused_with_413_before_any_of_it_is_read(
    alice: Any, make_task: Any
) -> None:
    task = make_task()
    token = api_token_create(user=alice, name="t").secret
    body = LazyMultipartBody(task.slug, 5 * GB)

    (status, content), peak = traced(lambda: post_through_wsgi(body, token, body.length))

    assert status.startswith("413")
    assert b"the largest accepted is 2.00 GiB" in content
    assert body.bytes_read == 0
    assert peak < 4 * MB, f"{peak / MB:.1f} MB traced"
    assert Submission.objects.count() == 0


def test_a_large_body_under_the_cap_streams_to_disk_with_flat_memory(
    alice: Any, make_task: Any, settings: Any, tmp_path: Any
) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(uploads)
    task = make_task(max_model_bytes=100 * MB)
    token = api_token_create(user=alice, name="t").secret
    body = LazyMultipartBody(task.slug, 300 * MB)

    (status, content), peak = traced(lambda: post_through_wsgi(body, token, body.length))

    assert status.startswith("400")
    assert content == (
        b'{"file":["The model is 300 MiB (314,572,800 bytes); this task accepts models up to '
        b'100 MiB."]}'
    )
    assert body.bytes_read == body.length  # read whole, but only ever a chunk at a time
    assert peak < 16 * MB, f"{peak / MB:.1f} MB traced while reading 300 MB"
    assert Submission.objects.count() == 0
    assert list(uploads.iterdir()) == []  # the temporary file is gone too


def test_the_cap_is_configurable(alice: Any, make_task: Any, settings: Any) -> None:
    settings.UPLOAD_MAX_BYTES = 10 * MB
    task = make_task()
    token = api_token_create(user=alice, name="t").secret
    body = LazyMultipartBody(task.slug, 11 * MB)

    status, content = post_through_wsgi(body, token, body.length)

    assert status.startswith("413")
    assert b"the largest accepted is 10.0 MiB" in content
    assert body.bytes_read == 0


def test_a_form_upload_over_the_cap_gets_a_plain_413(client: Any, settings: Any) -> None:
    settings.UPLOAD_MAX_BYTES = 1000
    response = client.generic(
        "POST", "/tasks/digits/submit/", b"x" * 2000, content_type="application/octet-stream"
    )
    assert response.status_code == 413
    assert response.content.decode() == (
        "The upload is 1.95 KiB; the largest accepted is 1000 bytes."
    )
