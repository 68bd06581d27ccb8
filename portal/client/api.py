"""The portal's REST API over HTTP, with every refusal turned into a sentence for the user.

401 → the token was refused; 429 → wait for ``Retry-After`` (when asked to) or say when to retry;
400 → the field messages the server gave; no connection → "cannot reach URL".
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

import requests

from portal.client.errors import ClientError

TIMEOUT_S = 60.0
MAX_RATE_LIMIT_WAITS = 5
BARE_FIELDS = ("detail", "non_field_errors", "file")  # printed without a "field:" prefix


def _detail(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return body["detail"]
    return str(body)[:300]


def refusal_messages(body: Any) -> list[str]:
    """The messages of a DRF 400 body ({"field": ["message", ...]}), one line each."""
    if not isinstance(body, dict):
        return [str(body)]
    lines = []
    for field, messages in body.items():
        for message in messages if isinstance(messages, list) else [messages]:
            lines.append(str(message) if field in BARE_FIELDS else f"{field}: {message}")
    return lines


def retry_after_s(response: requests.Response) -> int:
    try:
        return max(int(response.headers.get("Retry-After", "60")), 1)
    except ValueError:
        return 60


class Refused(ClientError):
    """A 400 answer: the request was understood and refused; ``messages`` are the server's."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


class MultipartBody:
    """A multipart/form-data body read from disk as it is sent, never held whole in memory.

    requests streams any object with ``read`` and a length, with a Content-Length header.
    """

    def __init__(self, fields: dict[str, str], file_field: str, path: Path) -> None:
        self.boundary = uuid.uuid4().hex
        head = b"".join(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
            for name, value in fields.items()
        )
        filename = path.name.replace('"', "_")
        head += (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        self.parts: list[bytes | Path] = [head, path, f"\r\n--{self.boundary}--\r\n".encode()]
        self.length = len(head) + path.stat().st_size + len(self.parts[2])  # type: ignore[arg-type]
        self._chunks: Iterator[bytes] = self._iterate()

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return self.length

    def _iterate(self) -> Iterator[bytes]:
        for part in self.parts:
            if isinstance(part, bytes):
                yield part
                continue
            with part.open("rb") as f:
                while chunk := f.read(1 << 20):
                    yield chunk

    def read(self, size: int = -1) -> bytes:
        return next(self._chunks, b"")  # http.client reads until b"", whatever size it asks

    def rewind(self) -> None:
        self._chunks = self._iterate()


class PortalApi:
    def __init__(self, url: str, token: str = "", *, wait_on_rate_limit: bool = False) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.wait_on_rate_limit = wait_on_rate_limit
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "oep"

    def absolute(self, path_or_url: str) -> str:
        return urljoin(self.url + "/", path_or_url)

    def same_origin(self, url: str) -> bool:
        mine, theirs = urlsplit(self.url), urlsplit(url)
        return (mine.scheme, mine.netloc) == (theirs.scheme, theirs.netloc)

    def request(
        self,
        method: str,
        path: str,
        *,
        authenticated: bool = True,
        rewind: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        """One request; raises ClientError for anything but a 2xx answer."""
        url = self.absolute(path)
        headers = dict(kwargs.pop("headers", {}))
        if authenticated and self.token and self.same_origin(url):  # never to storage hosts
            headers["Authorization"] = f"Token {self.token}"
        for _ in range(MAX_RATE_LIMIT_WAITS + 1):
            try:
                response = self.session.request(
                    method, url, headers=headers, timeout=TIMEOUT_S, **kwargs
                )
            except requests.ConnectionError as exc:
                raise ClientError(f"cannot reach {self.url} ({_reason(exc)})") from exc
            except requests.Timeout as exc:
                raise ClientError(f"{self.url} did not answer within {TIMEOUT_S:g} s") from exc
            if response.status_code != 429 or not self.wait_on_rate_limit:
                break
            wait = retry_after_s(response)
            print(f"{_detail(response)} Waiting {wait} s…", file=sys.stderr, flush=True)
            time.sleep(wait)
            if rewind is not None:
                rewind()
        return self._checked(response)

    def _checked(self, response: requests.Response) -> requests.Response:
        code = response.status_code
        if code < 400:
            return response
        if code == 401:
            raise ClientError(
                f"The portal refused the token: {_detail(response)} "
                "Log in again with `oep login` (or set OEP_TOKEN)."
            )
        if code == 429:
            wait = retry_after_s(response)
            at = (datetime.now() + timedelta(seconds=wait)).strftime("%H:%M:%S")
            raise ClientError(
                f"{_detail(response)} Next try possible at {at} (in {wait} s); --wait waits for it."
            )
        if code == 400:
            try:
                raise Refused(refusal_messages(response.json()))
            except ValueError:
                pass
        raise ClientError(f"{_detail(response)} (HTTP {code})")

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None).json()

    def post_json(self, path: str, body: dict[str, Any], *, authenticated: bool = True) -> Any:
        return self.request("POST", path, json=body, authenticated=authenticated).json()

    def post_file(self, path: str, fields: dict[str, str], file_field: str, file: Path) -> Any:
        body = MultipartBody(fields, file_field, file)
        response = self.request(
            "POST",
            path,
            data=body,
            headers={"Content-Type": body.content_type, "Content-Length": str(len(body))},
            rewind=body.rewind,
        )
        return response.json()

    def stream(self, url: str) -> requests.Response:
        return self.request("GET", url, stream=True)


def _reason(exc: requests.ConnectionError) -> str:
    text = str(exc)
    for known in ("Connection refused", "Name or service not known", "No route to host"):
        if known in text:
            return known.lower()
    return "connection failed"


def copy_stream(response: requests.Response, out: IO[bytes]) -> Iterator[int]:
    """Write the body to ``out``, yielding the bytes written so far after each chunk."""
    done = 0
    for chunk in response.iter_content(chunk_size=1 << 20):
        out.write(chunk)
        done += len(chunk)
        yield done
