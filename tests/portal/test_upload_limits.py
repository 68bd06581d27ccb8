"""A huge upload is refused before it is read; a large one is streamed to disk, not to memory.

The body comes from a stream that produces bytes only when the server reads them and counts what
was read, fed to the real WSGI application (every middleware, the upload handlers, the view):
nothing is buffered on the client side, so the memory traced is the server's.
"""

from __future__ import annotations

import io
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler

from portal.accounts.services import api_token_create
from submissions.models import Submission

pytestmark = pytest.mark.django_db(transaction=True)

GB = 1024**3
MB = 1024**2
BOUNDARY = "----portal-test-boundary"


class LazyMultipartBody(io.RawIOBase):
    """A multipart body with a ``size``-byte file part, generated as it is read."""

    def __init__(self, task: str, size: int) -> None:
        head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="task"\r\n\r\n{task}\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="huge.onnx"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        self._parts: Iterator[bytes] = iter([head, *self._zeros(size), tail])
        self._pending = b""
        self.length = len(head) + size + len(tail)
        self.bytes_read = 0

    @staticmethod
    def _zeros(size: int) -> Iterator[bytes]:
        chunk = bytes(MB)
        for start in range(0, size, MB):
            yield chunk[: min(MB, size - start)]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            self._pending = next(self._parts, b"")
            if not self._pending:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self.bytes_read += n
        return n


def post_through_wsgi(body: LazyMultipartBody, token: str, length: int) -> tuple[str, bytes]:
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/submissions/",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BufferedReader(body, buffer_size=64 * 1024),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
        "CONTENT_LENGTH": str(length),
        "HTTP_AUTHORIZATION": f"Token {token}",
    }
    status: list[str] = []
    response = WSGIHandler()(environ, lambda s, headers, *exc: status.append(s))
    try:
        return status[0], b"".join(response)
    finally:
        response.close()  # as a WSGI server does: this removes the request's temporary files


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
    assert b"the largest accepted is 2.0 GB" in content
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
        b'{"file":["The model is 314.6 MB; this task accepts models up to 104.9 MB."]}'
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
    assert b"the largest accepted is 10.0 MB" in content
    assert body.bytes_read == 0


def test_a_form_upload_over_the_cap_gets_a_plain_413(client: Any, settings: Any) -> None:
    settings.UPLOAD_MAX_BYTES = 1000
    response = client.generic(
        "POST", "/tasks/digits/submit/", b"x" * 2000, content_type="application/octet-stream"
    )
    assert response.status_code == 413
    assert response.content.decode() == (
        "The upload is 2.0 KB; the largest accepted is 1000 bytes."
    )
