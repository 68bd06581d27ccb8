"""Rebuild the leaderboard read models from the submissions (after a restore or manual SQL)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from submissions.leaderboard import leaderboard_rebuild
from submissions.models import Task


class Command(BaseCommand):
    help = "Recompute every task's leaderboard entries and best-score records from submissions."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slugs", nargs="*", help="only these tasks (default: all)")

    def handle(self, *args: Any, slugs: list[str], **options: Any) -> None:
        tasks = Task.objects.filter(slug__in=slugs) if slugs else Task.objects.all()
        for task in tasks:
            leaderboard_rebuild(task_id=task.pk)
            self.stdout.write(f"rebuilt {task.slug}")
