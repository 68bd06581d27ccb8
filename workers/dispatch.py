"""Fair turns at dequeue time: a worker pops any job of its class queues, then runs the fairest.

rq pops the oldest job of the worker's queues. Before running it, the worker asks the database
for the next submissions in the fair order (submissions/lifecycle/turns.py) and, when the first of
them is
not the popped one, swaps: in one Redis script it takes the wanted job out of its queue and puts
the popped job back at the front of its own. If the wanted job is not there (another worker just
took it, or Redis was lost and recovery has not re-enqueued it yet) the next candidate is tried,
and in the end the popped job runs: fairness is best effort, a job is never lost.

Cancelling stays what it was (the job leaves its queue, so it cannot be swapped in), and a job
whose task moved to another device class is sent to that class's queue instead of running here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from redis import Redis
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job

from queueing.queues import queue_name
from submissions.lifecycle import services
from submissions.lifecycle.turns import next_candidates
from submissions.models import Submission

log = logging.getLogger(__name__)

# KEYS: wanted job's queue, popped job's queue, popped job's intermediate list (rq 2+ moves a job
# there while a single-queue worker fetches it). ARGV: wanted job id, popped job id.
SWAP = """
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('LREM', KEYS[3], 1, ARGV[2])
  redis.call('LPUSH', KEYS[2], ARGV[2])
  return 1
end
return 0
"""


def submission_id_of(job: Job) -> int | None:
    if job.func_name != "workers.jobs.evaluate_submission" or not job.args:
        return None
    return int(job.args[0])


def _swap(
    connection: Redis, popped: Job, popped_queue: Queue, wanted_id: str, wanted: Queue
) -> bool:
    script = connection.register_script(SWAP)
    keys = [wanted.key, popped_queue.key, popped_queue.intermediate_queue_key]
    return bool(script(keys=keys, args=[wanted_id, popped.id]))


def _send_to_its_class(job: Job, queue: Queue, submission_id: int, job_id: str) -> None:
    """The task's device class changed while this job waited: this worker must not run it."""
    connection = queue.connection
    connection.lrem(queue.intermediate_queue_key, 1, job.id)
    job.cancel()
    if job_id == job.id:  # the submission's current job: give it one on the right queue
        services.submission_enqueue(submission_id=submission_id)


def _submission_row(submission_id: int) -> tuple[str, str, str] | None:
    """The popped job's submission: status, job id, its task's device class (or None)."""
    rows = Submission.objects.filter(pk=submission_id)
    return rows.values_list("status", "job_id", "task__device_class__slug").first()


def _others_waiting(connection: Redis, queues: dict[str, Queue]) -> bool:
    """Whether any job waits in this worker's queues, the popped one aside: one round trip."""
    with connection.pipeline(transaction=False) as pipe:
        for q in queues.values():
            pipe.llen(q.key)
        return any(pipe.execute())


def fair_pick(
    job: Job, queue: Queue, *, classes: Sequence[str], queues: dict[str, Queue]
) -> tuple[Job, Queue] | None:
    """The job this worker should run instead of ``job`` (popped from ``queue``), or None when
    ``job`` was sent away and the worker should dequeue again."""
    submission_id = submission_id_of(job)
    if submission_id is None:
        return job, queue
    candidates = None
    if _others_waiting(queue.connection, queues):
        candidates = next_candidates(classes=classes)
        if candidates and candidates[0][0] == submission_id:
            # Its turn, as the popped job mostly is: queued and of these classes, so the row
            # need not be read (one query a job instead of two in a burst).
            return job, queue
    row = _submission_row(submission_id)
    if row is None or row[0] != Submission.Status.QUEUED:
        return job, queue  # it runs, finds its submission gone or taken, and does nothing
    if row[2] not in classes:
        _send_to_its_class(job, queue, submission_id, row[1])
        return None
    if candidates is None:
        return job, queue  # no other job to swap in: no turn to take (saves the fair order query)
    for candidate_id, candidate_job_id, device_class in candidates:
        if candidate_id == submission_id:
            break
        wanted_queue = queues.get(queue_name(device_class))
        if not candidate_job_id or wanted_queue is None:
            continue
        if _swap(queue.connection, job, queue, candidate_job_id, wanted_queue):
            try:
                wanted = Job.fetch(candidate_job_id, connection=queue.connection)
            except NoSuchJobError:
                return None  # listed but gone; the popped job is back on its queue
            log.info("fair turn: submission %s before %s", candidate_id, submission_id)
            return wanted, wanted_queue
    return job, queue
