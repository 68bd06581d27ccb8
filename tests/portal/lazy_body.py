"""A multipart upload body generated while the server reads it, and a way to send it through the
real WSGI application without a socket: the client side holds no copy of the body, so the memory
traced in the process is the server's."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from django.core.handlers.wsgi import WSGIHandler

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
