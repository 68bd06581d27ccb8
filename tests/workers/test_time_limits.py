"""Time limits outside the watchdog's reach: session creation, and rq's own job timeout.

The watchdog stops InferenceSession.run through RunOptions.terminate; nothing stops
onnxruntime while it creates and optimises a session. There the model process is ended at the
task's own limit and the submission fails like any model over its limit: once, no retry.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from submissions.models import Submission
from tests.builders import finish
from tests.workers.fleet_support import slow_classifier, submit
from workers.jobs import evaluate_submission

pytestmark = pytest.mark.django_db(transaction=True)


def slow_to_load(matmuls: int, side: int = 3000) -> bytes:
    """A tiny file that onnxruntime spends minutes optimising: constant folding computes a chain
    of ``matmuls`` products of [side, side] constants built by ConstantOfShape (54 GFLOP each,
    about 0.7 s on one core), before the session exists. Each folded product stays in memory
    (36 MB), so without the deadline the 4 GB memory limit would end it after a minute or so,
    with the wrong message. Its output is a linear classifier's."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [1e-3])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c0"], value=fill)]
    nodes += [helper.make_node("MatMul", [f"c{i}", "c0"], [f"c{i + 1}"]) for i in range(matmuls)]
    nodes += [
        helper.make_node("ReduceSum", [f"c{matmuls}"], ["folded"], keepdims=0),
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["logits"]),
        helper.make_node("Add", ["logits", "folded"], ["output"]),
    ]
    init = [
        numpy_helper.from_array(np.array([side, side], dtype=np.int64), "shape"),
        numpy_helper.from_array(np.eye(64, 10, dtype=np.float32), "W"),
    ]
    return finish(helper.make_graph(nodes, "slow_to_load", [x], [y], init))


def test_a_model_that_hangs_while_its_session_is_created_fails_at_the_tasks_limit(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    submission = submit(alice, make_task(time_limit_s=2), slow_to_load(matmuls=2000))

    run_worker()  # a real worker: its model process is ended at 2 s, not at the job timeout

    failed = Submission.objects.get(pk=submission.pk)
    assert failed.status == "failed", failed.log
    assert failed.error_message == (
        "time limit of 2 s exceeded while onnxruntime was loading and optimising the model"
    )
    assert failed.attempts == 1 and queue.count == 0  # not retried: it would hang again
    assert not failed.failed_by_system  # the model's doing: it counts like any slow model
    assert (failed.finished_at - failed.started_at).total_seconds() < 30


def test_rqs_own_job_timeout_is_a_time_limit_failure_not_an_error_on_our_side(
    alice: Any, make_task: Any, queue: Any
) -> None:
    """rq raises JobTimeoutException in the worker once the job's timeout passes (SIGALRM, seen
    when the run is back in Python between batches). Here rq's own death penalty, shortened."""
    submission = submit(alice, make_task(time_limit_s=60), slow_classifier(300_000))

    with UnixSignalDeathPenalty(1, JobTimeoutException):
        outcome = evaluate_submission(submission.pk)

    failed = Submission.objects.get(pk=submission.pk)
    assert outcome == "failed" and failed.status == "failed"
    assert failed.error_message.startswith("time limit of 60 s exceeded")
    assert "error on our side" not in failed.error_message
    assert not failed.failed_by_system
    assert "JobTimeoutException" in failed.log
