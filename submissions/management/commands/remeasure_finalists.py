"""Re-measure a task's finalists (``submissions/boards/finalists.py``), or with ``--report`` print
its latest re-measurement: each finalist's ranks and p50 before and after."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluation import formats
from submissions.boards.cells import remeasured_text
from submissions.boards.finalists import (
    FinalistsRefused,
    finalist_campaigns,
    finalist_report,
    finalists_remeasure,
)
from submissions.models import FinalistCampaign, Task


class Command(BaseCommand):
    help = (
        "Re-time the top N ranked entries of each board of a task over more sessions on one "
        "device class, one after the other; --report prints the latest one's ranks before and "
        "after."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug")
        parser.add_argument("--top", type=int, help="top N of each board (the task's setting)")
        parser.add_argument("--sessions", type=int, help="sessions each (the task's setting)")
        parser.add_argument("--device-class", help="slug of the class (the task's)")
        parser.add_argument("--report", action="store_true", help="print, start nothing")

    def handle(self, *args: Any, slug: str, report: bool, **options: Any) -> None:
        task = Task.objects.filter(slug=slug).first()
        if task is None:
            raise CommandError(f"no task with the slug {slug}")
        if report:
            self._report(task)
            return
        try:
            campaign = finalists_remeasure(
                task_id=task.pk,
                top=options["top"],
                sessions=options["sessions"],
                device_class=options["device_class"],
                trigger=FinalistCampaign.Trigger.COMMAND,
            )
        except FinalistsRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"campaign {campaign.pk}: {campaign.measurements.count()} finalist(s), "
            f"{campaign.sessions} session(s) each on {campaign.device_class_id}"
        )

    def _report(self, task: Task) -> None:
        campaigns = finalist_campaigns(task_ids=[task.pk], limit=1)
        if not campaigns:
            raise CommandError(f"{task.slug}: no re-measurement yet")
        campaign = campaigns[0]
        state = "finished" if campaign.finished else "running"
        self.stdout.write(f"campaign {campaign.pk} on {campaign.device_class_id}: {state}")
        for line in finalist_report(campaign):
            m = line.measurement
            ranks = "; ".join(
                f"{b}: {before or '–'} → {after or '–'}" for b, before, after in line.ranks
            )
            new = remeasured_text(m) or m.error_message or m.get_status_display()
            self.stdout.write(
                f"#{m.submission_id} {line.name}: {ranks}; p50 {formats.latency(m.before_p50_ms)}"
                f" → {formats.latency(m.latency_p50_ms)} ({new})"
            )
