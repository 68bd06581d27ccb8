"""rq jobs: thin wrappers that load rows, run the model in a model process, and save through
services.

Runs in the work horse (a fresh fork per job). The horse never loads a model: it hands the model
and the inputs to a confined model process (``workers.sandboxing``, ``evaluation.sandbox``) and
scores the predictions it sends back. Under an ``EvaluationWorker`` the worker claims the
submission and saves a success (``Claim``, ``ResultReader``), so the horse's own database
connection is only for failures and progress; under a plain rq worker the job does both itself.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import DatabaseError
from redis import Redis
from rq import Queue, get_current_job
from rq.exceptions import StopRequested
from rq.timeouts import JobTimeoutException

from evaluation.limits import time_limit_message
from evaluation.runner import Dataset, DeviceUnavailable, EvalResult, EvaluationError, score_run
from evaluation.sandbox import ModelProcessDied
from submissions.boards.leaderboard import BOARD_LAG_S, DRAIN_WAIT_S, leaderboard_drain_stale
from submissions.lifecycle import services
from submissions.models import Submission, Task
from workers import sandboxing
from workers.device import device_config, worker_name
from workers.measurement import Measurement

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 0.5
JOB_TIMEOUT = " (the evaluation as a whole, loading the model included, ran past its allowance)"


def _progress_writer(submission_id: int) -> Callable[[float], None]:
    # At most one UPDATE per interval, the first after one interval too, and none at the end
    # (submission_succeed sets 1.0): a model scored in milliseconds costs no progress write,
    # which matters for the throughput of many small submissions.
    last = [time.monotonic()]

    def write(fraction: float) -> None:
        now = time.monotonic()
        if fraction < 1.0 and now - last[0] >= PROGRESS_INTERVAL_S:
            last[0] = now
            try:
                services.submission_set_progress(submission_id=submission_id, progress=fraction)
            except DatabaseError as exc:  # a progress bar is not worth the evaluation
                log.warning("submission %s: progress not saved: %s", submission_id, exc)

    return write


def _worker_name() -> str:
    job = get_current_job()
    return (job.worker_name if job is not None and job.worker_name else None) or worker_name()


# The dataset a ready work horse loaded while it waited (workers/ready_horse.py): the task's
# id and dataset version (or file name, for a task without versions), and the arrays. A horse
# runs one job, so one entry is all it needs.
_preloaded: dict[tuple[int, int | str | None], Dataset] = {}


def _dataset_key(task: Task) -> tuple[int, int | str | None]:
    return (task.pk, task.current_dataset_id or task.dataset.name)


def _read_dataset(task: Task) -> Dataset:
    with np.load(services.task_dataset_path(task), allow_pickle=False) as arrays:
        return Dataset.from_arrays({k: arrays[k] for k in arrays.files})


def dataset_preload(task: Task) -> None:
    """Load the task's dataset now, for the evaluation this process runs next (a ready horse,
    unless its worker held that dataset already: ``keep_dataset_for_horses``)."""
    if _dataset_key(task) not in _preloaded:
        _hold(task, _read_dataset(task))


def _hold(task: Task, data: Dataset) -> None:
    """``data`` is now the one dataset this process keeps: one task's, one version's."""
    _preloaded.clear()
    _preloaded[_dataset_key(task)] = data


# The largest dataset a worker keeps for its horses (``keep_dataset_for_horses``): every fork
# copies the page tables of the worker's memory, a cost that grows with it, so a worker keeps no
# more than this; its horses read a larger one themselves.
WORKER_DATASET_MAX_BYTES = 256 << 20
_too_large_for_worker: tuple[int, int | str | None] | None = None


def keep_dataset_for_horses(task: Task) -> None:
    """In a worker, before it forks a horse: hold the task's dataset, which every horse forked
    afterwards inherits instead of reading it again. A horse only reads the arrays, so their
    pages stay shared with the worker instead of being read and faulted in by every horse.
    Held until a job of another task or another dataset version; nothing held for a dataset over
    ``WORKER_DATASET_MAX_BYTES``, or one that cannot be read here (the horse then reads it, and
    fails the job with the reason if it cannot either)."""
    global _too_large_for_worker
    key = _dataset_key(task)
    if key in _preloaded or key == _too_large_for_worker:
        return
    _preloaded.clear()  # another task's or version's: not kept while this one is read
    try:
        data = _read_dataset(task)
    except Exception as exc:
        log.warning("dataset of task %s not held for the horses: %s", task.pk, exc)
        return
    if data.inputs.nbytes + data.targets.nbytes > WORKER_DATASET_MAX_BYTES:
        _too_large_for_worker = key
        return
    _hold(task, data)


def _load(submission: Submission) -> tuple[bytes, Dataset]:
    """The model and the task's current dataset. ``submission.task`` was read when the job
    started: its ``current_dataset_id`` is the version these arrays are, and the one the result
    records (``evaluate_submission``), whatever the operator uploads meanwhile."""
    with submission.model_file.open("rb") as f:
        model_bytes = f.read()
    task = submission.task
    data = _preloaded.pop(_dataset_key(task), None)
    _preloaded.clear()  # another task's arrays: not ours to keep in this horse's memory
    return model_bytes, data if data is not None else _read_dataset(task)


def _evaluate(submission: Submission, name: str) -> EvalResult:
    """Run the model in a model process (``evaluation.sandbox``), then score its predictions
    here: the targets never leave this process, the model never enters it."""
    model_bytes, data = _load(submission)
    device = device_config(name)
    spec = submission.task.spec()
    process = sandboxing.model_process(device)
    try:
        measured = Measurement(
            device,
            lock_wait_s=spec.timing.lock_wait_s,
            device_class=submission.task.device_class_slug,
            pid=process.pid,
        )
        outcome = process.evaluate(
            model_bytes,
            data.inputs,
            spec,
            device,
            hooks=measured.hooks(),
            progress=_progress_writer(submission.pk),
            before_loading=measured.start_peak,
            complete_costs=submission.costs_complete is False,
            test_hook=settings.EVAL_SANDBOX_TEST_HOOK or None,
        )
        peak = measured.peak_memory_bytes()  # read while the process still exists
    finally:
        process.stop()
    result = score_run(outcome.run, data, spec, device)
    result.timing_exclusive = outcome.run.timing.exclusive
    result.peak_memory_bytes = peak
    if outcome.costs is None and submission.costs_complete is False:
        log.warning("submission %s: costs not completed from a run", submission.pk)
    result.costs = outcome.costs
    return result


@dataclass(frozen=True)
class Claim:
    """A job's submission as its ``EvaluationWorker`` claimed it (``services.submission_start``,
    on the worker's own database connection) before handing the job to a work horse.
    ``submission`` is None when it was no longer queued: the horse skips the job."""

    submission_id: int
    worker_name: str
    submission: Submission | None


# Set in a work horse whose worker claimed its submission (``hand_claim``): on the way to a
# success the horse then opens no database connection (a new PostgreSQL session is a backend
# process forked and its catalogs read, plus the first read of each table). It writes its
# result down a pipe to the worker (``_result_fd``), which saves it at once, while the horse
# finishes rq's bookkeeping and exits.
# A failure, or the progress of a long run, is still written by the horse, which then opens its
# connection as before.
_claim: Claim | None = None
_result_fd: int | None = None

# A result on the pipe: its length (8 bytes, network order), then the pickled EvalResult.
_LENGTH = struct.Struct("!Q")


def sends_result(claim: Claim | None) -> bool:
    """Whether a horse given ``claim`` runs the model and sends its result to the worker (a claim
    of a submission no longer queued is skipped; no claim: the horse claims and saves)."""
    return claim is not None and claim.submission is not None


def hand_claim(claim: Claim | None, result_fd: int | None) -> None:
    """In a horse (or in a worker just before it forks one): the worker's claim, and the write
    end of the pipe its result goes down."""
    global _claim, _result_fd
    _claim, _result_fd = claim, result_fd


def write_all(fd: int, data: bytes) -> None:
    """``data`` into a pipe, however many writes it takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _leave_result(result: EvalResult) -> bool:
    """Send ``result`` to the worker; False when it cannot go (the horse saves it itself)."""
    global _result_fd
    fd, _result_fd = _result_fd, None
    if fd is None:
        return False
    try:
        data = pickle.dumps(result)
        write_all(fd, _LENGTH.pack(len(data)) + data)
    except Exception as exc:  # the worker's end closed (it died), or the result would not pickle
        log.warning("could not hand the result to the worker: %s", exc)
        return False
    finally:
        os.close(fd)
    return True


