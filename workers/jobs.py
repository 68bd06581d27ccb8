"""rq jobs: thin wrappers that load rows, run the model in a model process, and save through
services.

A job runs in its worker's own process (``workers.worker.EvaluationWorker``). The worker never
loads a model: it hands the model and the inputs to a confined model process
(``workers.sandboxing``, ``evaluation.sandbox``), scores the predictions it sends back, and
saves. The model process is the boundary a model's crash, memory or time cannot cross.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from django.conf import settings
from django.db import DatabaseError
from redis import Redis
from rq import Queue, get_current_job
from rq.exceptions import StopRequested
from rq.timeouts import JobTimeoutException

from evaluation import formats
from evaluation.limits import time_limit_message
from evaluation.runner import (
    CUDA,
    Dataset,
    DeviceConfig,
    DeviceUnavailable,
    EvalResult,
    EvaluationError,
    score_run,
)
from evaluation.sandbox import ModelProcessDied, SandboxRun
from evaluation.spec import TaskSpec
from evaluation.timing import combine_sessions
from submissions.boards.leaderboard import BOARD_LAG_S, DRAIN_WAIT_S, leaderboard_drain_stale
from submissions.lifecycle import services
from submissions.models import Submission, Task
from workers import outages, sandboxing
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


def current_worker_name() -> str:
    job = get_current_job()
    return (job.worker_name if job is not None and job.worker_name else None) or worker_name()


# The dataset of the task this worker ran last (its id and dataset version, or file name for a
# task without versions), kept for the next job of that task: one entry.
_held: dict[tuple[int, int | str | None], Dataset] = {}

# The largest dataset a worker keeps between jobs; a larger one is read for each job and let go.
HELD_DATASET_MAX_BYTES = 256 << 20


def _dataset_key(task: Task) -> tuple[int, int | str | None]:
    return (task.pk, task.current_dataset_id or task.dataset.name)


def _read_dataset(task: Task) -> Dataset:
    with np.load(services.task_dataset_path(task), allow_pickle=False) as arrays:
        return Dataset.from_arrays({k: arrays[k] for k in arrays.files})


def task_dataset(task: Task) -> Dataset:
    """The task's current dataset: the one held since the last job of the same task and
    version, or read now (and held, unless it is over ``HELD_DATASET_MAX_BYTES``).
    ``task.current_dataset_id`` was read when the job started: it is the version these arrays
    are and the one the result records, whatever the operator uploads meanwhile."""
    key = _dataset_key(task)
    data = _held.get(key)
    if data is None:
        _held.clear()  # another task's or version's arrays: let go before reading these
        data = _read_dataset(task)
        if data.inputs.nbytes + data.targets.nbytes <= HELD_DATASET_MAX_BYTES:
            _held[key] = data
    return data


def _load(submission: Submission) -> tuple[bytes, Dataset]:
    """The model's bytes and the task's current dataset."""
    with submission.model_file.open("rb") as f:
        model_bytes = f.read()
    return model_bytes, task_dataset(submission.task)


def _evaluate(submission: Submission, name: str) -> EvalResult:
    """Run the model in a model process (``evaluation.sandbox``), then score its predictions
    here: the targets never leave this process, the model never enters it. Where the task's
    device class times in several sessions, each further one is a fresh model process that
    runs one batch and the timing phase; the result's latency is the sessions' median."""
    model_bytes, data = _load(submission)
    device = device_config(name)
    task = submission.task
    spec = task.spec()
    outcome, peak = run_in_process(
        submission,
        model_bytes,
        data.inputs,
        spec,
        device,
        progress=_progress_writer(submission.pk),
        complete_costs=submission.costs_complete is False,
        test_hook=settings.EVAL_SANDBOX_TEST_HOOK or None,
        report=True,
    )
    _refuse_off_gpu(task, outcome.report)
    timings = [outcome.run.timing]
    for _ in range(task.device_class.timing_sessions - 1):
        if sandboxing.stopping():  # the result stands on the sessions timed so far
            break
        batch = data.inputs[: spec.batch_size]
        again, _ = run_in_process(submission, model_bytes, batch, spec, device)
        timings.append(again.run.timing)
    outcome.run.timing = combine_sessions(timings)
    result = score_run(outcome.run, data, spec, device)
    result.timing_exclusive = outcome.run.timing.exclusive
    result.peak_memory_bytes = peak
    if outcome.costs is None and submission.costs_complete is False:
        log.warning("submission %s: costs not completed from a run", submission.pk)
    result.costs = outcome.costs
    result.run_report = {**outcome.report, "log": outcome.engine_log}
    return result


def _refuse_off_gpu(task: Task, report: dict[str, Any]) -> None:
    """The device class's limit on the share of a batch spent in operators placed off the GPU
    (DeviceClass.max_off_gpu_share), from the run report's profile."""
    limit = task.device_class.max_off_gpu_share
    share = report.get("off_main_share")
    if limit is None or report.get("main_provider") != CUDA or not isinstance(share, float):
        return
    if share > limit:
        operators = ", ".join(report.get("off_main_provider") or [])
        raise EvaluationError(
            f"{formats.relative(share)} of a batch ran in operators placed off the GPU "
            f"({operators}): onnxruntime has no CUDA kernel for them. This task's device class "
            f"allows at most {formats.relative(limit)}. Replace those operators, or export them "
            "in a form CUDA runs."
        )


