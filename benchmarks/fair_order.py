"""How long a worker's fair pick takes with a long queue: ``next_candidates`` (the first eight of
the fair order, asked before each job while other jobs wait) and ``queue_positions`` (the
submission page's place in the queue), with a burst of one entrant's uploads queued beside one
upload each of many others, all with a history of started evaluations.

Each is timed twice: right after the rows arrive, before autovacuum has analysed the table (the
planner guesses: what a worker meets in the first minute of a deadline rush), and after
``ANALYZE``. It creates a task ``bench-fair-order`` and users ``bench-fo-*`` and deletes them.

Run: ``DATABASE_URL=postgres://... python -m benchmarks.fair_order [--burst 2000 --entrants 100
--history 200]``, on a fresh database (a reused one's statistics decide the first figures).
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta
from typing import Any

from benchmarks.timer import median_ms

TASK_SLUG = "bench-fair-order"


def _rows(task: Any, users: list[Any], burst: int, history: int) -> list[Any]:
    from django.utils import timezone

    from submissions.models import Submission

    now = timezone.now()

    def row(user: Any, sha: str, **fields: Any) -> Submission:
        return Submission(
            user=user, task=task, sha256=sha, size_bytes=1, original_name="m.onnx", **fields
        )

    rows = []
    for i, user in enumerate(users):
        for k in range(history):
            at = now - timedelta(hours=k, minutes=i)
            rows.append(row(user, f"h{i}-{k}", status="succeeded", created_at=at, started_at=at))
    for k in range(burst):
        at = now + timedelta(milliseconds=k)
        rows.append(row(users[0], f"b{k}", status="queued", created_at=at, job_id=f"b{k}"))
    for i, user in enumerate(users[1:]):
        rows.append(row(user, f"q{i}", status="queued", created_at=now, job_id=f"q{i}"))
    return rows


def _cleanup() -> None:
    from django.contrib.auth import get_user_model

    from submissions.models import Submission, Task

    Submission.objects.filter(task__slug=TASK_SLUG).delete()
    Task.objects.filter(slug=TASK_SLUG).delete()
    get_user_model().objects.filter(username__startswith="bench-fo-").delete()


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=2000, help="one entrant's queued uploads")
    parser.add_argument("--entrants", type=int, default=100, help="entrants, each one queued")
    parser.add_argument("--history", type=int, default=200, help="started runs per entrant")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from submissions.demo.tasks import TASKS
    from submissions.lifecycle.turns import next_candidates, queue_positions
    from submissions.models import Submission, Task

    call_command("migrate", verbosity=0)
    _cleanup()
    results = []
    try:
        task = Task(slug=TASK_SLUG, **{**TASKS["digits"], "title": "Benchmark fair order"})
        task.dataset.name = f"{TASK_SLUG}.npz"  # never read: nothing is evaluated
        task.save()
        users = [
            get_user_model().objects.create_user(f"bench-fo-{i}") for i in range(args.entrants)
        ]
        Submission.objects.bulk_create(
            _rows(task, users, args.burst, args.history), batch_size=2000
        )
        classes = [task.device_class_slug]
        last = Submission.objects.filter(task=task, status="queued").latest("created_at")
        for stats in ("before ANALYZE", "after ANALYZE"):
            if stats == "after ANALYZE" and connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE submissions_submission")
                    cursor.execute("ANALYZE submissions_task")
            results.append(
                {
                    "statistics": stats,
                    "queued": args.burst + args.entrants - 1,
                    "entrants": args.entrants,
                    "next_candidates_ms": median_ms(
                        lambda: next_candidates(classes=classes), args.repeats
                    ),
                    "queue_position_ms": median_ms(
                        lambda: queue_positions(submissions=[last]), max(3, args.repeats // 5)
                    ),
                }
            )
    finally:
        _cleanup()
    print("| statistics | queued | entrants | next_candidates (median) | queue position |")
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['statistics']} | {r['queued']} | {r['entrants']} | "
            f"{r['next_candidates_ms']} ms | {r['queue_position_ms']} ms |"
        )
    return results


if __name__ == "__main__":
    main()
