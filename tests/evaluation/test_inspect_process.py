"""Inspection in a child process: the same verdict as in the caller, word for word, and the
model's memory is the child's, not the caller's."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper, numpy_helper

from evaluation.inspect import ModelInfo, ModelRejected, inspect_model
from evaluation.inspect_process import inspect_out_of_process
from tests.builders import (
    DIGITS_SPEC,
    data_dependent_matmul,
    finish,
    linear_classifier,
    unary_model,
)

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    return path


def good_model(batch: int | str = "batch") -> bytes:
    rng = np.random.default_rng(0)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10), batch=batch)


def with_external_data() -> bytes:
    model = onnx.load_from_string(good_model())
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../../etc/passwd"
    return model.SerializeToString()


def costs_with_an_uncounted_node() -> bytes:
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["mm"]),
        helper.make_node("TopK", ["mm", "k"], ["output", "indices"]),
    ]
    init = [
        numpy_helper.from_array(np.ones((64, 10), np.float32), "W"),
        numpy_helper.from_array(np.array([10], np.int64), "k"),
    ]
    return finish(helper.make_graph(nodes, "topk", [x], [y], init))


@pytest.mark.parametrize(
    "data",
    [good_model(), good_model(batch=16), data_dependent_matmul(), costs_with_an_uncounted_node()],
    ids=["symbolic-batch", "fixed-batch", "data-dependent", "uncounted-node"],
)
def test_an_accepted_model_gets_the_same_info_costs_and_shapes_out_of_process(
    tmp_path: Path, data: bytes
) -> None:
    path = write(tmp_path, data)
    found = inspect_out_of_process(path, DIGITS_SPEC)
    assert isinstance(found, ModelInfo)
    assert found == inspect_model(path, DIGITS_SPEC)
    assert found.costs is not None and found.costs.macs > 0


REFUSED = {
    "empty": (b"", DIGITS_SPEC),
    "garbage": (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, DIGITS_SPEC),
    "truncated": (good_model()[:300], DIGITS_SPEC),
    "too-big": (good_model(), replace(DIGITS_SPEC, max_model_bytes=100)),
    "external-data": (with_external_data(), DIGITS_SPEC),
    "wrong-batch": (good_model(batch=3), DIGITS_SPEC),
    "wrong-dtype": (unary_model("Relu", ["b", 1, 8, 8], elem=TensorProto.DOUBLE), DIGITS_SPEC),
    "custom-domain": (
        finish(
            helper.make_graph(
                [helper.make_node("Magic", ["input"], ["output"], domain="evil.ops")],
                "g",
                [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["b", 1, 8, 8])],
                [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["b", 10])],
            ),
            opsets=[("", 17), ("evil.ops", 1)],
        ),
        DIGITS_SPEC,
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_refused_model_gets_the_same_message_out_of_process(tmp_path: Path, name: str) -> None:
    data, spec = REFUSED[name]
    path = write(tmp_path, data)
    with pytest.raises(ModelRejected) as in_caller:
        inspect_model(path, spec)
    with pytest.raises(ModelRejected) as in_child:
        inspect_out_of_process(path, spec)
    assert str(in_child.value) == str(in_caller.value)


def test_an_inspection_past_its_time_limit_is_refused_and_its_process_is_gone(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, good_model())
    with pytest.raises(ModelRejected, match="could not be inspected within 0 s"):
        inspect_out_of_process(path, DIGITS_SPEC, timeout_s=0.001)
    leftover = subprocess.run(
        ["pgrep", "-f", f"evaluation.inspect_process {path}"], capture_output=True, check=False
    )
    assert leftover.stdout == b""


# A caller that has loaded nothing else: its peak memory before and after tells what the
# inspection cost it.
CALLER = """
import json, resource, sys
from pathlib import Path
from evaluation.inspect_process import inspect_out_of_process
from evaluation.spec import TaskSpec
fields = json.loads(sys.argv[2])
spec = TaskSpec(**{**fields, "input_shape": tuple(fields["input_shape"]),
                   "output_shape": tuple(fields["output_shape"])})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
info = inspect_out_of_process(Path(sys.argv[1]), spec)
print(json.dumps({
    "self_growth_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
    "child_peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    "parameters": info.costs.parameters,
}))
"""


def test_the_model_is_held_in_memory_by_the_child_not_by_the_caller(tmp_path: Path) -> None:
    """A fresh caller inspects a 64 MiB model: its own peak memory barely moves, the child's
    holds the model."""
    weights = np.ones((64 * 1024 * 1024 // 4 // 10, 10), np.float32)
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", weights.shape[0]])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input", "W"], ["output"])],
        "big",
        [x],
        [y],
        [numpy_helper.from_array(weights, "W")],
    )
    path = write(tmp_path, finish(graph))
    fields = {
        "batch_size": 16,
        "input_shape": [weights.shape[0]],
        "input_dtype": "float32",
        "output_shape": [10],
        "metric": "accuracy",
        "max_model_bytes": 1 << 30,
        "time_limit_s": 60,
    }
    run = subprocess.run(
        [sys.executable, "-c", CALLER, str(path), json.dumps(fields)],
        capture_output=True,
        cwd=ROOT,
        check=True,
    )
    measured = json.loads(run.stdout)
    assert measured["parameters"] == weights.size  # accepted, and its costs counted
    model_kib = path.stat().st_size // 1024
    assert measured["child_peak_kib"] > model_kib
    assert measured["self_growth_kib"] < model_kib // 4


def test_an_inspection_killed_from_outside_is_refused_saying_so(tmp_path: Path) -> None:
    """As the kernel's OOM killer would end it: the upload is refused, the web process lives."""
    path = write(tmp_path, good_model())
    outcome: list[BaseException] = []

    def inspect() -> None:
        try:
            inspect_out_of_process(path, DIGITS_SPEC)
        except BaseException as exc:  # the outcome is what the test reads
            outcome.append(exc)

    inspecting = threading.Thread(target=inspect)
    inspecting.start()
    deadline = time.monotonic() + 30
    killed = False
    while not killed and time.monotonic() < deadline:
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error):
                if str(path) in child.cmdline():
                    child.send_signal(signal.SIGKILL)
                    killed = True
        time.sleep(0.005)
    inspecting.join(30)
    assert killed, "the inspection process was never seen"
    assert len(outcome) == 1 and isinstance(outcome[0], ModelRejected), outcome
    assert str(outcome[0]).startswith("The model could not be inspected: the inspection ended")
    assert "SIGKILL" in str(outcome[0])
