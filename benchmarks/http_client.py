"""A participant's script over HTTP, for the benchmarks that drive the running site: a
multipart upload body, and a keep-alive connection that uploads with an API token and polls.
Standard library only: Locust's participants (``locustfile.py``) build their uploads here too."""

from __future__ import annotations

import http.client
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

FINAL = ("succeeded", "failed", "cancelled")


def multipart(fields: dict[str, str], file_name: str, content: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with text fields and one file field named "file"."""
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + content
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), boundary


class Http:
    """One participant's keep-alive connection to ``base``, signed in with ``token``."""

    def __init__(self, base: str, token: str, task: str) -> None:
        parts = urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        self.auth = {"Authorization": f"Token {token}", "Host": parts.hostname or ""}
        self.task = task

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        headers = {**self.auth, **(headers or {})}
        try:
            self.connection.request(method, path, body=body, headers=headers)
            response = self.connection.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # gunicorn closes a connection left idle past its keep-alive (while another part of
            # a benchmark runs): the request never reached it, so it is sent again, once.
            self.connection.close()
            self.connection.request(method, path, body=body, headers=headers)
            response = self.connection.getresponse()
        return response.status, response.read()

    def upload(self, model: bytes) -> int:
        """The new submission's id; RuntimeError when the upload is refused."""
        body, boundary = multipart({"task": self.task}, "bench.onnx", model)
        content_type = f"multipart/form-data; boundary={boundary}"
        status, answer = self.request(
            "POST", "/api/submissions/", body, {"Content-Type": content_type}
        )
        if status != 201:
            raise RuntimeError(f"upload refused: {status} {answer[:300]!r}")
        return int(json.loads(answer)["id"])

    def get_json(self, path: str) -> Any:
        status, answer = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {answer[:300]!r}")
        return json.loads(answer)

    def close(self) -> None:
        self.connection.close()
