"""rq jobs: thin wrappers that load rows, call the pure runner, and save through services.

Runs in the work horse (a fresh fork per job), which is the only process that creates CUDA
sessions.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable

import numpy as np
from rq import get_current_job

from evaluation.device import device_config, worker_name
from evaluation.limits import added_memory_limit
from evaluation.runner import Dataset, EvaluationError, evaluate
from submissions import services
from submissions.models import Submission

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 0.5


def _progress_writer(submission_id: int) -> Callable[[float], None]:
    # At most one UPDATE per interval, the first after one interval too, and none at the end
    # (submission_succeed sets 1.0): a model scored in milliseconds costs no progress write,
    # which matters for the throughput of many small submissions.
    last = [time.monotonic()]

    def write(fraction: float) -> None:
        now = time.monotonic()
        if fraction < 1.0 and now - last[0] >= PROGRESS_INTERVAL_S:
            last[0] = now
            services.submission_set_progress(submission_id=submission_id, progress=fraction)

    return write


def _worker_name() -> str:
    job = get_current_job()
    return (job.worker_name if job is not None and job.worker_name else None) or worker_name()


def _load(submission: Submission) -> tuple[bytes, Dataset]:
    with submission.model_file.open("rb") as f:
        model_bytes = f.read()
    with np.load(services.task_dataset_path(submission.task), allow_pickle=False) as arrays:
        data = Dataset.from_arrays({k: arrays[k] for k in arrays.files})
    return model_bytes, data


def evaluate_submission(submission_id: int) -> str:
    name = _worker_name()
    submission = services.submission_start(submission_id=submission_id, worker_name=name)
    if submission is None:
        return "skipped: not queued"
    try:
        model_bytes, data = _load(submission)
        device = device_config(name)
        # Bounded after loading: the task's dataset is the operator's, the rest is the model's.
        with added_memory_limit(device.cpu_memory_limit_bytes):
            result = evaluate(
                model_bytes,
                data,
                submission.task.spec(),
                device,
                progress=_progress_writer(submission_id),
            )
    except EvaluationError as exc:
        services.submission_fail(
            submission_id=submission_id, message=str(exc), log_text=traceback.format_exc()
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
    services.submission_succeed(submission_id=submission_id, result=result)
    return "succeeded"