class ResultReader:
    """The worker's end of a horse's result pipe (non-blocking): ``read`` waits for the whole
    result or for the horse's end, keeping what came so far when rq's monitoring alarm
    interrupts it. It watches the horse through a pidfd, which turns readable when the horse
    ends without reaping it (rq's ``wait_for_horse`` reaps it next): the end of the pipe alone
    would not do, should anything else have inherited its write end. Where the kernel has no
    pidfd (before Linux 5.3, some sandboxes) it looks every ``POLL_S`` with ``waitid`` and
    ``WNOWAIT``, which does not reap either."""

    POLL_S = 0.02

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.pidfd: int | None = None
        self.polling = False
        self.buffer = bytearray()
        self.done = False

    def read(self, pid: int) -> EvalResult | None:
        """The result of the horse ``pid``; None when it ended without sending one."""
        if self.done:
            return None
        if self.pidfd is None and not self.polling:
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:
                self.polling = True
        while True:
            if self.pidfd is not None:
                ready, _, _ = select.select([self.fd, self.pidfd], [], [])
                ended = self.pidfd in ready
            else:
                select.select([self.fd], [], [], self.POLL_S)
                ended = _ended(pid)
            closed = self._drain()
            result = self._complete()
            if result is not None or closed or ended:
                self.close()
                return result

    def _drain(self) -> bool:
        """Read what is there; True at the end of the pipe."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            self.buffer += chunk

    def _complete(self) -> EvalResult | None:
        if len(self.buffer) < _LENGTH.size:
            return None
        (size,) = _LENGTH.unpack_from(self.buffer)
        if len(self.buffer) < _LENGTH.size + size:
            return None
        result: EvalResult = pickle.loads(self.buffer[_LENGTH.size : _LENGTH.size + size])
        return result  # written by our own horse, never by a user

    def close(self) -> None:
        if not self.done:
            self.done = True
            for fd in (self.fd, self.pidfd):
                if fd is not None:
                    os.close(fd)


def _ended(pid: int) -> bool:
    """Whether the child ``pid`` has ended, leaving it to be reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def save_handed_result(claim: Claim, result: EvalResult) -> bool:
    """In the worker: save the result its horse sent (True: saved). ``submission_succeed``
    changes nothing once the row is no longer running (a cancel won)."""
    if claim.submission is None:
        return False
    return services.submission_succeed(
        submission_id=claim.submission_id,
        result=result,
        dataset_version_id=claim.submission.task.current_dataset_id,
        drain=False,  # the worker refreshes the boards after the horse (EvaluationWorker)
    )


