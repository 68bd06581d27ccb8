"""Pid files for the processes a checkout starts, so that `make stop` stops exactly those.

The demo writes one file per child (web server, workers) under ``var/run/``; the embedded Redis
writes its own ``redis.pid``. A pid file is only believed while its process is still the one that
wrote it: ours carry the process's start time, and Redis's is checked against the socket under
the same directory, so a reused pid never stops a stranger's process.

Run as ``python -m portal.pidfiles stop VAR_DIR`` (what `make stop` does). Needs no Django, so it
never starts the embedded Redis it is about to stop.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterable
from pathlib import Path

import psutil

REDIS_PIDFILE = "redis.pid"


def pidfile_write(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid} {psutil.Process(pid).create_time()!r}\n")


def pidfile_process(path: Path) -> psutil.Process | None:
    """The live process this pid file names, or None when it is gone or is someone else now."""
    try:
        fields = path.read_text().split()
        process = psutil.Process(int(fields[0]))
        if path.name == REDIS_PIDFILE:
            socket_path = str(path.parent / "redis.sock")
            owned = any(socket_path in part for part in process.cmdline())
        else:
            owned = len(fields) == 2 and process.create_time() == float(fields[1])
    except (OSError, ValueError, IndexError, psutil.Error):
        return None
    return process if owned else None


def process_stop(process: psutil.Process, *, timeout_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL what is still running after ``timeout_s``; waits for the exit."""
    with contextlib.suppress(psutil.NoSuchProcess):
        process.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs([process], timeout=timeout_s)
        for survivor in alive:
            survivor.kill()
        psutil.wait_procs(alive, timeout=5)


def pidfiles_stop(paths: Iterable[Path]) -> list[str]:
    """Stop every process named by these pid files and remove the files; returns what stopped."""
    stopped = []
    for path in paths:
        process = pidfile_process(path)
        if process is not None:
            stopped.append(f"{path.stem} (pid {process.pid})")
            process_stop(process)
        path.unlink(missing_ok=True)
    return stopped


def stop_everything_under(var_dir: Path) -> list[str]:
    """Stop every process of this checkout found under ``var_dir``: the demo's web server and
    workers first (they use Redis while they stop), the embedded Redis servers last."""
    if not var_dir.is_dir():
        return []
    pidfiles = sorted(var_dir.rglob("*.pid"))
    demo = [p for p in pidfiles if p.name != REDIS_PIDFILE]
    redis = [p for p in pidfiles if p.name == REDIS_PIDFILE]
    return pidfiles_stop(demo) + pidfiles_stop(redis)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "stop":
        print("usage: python -m portal.pidfiles stop VAR_DIR", file=sys.stderr)
        return 2
    stopped = stop_everything_under(Path(argv[1]).resolve())
    print("Stopped: " + ", ".join(stopped) if stopped else "Nothing of ours was running.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
