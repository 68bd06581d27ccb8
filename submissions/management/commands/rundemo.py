"""Run the demo: evaluation workers in the background and the development web server.

Workers are separate processes (the same command a GPU host runs); they stop with this command.
"""

from __future__ import annotations

import subprocess
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from evaluation.worker import worker_command
from submissions.management.commands.seed_demo import DEMO_USERS


class Command(BaseCommand):
    help = "Start evaluation workers and the web server for the demo."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=2)

    def handle(self, *args: Any, port: int, workers: int, **options: Any) -> None:
        procs = [subprocess.Popen(worker_command(f"demo-worker-{i + 1}")) for i in range(workers)]
        logins = ", ".join(f"{u} / {p}" for u, p, _ in DEMO_USERS)
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  Portal: http://127.0.0.1:{port}/\n  Admin:  http://127.0.0.1:{port}/admin/\n"
                f"  Logins: {logins}\n"
                f"  {workers} evaluation worker(s) running. Ctrl-C stops everything.\n"
            )
        )
        try:
            call_command("runserver", f"127.0.0.1:{port}", use_reloader=False)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=30)
