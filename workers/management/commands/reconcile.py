"""Check the queue against the database and repair it (see workers/recovery.py).

Run it after Redis was lost or replaced, or whenever a submission looks stuck. Workers run the
same recovery on their own every EVAL_RECOVERY_INTERVAL_S; this command is for "now".
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from workers.recovery import reconcile


class Command(BaseCommand):
    help = (
        "Re-enqueue queued submissions that have no job in Redis, and retry or fail running "
        "submissions whose worker is gone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-wait",
            action="store_true",
            help="Do not wait to decide about running submissions that no worker claims "
            "(by default the command waits up to EVAL_HEARTBEAT_STALE_S for their worker).",
        )

    def handle(self, *args: Any, no_wait: bool, **options: Any) -> None:
        report = reconcile()
        self.stdout.write(str(report))
        deadline = time.monotonic() + settings.EVAL_HEARTBEAT_STALE_S + 5
        while report.suspects and not no_wait and time.monotonic() < deadline:
            time.sleep(min(2.0, settings.EVAL_HEARTBEAT_STALE_S / 2))
            report = reconcile()
            if report.changed or not report.suspects:
                self.stdout.write(str(report))
        if report.suspects:
            ids = ", ".join(str(i) for i in report.suspects)
            self.stdout.write(f"still unclaimed (decided by the next run): {ids}")
