"""The participant's run report (evaluation/run_report.py): made in the model's process by real
workers on real ONNX models, shown to its submitter alone. On this machine the models run on
the CPU; what a CUDA run reports (nodes placed off the GPU) is checked on a profile of the shape
onnxruntime writes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client
from onnx import TensorProto, helper, numpy_helper
from rest_framework.test import APIClient

from evaluation.run_report import engine_lines, summarise_profile
from submissions.models import Submission
from tests.builders import finish
from tests.workers.fleet_support import fast_model, submit

pytestmark = pytest.mark.django_db(transaction=True)


def failing_reshape() -> bytes:
    """Loads, then fails on its first run: 64 values of a row cannot be reshaped to 7 by 9."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    shape = numpy_helper.from_array(np.array([-1, 7, 9], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["input", "shape"], ["output"], name="bad_reshape")]
    return finish(helper.make_graph(nodes, "bad", [x], [y], [shape]))


def test_the_submitter_sees_each_operators_time_and_provider_and_nobody_else_does(
    alice: Any, bob: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    submission = submit(alice, make_task(), fast_model())

    run_worker()

    s = Submission.objects.get(pk=submission.pk)
    report = s.run_report
    assert s.status == "succeeded", s.error_message
    assert report["main_provider"] == "CPUExecutionProvider"
    assert sum(report["providers"].values()) >= 2 and set(report["providers"]) == {
        "CPUExecutionProvider"
    }
    assert report["off_main_provider"] == []
    ops = {row["op"] for row in report["operators"]}
    assert ops and ops <= {"MatMul", "Add", "Gemm", "Flatten", "Reshape", "Softmax"}, ops
    assert sum(row["share"] for row in report["operators"]) == pytest.approx(1.0, abs=0.01)
    assert report["batch_us"] > 0 and report["host_time_only"] is False

    owner = Client()
    owner.force_login(alice)
    page = owner.get(f"/submissions/{s.pk}/").content.decode()
    assert "Run report" in page and "data-profile" in page
    api = APIClient()
    api.force_authenticate(alice)
    assert api.get(f"/api/submissions/{s.pk}/").json()["run_report"] == report
    other = Client()
    other.force_login(bob)
    assert other.get(f"/submissions/{s.pk}/").status_code == 404
    api.force_authenticate(bob)
    assert api.get(f"/api/submissions/{s.pk}/").status_code == 404


def test_a_failed_run_keeps_onnxruntimes_own_lines_about_the_model_and_no_paths(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    submission = submit(alice, make_task(), failing_reshape())

    run_worker()

    s = Submission.objects.get(pk=submission.pk)
    assert s.status == "failed"
    lines = s.run_report["log"]
    assert any(line["level"] == "error" and "bad_reshape" in line["text"] for line in lines), lines
    assert not any("/" + "work" in line["text"] or "/tmp" in line["text"] for line in lines)
    owner = Client()
    owner.force_login(alice)
    assert "data-engine-log" in owner.get(f"/submissions/{s.pk}/").content.decode()


def test_engine_lines_keep_onnxruntimes_lines_with_every_path_cut_to_its_last_part() -> None:
    text = (
        "some library's print\n"
        "2026-11-28 05:51:20.1 [W:onnxruntime:Default, session_state.cc:1166 Verify] Some nodes "
        "were not assigned; see /srv/portal/var/worker-a/model-1/x.onnx\n"
        "\x1b[1;31m2026-11-28 05:51:20.2 [E:onnxruntime:, provider_bridge.cc:1 Load] "
        "/tmp/site/onnxruntime/capi/libonnxruntime_providers_cuda.so: cannot open\x1b[m\n"
    )
    assert engine_lines(text) == [
        {"level": "warning", "text": "Some nodes were not assigned; see x.onnx"},
        {"level": "error", "text": "libonnxruntime_providers_cuda.so: cannot open"},
    ]


def test_a_cuda_run_names_the_operators_placed_off_the_gpu_but_not_the_copies() -> None:
    def node(name: str, op: str, provider: str, ts: int, dur: int) -> dict[str, Any]:
        return {
            "cat": "Node",
            "name": f"{name}_kernel_time",
            "ts": ts,
            "dur": dur,
            "args": {"op_name": op, "provider": provider},
        }

    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
        node("old", "Conv", "CUDAExecutionProvider", 50, 9),  # the warm-up run: left out
        {"cat": "Session", "name": "model_run", "ts": 1000, "dur": 100},
        node("conv", "Conv", "CUDAExecutionProvider", 1001, 30),
        node("shape", "Shape", "CPUExecutionProvider", 1040, 5),
        node("copy", "MemcpyToHost", "CUDAExecutionProvider", 1050, 10),
        node("nms", "NonMaxSuppression", "CPUExecutionProvider", 1060, 15),
    ]

    report = summarise_profile(events, "CUDAExecutionProvider")

    assert report["providers"] == {"CUDAExecutionProvider": 2, "CPUExecutionProvider": 2}
    assert report["off_main_provider"] == ["NonMaxSuppression", "Shape"]
    assert [row["op"] for row in report["operators"]][:2] == ["Conv", "NonMaxSuppression"]
    assert report["batch_us"] == 60.0
    assert report["off_main_share"] == pytest.approx(20 / 60, abs=1e-4)  # copies not counted


def test_a_gpu_class_can_refuse_models_that_spend_a_batch_off_the_gpu(make_task: Any) -> None:
    from evaluation.runner import EvaluationError
    from workers.jobs import _refuse_off_gpu

    task = make_task()
    report = {
        "main_provider": "CUDAExecutionProvider",
        "off_main_provider": ["NonMaxSuppression", "Shape"],
        "off_main_share": 0.1875,
    }
    _refuse_off_gpu(task, report)  # no limit: reported, not refused
    task.device_class.max_off_gpu_share = 0.1
    task.device_class.save()
    with pytest.raises(EvaluationError) as refused:
        _refuse_off_gpu(task, report)
    assert str(refused.value).startswith(
        "18.8 % of a batch ran in operators placed off the GPU (NonMaxSuppression, Shape)"
    )
    _refuse_off_gpu(task, {**report, "off_main_share": 0.002})  # shape work alone: allowed
    _refuse_off_gpu(task, {**report, "main_provider": "CPUExecutionProvider"})  # a CPU run
