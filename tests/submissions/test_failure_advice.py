"""The "What to do" advice under a failed submission agrees with the rules that refused it."""

from __future__ import annotations

from typing import Any

import pytest

from evaluation.inspect import runtime_limits
from submissions.boards.display import failure_advice
from submissions.models import Submission

pytestmark = pytest.mark.django_db


def failed(user: Any, task: Any, message: str) -> Submission:
    return Submission.objects.create(
        user=user,
        task=task,
        sha256="0" * 64,
        size_bytes=1,
        original_name="m.onnx",
        status=Submission.Status.FAILED,
        error_message=message,
    )


def test_the_load_advice_names_the_opset_and_ir_version_the_upload_check_accepts(
    alice: Any, make_task: Any
) -> None:
    max_ir, max_opset = runtime_limits()
    submission = failed(alice, make_task(), "onnxruntime could not load the model: bad node")

    advice = failure_advice(submission)

    assert f"opset ≤ {max_opset}" in advice and f"IR version ≤ {max_ir}" in advice