# Set in an EvaluationWorker's work horse (``leave_boards_to_worker``): the worker refreshes the
# boards itself once the horse has ended (``EvaluationWorker.execute_job``).
_boards_left_to_worker = False


def leave_boards_to_worker() -> None:
    """In a work horse whose worker refreshes the boards after it: this job does not. A fresh
    horse is the dearest place for the refresh: each one compiles its queries anew and its new
    database session reads their tables' catalogs again, which a warm worker has done already."""
    global _boards_left_to_worker
    _boards_left_to_worker = True


def evaluate_submission(submission_id: int) -> str:
    try:
        return _evaluate_and_save(submission_id)
    finally:
        # Whatever this job's outcome (a failure, a skip): the queue's last job refreshes the
        # board for every result still pending, earlier jobs' included.
        if not _boards_left_to_worker:
            _refresh_boards()


def _evaluate_and_save(submission_id: int) -> str:
    claim = _claim if _claim is not None and _claim.submission_id == submission_id else None
    if claim is not None:
        name, submission = claim.worker_name, claim.submission
    else:
        name = _worker_name()
        submission = services.submission_start(submission_id=submission_id, worker_name=name)
    if submission is None:
        return "skipped: not queued"
    try:
        result = _evaluate(submission, name)
    except ModelProcessDied as exc:
        # The model's process was killed or crashed: once more, as a work horse that died.
        outcome = services.submission_retry_or_fail(
            submission_id=submission_id,
            cause=services.HORSE_DIED,
            worker_name=name,
            detail=exc.why,
        )
        log.warning("submission %s: %s; %s", submission_id, exc, outcome)
        return f"model process died: {outcome}"
    except EvaluationError as exc:
        services.submission_fail(
            submission_id=submission_id,
            message=str(exc),
            log_text=f"worker {name}: " + traceback.format_exc(),
            by_system=isinstance(exc, DeviceUnavailable),
        )
        return "failed"
    except JobTimeoutException:
        # rq's own timeout (the sum of the phases' bounds, services.job_timeout_s): the model
        # kept the horse busy that long, which is the model's doing, not ours, and not retried.
        services.submission_fail(
            submission_id=submission_id,
            message=time_limit_message(submission.task.time_limit_s, JOB_TIMEOUT),
            log_text=traceback.format_exc(),
        )
        return "failed"
    except Exception:
        services.submission_fail(
            submission_id=submission_id,
            message="The evaluation failed because of an error on our side, not in your model. "
            "Operators have the details; you can submit again.",
            log_text=traceback.format_exc(),
            by_system=True,
        )
        raise
    if claim is not None and _leave_result(result):
        return "succeeded: saved by the worker"
    services.submission_succeed(
        submission_id=submission_id,
        result=result,
        dataset_version_id=submission.task.current_dataset_id,
        drain=False,  # the worker refreshes the board after the horse (or evaluate_submission)
    )
    return "succeeded"


