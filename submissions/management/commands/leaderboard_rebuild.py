"""Rebuild the leaderboard read models from the submissions (after a restore or manual SQL), or
with ``--check`` report how the kept rows differ from a rebuild, changing nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from submissions.boards.leaderboard import leaderboard_differences, leaderboard_rebuild
from submissions.models import Task


class Command(BaseCommand):
    help = (
        "Recompute every task's leaderboard entries and best-score records from submissions; "
        "with --check, only report differences (exit status 1 when there are any)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slugs", nargs="*", help="only these tasks (default: all)")
        parser.add_argument(
            "--check",
            action="store_true",
            help="compare the kept rows with a rebuild and print the differences; change nothing",
        )

    def handle(self, *args: Any, slugs: list[str], check: bool, **options: Any) -> None:
        tasks = Task.objects.filter(slug__in=slugs) if slugs else Task.objects.all()
        unknown = sorted(set(slugs) - set(tasks.values_list("slug", flat=True)))
        if unknown:
            raise CommandError(f"no task with the slug {', '.join(unknown)}")
        if check:
            self._check(list(tasks))
            return
        for task in tasks:
            leaderboard_rebuild(task_id=task.pk)
            self.stdout.write(f"rebuilt {task.slug}")

    def _check(self, tasks: list[Task]) -> None:
        differences = [line for task in tasks for line in leaderboard_differences(task_id=task.pk)]
        for line in differences:
            self.stdout.write(line)
        if differences:
            raise CommandError(
                f"{len(differences)} difference(s) between the kept leaderboard rows and a "
                "rebuild; run `manage.py leaderboard_rebuild` to repair them",
                returncode=1,
            )
        self.stdout.write(f"in step: {len(tasks)} task(s), kept rows equal a rebuild")
