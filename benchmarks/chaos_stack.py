"""The processes the fault suite (benchmarks/chaos.py) starts, each one stopped on every exit
path: its own redis-server, its own database on the machine's PostgreSQL, gunicorn, and the
evaluation workers, whose exits on their own are noted, never answered with a restart."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import redis

from benchmarks import kill_recovery, site_load

ROOT = Path(__file__).resolve().parent.parent


class RedisServer:
    """redis-server on ``port`` that keeps nothing on disk: killed, it comes back empty."""

    def __init__(self, port: int, log: IO[bytes]) -> None:
        self.port, self.log = port, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start; see its log") from None
                time.sleep(0.05)
            finally:
                client.close()

    def kill(self) -> None:
        """SIGKILL: whatever it held is gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            site_load._stop(self.process)
            self.process = None


@contextlib.contextmanager
def own_database(admin_url: str, name: str) -> Iterator[str]:
    """A fresh database ``name`` on the server of ``admin_url``, dropped on exit (with whatever
    connection a process left open: FORCE)."""
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    site_load._admin_sql(admin_url, drop)
    site_load._admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        from django.db import connections

        connections.close_all()
        site_load._admin_sql(admin_url, drop)


@contextlib.contextmanager
def web(env: dict[str, str], log: IO[bytes], *, web_workers: int = 2) -> Iterator[str]:
    """gunicorn with the project's config; its base URL. Stopped on exit."""
    port = site_load._free_port()
    command = [
        sys.executable, "-m", "gunicorn", "--config", "docker/gunicorn.conf.py",
        "--bind", f"127.0.0.1:{port}", "--workers", str(web_workers), "--threads", "4",
        "portal.wsgi:application",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        site_load._wait_healthy(base, process)
        yield base
    finally:
        site_load._stop(process)


@dataclass(frozen=True)
class Exit:
    """A worker process that ended without being told to: its last error, the exception that
    error ended with, and the end of its log."""

    name: str
    returncode: int
    cause: list[str]
    log_tail: list[str]


def last_error(lines: list[str]) -> list[str]:
    """The last ERROR line of a log and the exception summary ("module.Error: why") closest
    after it: a worker's log ends with warnings that its own quitting caused."""
    errors = [i for i, line in enumerate(lines) if " ERROR " in line]
    if not errors:
        return []
    after = lines[errors[-1] + 1 :]
    summaries = [line for line in after if re.match(r"^[\w.]+(Error|Exception)\b", line)]
    return [lines[errors[-1]], *summaries[-1:]]


class Fleet(kill_recovery.Fleet):
    """kill_recovery's named workers, plus: a worker that exits on its own is noted (``reap``)
    and left dead; only the faults and the suite between faults start one again."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        super().__init__(env, log_dir)
        self.exits: list[Exit] = []
        self.log_starts: dict[str, int] = {}  # where each one's log began: they append to one

    def start(self, name: str) -> None:
        path = self.log_dir / f"{name}.log"
        self.log_starts[name] = path.stat().st_size if path.exists() else 0
        super().start(name)

    def reap(self) -> list[Exit]:
        """The workers that ended since the last call, forgotten as running."""
        ended = [name for name, proc in self.procs.items() if proc.poll() is not None]
        new = []
        for name in ended:
            lines = self.log_lines(name)
            returncode = self.procs.pop(name).returncode
            new.append(Exit(name, returncode, last_error(lines), lines[-15:]))
        self.exits += new
        return new

    def restart(self, name: str) -> str:
        """Stop ``name`` as a supervisor restarting it does (SIGTERM, then SIGKILL after a grace
        period) and start it again; what happened to the old process."""
        self.reap()
        proc = self.procs.pop(name, None)
        if proc is None:
            how = "had already exited"
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
                how = f"stopped on SIGTERM (exit {proc.returncode})"
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                how = "did not stop on SIGTERM within 10 s: SIGKILLed"
        self.start(name)
        return how

    def log_lines(self, name: str) -> list[str]:
        """What the latest process under ``name`` logged."""
        with (self.log_dir / f"{name}.log").open("rb") as log:
            log.seek(self.log_starts.get(name, 0))
            return log.read().decode(errors="replace").splitlines()

    def wait_registered(self, names: list[str], timeout_s: float = 90) -> list[str]:
        """Wait until rq lists every one of ``names``; those that never appeared."""
        from rq import Worker

        from queueing.queues import evaluation_redis

        deadline = time.monotonic() + timeout_s
        missing = set(names)
        while True:
            self.reap()
            with contextlib.suppress(redis.RedisError):
                missing = set(names) - {w.name for w in Worker.all(connection=evaluation_redis())}
            if not missing:
                return []
            if time.monotonic() > deadline or not missing & set(self.procs):
                return sorted(missing)
            time.sleep(0.2)
