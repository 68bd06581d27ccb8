"""The worker list in the admin: the workers rq itself has registered, on every class's queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import django_rq
from django.conf import settings
from rq.worker import Worker


@dataclass(frozen=True)
class WorkerRow:
    name: str
    hostname: str
    pid: int | None
    state: str
    current_job_id: str | None
    successful: int
    failed: int
    last_heartbeat: datetime | None
    started: datetime | None


def worker_rows() -> list[WorkerRow]:
    queue = django_rq.get_queue(settings.EVALUATION_QUEUE)
    workers = Worker.all(connection=queue.connection)  # each device class has its own queue
    return sorted(
        (
            WorkerRow(
                name=w.name,
                hostname=w.hostname or "",
                pid=w.pid,
                state=str(w.get_state()),
                current_job_id=w.get_current_job_id(),
                successful=w.successful_job_count,
                failed=w.failed_job_count,
                last_heartbeat=w.last_heartbeat,
                started=w.birth_date,
            )
            for w in workers
        ),
        key=lambda row: row.name,
    )
