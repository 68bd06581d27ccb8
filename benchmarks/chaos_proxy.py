"""A TCP proxy that can play "PostgreSQL is down" without touching the machine's PostgreSQL.

The fault suite (benchmarks/chaos.py) points the portal's DATABASE_URL at this proxy. ``down()``
aborts every open connection (each side sees a reset, as when the server dies) and closes the
listening socket, so a new connection is refused; ``up()`` listens on the same port again. The
event loop runs in its own thread, so the suite's other threads only call these methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

CHUNK = 65536


class FaultProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; started with ``start()``, ended by ``close()``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> int:
        """Listen on a free port (the same one after a ``down()``); the port."""
        self._thread.start()
        self._call(self._listen())
        return self.port

    def down(self) -> int:
        """Drop every open connection and refuse new ones; how many were dropped."""
        return int(self._call(self._down()))

    def up(self) -> None:
        self._call(self._listen())

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._down())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
            self.port = self._server.sockets[0].getsockname()[1]

    async def _down(self) -> int:
        if self._server is not None:
            self._server.close()
            self._server = None
        dropped = list(self._writers)
        for writer in dropped:
            writer.transport.abort()  # a reset, not a polite close: the server "died"
        self._writers.clear()
        return len(dropped) // 2

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = {writer, upstream_writer}
        self._writers |= pair
        await asyncio.gather(
            _pipe(reader, upstream_writer), _pipe(upstream_reader, writer), return_exceptions=True
        )
        self._writers -= pair
        for each in pair:
            each.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction until either side ends; the caller closes both."""
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()
