"""Enqueue pending notifications now (recovery does it on its own for rows pending longer than
NOTIFICATIONS_SWEEP_AFTER_S). Run it after Redis was down; the notifier then sends them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from submissions.notifications.services import notifications_sweep


class Command(BaseCommand):
    help = "Put every pending notification (e-mail, webhooks) on the notifications queue again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="Only notifications recorded at least this long ago (default: all pending).",
        )

    def handle(self, *args: Any, older_than: float, **options: Any) -> None:
        swept = notifications_sweep(older_than_s=older_than)
        self.stdout.write(f"enqueued {len(swept)} pending notification(s)")