def run_in_process(
    submission: Submission,
    model_bytes: bytes,
    inputs: np.ndarray,
    spec: TaskSpec,
    device: DeviceConfig,
    *,
    progress: Callable[[float], None] = lambda _: None,
    complete_costs: bool = False,
    test_hook: str | None = None,
    report: bool = False,
    device_class: str = "",
) -> tuple[SandboxRun, int | None]:
    """One session of the model in a model process of its own: what it ran and its peak
    memory, read while the process still exists. ``device_class``: the class it is timed on,
    when not its task's (a finalist re-measured elsewhere)."""
    with sandboxing.running_model_process(device) as process:
        measured = Measurement(
            device,
            lock_wait_s=spec.timing.lock_wait_s,
            device_class=device_class or submission.task.device_class_slug,
            pid=process.pid,
            device_before=process.device_before,
        )
        outcome = process.evaluate(
            model_bytes,
            inputs,
            spec,
            device,
            hooks=measured.hooks(),
            progress=progress,
            before_loading=measured.start_peak,
            complete_costs=complete_costs,
            test_hook=test_hook,
            report=report,
        )
        return outcome, measured.peak_memory_bytes()


def evaluate_submission(submission_id: int) -> str:
    try:
        return _evaluate_and_save(submission_id)
    finally:
        sandboxing.reap_stopped()  # the result is saved: now the model processes' exits
        # Whatever this job's outcome (a failure, a skip): the queue's last job refreshes the
        # board for every result still pending, earlier jobs' included.
        _refresh_boards()


def _evaluate_and_save(submission_id: int) -> str:
    name = current_worker_name()
    submission = services.submission_start(submission_id=submission_id, worker_name=name)
    if submission is None:
        return "skipped: not queued"
    try:
        result = _evaluate(submission, name)
    except (ModelProcessDied, *outages.REDIS_ERRORS) as exc:
        # The model's process was killed or crashed, or Redis went away under the run: once
        # more, as the rule for each cause says.
        died = isinstance(exc, ModelProcessDied)
        outcome = services.submission_retry_or_fail(
            submission_id=submission_id,
            cause=services.HORSE_DIED if died else services.QUEUE_LOST,
            worker_name=name,
            detail=exc.why if isinstance(exc, ModelProcessDied) else str(exc),
        )
        log.warning("submission %s: %s; %s", submission_id, exc, outcome)
        return f"{'model process died' if died else 'Redis went away'}: {outcome}"
    except EvaluationError as exc:
        services.submission_fail(
            submission_id=submission_id,
            message=str(exc),
            log_text=f"worker {name}: " + traceback.format_exc(),
            by_system=isinstance(exc, DeviceUnavailable),
            run_report={"log": exc.engine_log} if exc.engine_log else None,
        )
        return "failed"
    except JobTimeoutException:
        # rq's own timeout (the sum of the phases' bounds, services.job_timeout_s): the model
        # kept the worker busy that long, which is the model's doing, not ours, and not retried.
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
    _save(submission, result)
    return "succeeded"


def _save(submission: Submission, result: EvalResult) -> None:
    """The result saved, through a database outage too (``outages.save_patiently``).
    ``submission_succeed`` changes nothing once the row is no longer running (a cancel won)."""
    outages.save_patiently(
        lambda: services.submission_succeed(
            submission_id=submission.pk,
            result=result,
            dataset_version_id=submission.task.current_dataset_id,
            drain=False,  # refreshed at the job's end, with whatever else is pending
        ),
        what=f"the result of submission {submission.pk}",
    )


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
