"""Run the demo: evaluation workers, the notifier and the web server, each a child process.

What we start we stop, on every exit path: Ctrl-C, SIGTERM or SIGHUP, a child that dies (the web
server on a port taken meanwhile), or an error. The web server is a child rather than a call in
this process because runserver leaves with ``os._exit``, which would skip our clean-up. Each
child's pid file under ``var/run/`` lets `make stop` find it if this command is killed outright.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.pidfiles import pidfile_write
from submissions.demo.tasks import DEMO_USERS
from workers.worker import worker_command

HOST = "127.0.0.1"


def port_check_free(port: int) -> None:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise CommandError(
                f"Port {port} on {HOST} is already in use ({exc.strerror}); nothing was started. "
                f"Stop whatever listens there, or choose another port: make demo PORT={port + 1}"
            ) from exc


def notifier_command() -> list[str]:
    """A plain rq worker for e-mails and webhooks; the scheduler runs webhooks' retries."""
    return [
        sys.executable,
        "manage.py",
        "rqworker",
        settings.NOTIFICATIONS_QUEUE,
        "--with-scheduler",
    ]


class _Stop(Exception):
    """A signal asked us to stop."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


class Command(BaseCommand):
    help = "Start evaluation workers and the web server for the demo; Ctrl-C stops them all."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument(
            "--check-port",
            action="store_true",
            help="Only check that the port is free (make demo does, before migrating).",
        )

    def handle(
        self, *args: Any, port: int, workers: int, check_port: bool = False, **options: Any
    ) -> None:
        port_check_free(port)  # before anything starts, so a taken port leaves nothing behind
        if check_port:
            return
        run_dir = Path(settings.VAR_DIR) / "run"
        # Children find the Redis this process uses (the embedded one stops when this one exits).
        env = {"REDIS_URL": settings.REDIS_URL}
        children: dict[Path, subprocess.Popen[bytes]] = {}
        # SIGINT too: a demo started in the background by a script inherits it ignored, while
        # the workers (rq sets its own handlers) still stop on it, and would look like crashes.
        stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {sig: signal.signal(sig, _raise_stop) for sig in stops}
        try:
            for i in range(workers):
                name = f"demo-worker-{i + 1}"
                children[run_dir / f"{name}.pid"] = self._start(worker_command(name), env)
            children[run_dir / "demo-notifier.pid"] = self._start(notifier_command(), env)
            web = [sys.executable, "manage.py", "runserver", f"{HOST}:{port}", "--noreload"]
            children[run_dir / "demo-web.pid"] = self._start(web, env)
            for path, child in children.items():
                pidfile_write(path, child.pid)
            # The banner last, once the site answers: printed at once, the web server's system
            # checks and the workers' start-up logs scrolled it out of sight.
            _wait_until_listening(port, children)
            self._announce(port, workers)
            self._wait_for_any_exit(children)
        except _Stop:
            self.stdout.write("\nStopping the demo...")
        finally:
            _stop(children)
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _start(self, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, cwd=settings.BASE_DIR, env={**os.environ, **env})

    def _announce(self, port: int, workers: int) -> None:
        logins = ", ".join(f"{u} / {p}" for u, p, _ in DEMO_USERS)
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  Portal: http://{HOST}:{port}/\n  Admin:  http://{HOST}:{port}/admin/\n"
                f"  Logins: {logins}\n"
                f"  {workers} evaluation worker(s) and the notifier running "
                "(e-mails print here). Ctrl-C stops everything.\n"
            )
        )

    def _wait_for_any_exit(self, children: dict[Path, subprocess.Popen[bytes]]) -> None:
        """Raise CommandError when a child exits by itself: the demo is broken without it."""
        while True:
            for path, child in children.items():
                code = child.poll()
                if code is not None:
                    raise CommandError(f"{path.stem} exited with status {code}; demo stopped.")
            time.sleep(0.5)


def _wait_until_listening(
    port: int, children: dict[Path, subprocess.Popen[bytes]], timeout_s: float = 60.0
) -> None:
    """Until the web server accepts connections; CommandError when a child exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path, child in children.items():
            if child.poll() is not None:
                raise CommandError(f"{path.stem} exited with status {child.returncode}.")
        try:
            with socket.create_connection((HOST, port), timeout=1.0):
                time.sleep(1.0)  # let the workers print their start-up lines before the banner
                return
        except OSError:
            time.sleep(0.2)
    raise CommandError(f"The web server did not answer on port {port} in {timeout_s:g} s.")


def _stop(children: dict[Path, subprocess.Popen[bytes]], timeout_s: float = 20.0) -> None:
    """SIGTERM every child at once (a worker's second signal after Ctrl-C stops its job at once),
    SIGKILL those still running after ``timeout_s``, and remove their pid files."""
    for child in children.values():
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + timeout_s
    for child in children.values():
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    for path in children:
        path.unlink(missing_ok=True)
