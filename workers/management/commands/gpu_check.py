"""``manage.py gpu_check``: the GPU acceptance check, the first thing to run on a new GPU host.

Prints one row per check (see workers/gpu_acceptance.py) and exits non-zero when any fails.
On a host without a GPU every GPU check is skipped with the reason and it exits 0, unless
``--require-gpu`` says this host must have one.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workers.gpu_acceptance import FAIL, PASS, SKIP, Check, run_checks


class Command(BaseCommand):
    help = "Check that this host's GPU evaluates models as the portal says it does."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--require-gpu",
            action="store_true",
            help="Fail (exit 1) when there is no GPU to check instead of skipping.",
        )
        parser.add_argument(
            "--seconds",
            type=float,
            default=10.0,
            help="Time budget per model for the runner-overhead measurement (default 10).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"| {'check':<20} | result | detail |\n|{'-' * 22}|--------|--------|")
        checks = run_checks(budget_s=options["seconds"], report=self._row)
        failed = [c.name for c in checks if c.status == FAIL]
        skipped = [c.name for c in checks if c.status == SKIP]
        if failed:
            raise CommandError(f"GPU check failed: {', '.join(failed)}")
        if skipped and options["require_gpu"]:
            raise CommandError(
                f"--require-gpu, but these checks were skipped: {', '.join(skipped)}"
            )
        passed = sum(c.status == PASS for c in checks)
        summary = f"{passed} passed, {len(skipped)} skipped ({', '.join(skipped) or 'none'})."
        self.stdout.write(self.style.SUCCESS(summary) if not skipped else summary)

    def _row(self, check: Check) -> None:
        self.stdout.write(f"| {check.name:<20} | {check.status:<6} | {check.detail} |")
