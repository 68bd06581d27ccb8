"""Messages between a worker and the model process it runs (``evaluation.model_process``).

A message is a JSON header and, optionally, named binary parts (numpy arrays in the ``.npy``
format, raw bytes), each a frame: its length (8 bytes, network order), then its bytes. JSON and
``.npy`` without pickles: what the model process sends is read as data, never as code, since the
model that process runs may have taken it over. Every frame the worker reads is bounded
(``max_bytes``), so a hostile sender cannot make it allocate without limit.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_LENGTH = struct.Struct("!Q")
HEADER_MAX_BYTES = 1 << 20


class ChannelClosed(Exception):
    """The other end closed its side (it exited, or was killed)."""


class ChannelTimeout(Exception):
    """Nothing complete came before the deadline."""


class ChannelError(Exception):
    """What came is not a message of this protocol (too large, not JSON, not an array)."""


@dataclass
class Message:
    header: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)

    @property
    def op(self) -> str:
        return str(self.header.get("op", ""))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


class Channel:
    """One end: messages go out on ``write_fd`` and come in on ``read_fd`` (both blocking)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(
        self,
        header: dict[str, Any],
        arrays: dict[str, np.ndarray] | None = None,
        blobs: dict[str, bytes] | None = None,
    ) -> None:
        arrays, blobs = arrays or {}, blobs or {}
        header = {**header, "arrays": list(arrays), "blobs": list(blobs)}
        frames = [json.dumps(header).encode()]
        frames += [_npy(a) for a in arrays.values()]
        frames += list(blobs.values())
        for frame in frames:
            self._write(_LENGTH.pack(len(frame)))
            self._write(frame)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.write_fd, view) :]
            except BrokenPipeError as exc:
                raise ChannelClosed("the other end closed the channel") from exc

    def receive(self, *, timeout_s: float | None = None, max_bytes: int = 1 << 40) -> Message:
        """The next message, waiting at most ``timeout_s`` for it to start (None: for ever);
        each part at most ``max_bytes``. Once a message has started, the rest is read whole."""
        if timeout_s is not None and not self.readable(timeout_s):
            raise ChannelTimeout(f"no message within {timeout_s:g} s")
        try:
            header = json.loads(self._frame(HEADER_MAX_BYTES))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ChannelError(f"a header that is not JSON: {exc}") from exc
        if not isinstance(header, dict):
            raise ChannelError("a header that is not a JSON object")
        message = Message(header)
        for name in header.get("arrays", []):
            message.arrays[str(name)] = self._array(max_bytes)
        for name in header.get("blobs", []):
            message.blobs[str(name)] = self._frame(max_bytes)
        return message

    def readable(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.read_fd], [], [], max(timeout_s, 0.0))
        return bool(ready)

    def _array(self, max_bytes: int) -> np.ndarray:
        try:
            return np.load(io.BytesIO(self._frame(max_bytes)), allow_pickle=False)
        except ValueError as exc:
            raise ChannelError(f"a part that is not a plain numpy array: {exc}") from exc

    def _frame(self, max_bytes: int) -> bytes:
        (size,) = _LENGTH.unpack(self._exactly(_LENGTH.size))
        if size > max_bytes:
            raise ChannelError(f"a part of {size} bytes, over the {max_bytes} allowed")
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        parts, left = [], size
        while left:
            chunk = os.read(self.read_fd, min(left, 1 << 20))
            if not chunk:
                raise ChannelClosed("the other end closed the channel")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        for fd in {self.read_fd, self.write_fd}:
            with contextlib.suppress(OSError):
                os.close(fd)