def _refresh_boards() -> None:
    """At the end of a job: the board refreshes owed (``refresh_boards``) for its queue."""
    job = get_current_job()  # None outside rq (tests): nothing else can be on its way
    refresh_boards(job.connection if job else None, job.origin if job else None)


# How often a worker whose queue still holds jobs looks for results pending past BOARD_LAG_S.
STALE_LOOK_EVERY_S = 0.25
_stale_looked_at = float("-inf")


def refresh_boards(connection: Redis | None, queue: str | None) -> bool:
    """The board refreshes owed after a job (``leaderboard.leaderboard_drain``): every pending
    result when no other job waits in ``queue``, waiting for another process's drain in flight
    rather than leaving them to it; else, while its later jobs will refresh the rest, those
    pending longer than ``BOARD_LAG_S`` (with whatever is pending beside them), looked for at
    most every ``STALE_LOOK_EVERY_S`` (a query a job in a burst otherwise: a result may wait
    that much longer). Results are committed already: a failure here is logged, and recovery
    refreshes later. A stop request (rq raises StopRequested in an idle worker) goes through;
    the refresh's transaction rolls back. Returns whether another job waited in ``queue``
    (False when that could not be read)."""
    global _stale_looked_at
    waiting = False
    try:
        if connection is not None and queue is not None:
            waiting = bool(connection.llen(Queue(queue, connection=connection).key))
        if not waiting:
            leaderboard_drain_stale(older_than_s=0.0, look_again=True, wait_s=DRAIN_WAIT_S)
        elif time.monotonic() - _stale_looked_at >= STALE_LOOK_EVERY_S:
            _stale_looked_at = time.monotonic()
            leaderboard_drain_stale(older_than_s=BOARD_LAG_S)
    except StopRequested:
        raise
    except Exception:
        log.exception("board refresh after a job failed; recovery will refresh it")
    return waiting
