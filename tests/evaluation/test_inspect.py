"""Upload inspection: every refusal has its own message naming the problem."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from evaluation.inspect import ModelRejected, inspect_model, runtime_limits
from evaluation.spec import TaskSpec
from tests.builders import DIGITS_SPEC, IR_VERSION, finish, linear_classifier, unary_model

SPEC = DIGITS_SPEC


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    return path


def refusal(tmp_path: Path, data: bytes, spec: TaskSpec = SPEC) -> str:
    with pytest.raises(ModelRejected) as caught:
        inspect_model(write(tmp_path, data), spec)
    return str(caught.value)


def good_model(batch: int | str = "batch") -> bytes:
    return linear_classifier(np.zeros((64, 10)), np.zeros(10), batch=batch)


def test_good_model_with_symbolic_batch_is_accepted(tmp_path: Path) -> None:
    info = inspect_model(write(tmp_path, good_model()), SPEC)
    assert info.input_name == "input"
    assert info.input_shape == ["batch", 1, 8, 8]
    assert info.input_dtype == "float32"
    assert info.output_names == ["output"]
    assert info.opset == 17


def test_good_model_with_matching_fixed_batch_is_accepted(tmp_path: Path) -> None:
    assert inspect_model(write(tmp_path, good_model(batch=16)), SPEC).input_shape[0] == 16


def test_empty_file_is_refused(tmp_path: Path) -> None:
    assert refusal(tmp_path, b"") == "The file is empty."


def test_garbage_bytes_are_refused_as_not_onnx(tmp_path: Path) -> None:
    assert "not an ONNX model" in refusal(tmp_path, b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)


def test_truncated_model_is_refused_as_not_onnx(tmp_path: Path) -> None:
    data = good_model()
    assert "not an ONNX model" in refusal(tmp_path, data[: len(data) // 2])


def test_model_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    spec = replace(SPEC, max_model_bytes=100)
    message = refusal(tmp_path, good_model(), spec)
    assert message.startswith("The model is 0 MiB (")
    assert "bytes); this task accepts models up to 0 MiB." in message


def _external_initializer(location: str) -> TensorProto:
    tensor = numpy_helper.from_array(np.zeros((64, 10), np.float32), "W")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


@pytest.mark.parametrize("location", ["weights.bin", "../../etc/passwd", "/etc/shadow"])
def test_external_data_is_refused(tmp_path: Path, location: str) -> None:
    model = onnx.load_from_string(good_model())
    model.graph.initializer[0].CopyFrom(_external_initializer(location))
    message = refusal(tmp_path, model.SerializeToString())
    assert f"stores tensor 'W' as external data ('{location}')" in message


def test_external_data_inside_a_subgraph_is_refused(tmp_path: Path) -> None:
    branch_out = helper.make_tensor_value_info("c", TensorProto.FLOAT, [64, 10])
    const = helper.make_node("Constant", [], ["c"], value=_external_initializer("inner.bin"))
    branch = helper.make_graph([const], "branch", [], [branch_out])
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    nodes = [
        helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["cond"], ["W"], then_branch=branch, else_branch=branch),
        helper.make_node("Flatten", ["input"], ["flat"]),
        helper.make_node("MatMul", ["flat", "W"], ["output"]),
    ]
    message = refusal(tmp_path, finish(helper.make_graph(nodes, "g", [x], [y])))
    assert "as external data ('inner.bin')" in message


def test_custom_operator_domain_is_refused(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    node = helper.make_node("Evil", ["input"], ["output"], domain="com.example")
    data = finish(helper.make_graph([node], "g", [x], [y]), opsets=[("", 17), ("com.example", 1)])
    assert "operator domain 'com.example'" in refusal(tmp_path, data)


def test_custom_domain_node_without_opset_import_is_refused(tmp_path: Path) -> None:
    model = onnx.load_from_string(good_model())
    model.graph.node[0].domain = "org.pwn"
    assert "Operator 'Flatten' is from domain 'org.pwn'" in refusal(
        tmp_path, model.SerializeToString()
    )


def test_two_inputs_are_refused(tmp_path: Path) -> None:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 1, 8, 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1, 8, 8])
    data = finish(
        helper.make_graph([helper.make_node("Add", ["a", "b"], ["output"])], "g", [a, b], [y])
    )
    assert refusal(tmp_path, data) == (
        "The model has 2 inputs ('a', 'b'); "
        "this task feeds exactly one input of shape [16, 1, 8, 8]."
    )


def test_no_outputs_is_refused(tmp_path: Path) -> None:
    model = onnx.load_from_string(good_model())
    del model.graph.output[:]
    assert refusal(tmp_path, model.SerializeToString()) == "The model has no outputs."


def test_wrong_rank_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path, unary_model("Relu", ["batch", 64], ["batch", 10]))
    assert message.startswith("The model's input 'input' has shape [batch, 64], which cannot take")
    assert "[16, 1, 8, 8]" in message


def test_wrong_fixed_batch_dimension_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path, good_model(batch=1))
    assert (
        "has shape [1, 1, 8, 8], which cannot take this task's fixed batch shape [16, 1, 8, 8]"
        in message
    )


def test_wrong_fixed_sample_dimension_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path, unary_model("Relu", ["batch", 3, 8, 8]))
    assert "has shape [batch, 3, 8, 8]" in message


def test_wrong_input_dtype_is_refused(tmp_path: Path) -> None:
    data = unary_model("Identity", ["batch", 1, 8, 8], elem=TensorProto.DOUBLE)
    assert (
        refusal(tmp_path, data)
        == "The model's input 'input' has type float64; this task feeds float32."
    )


def test_string_input_is_refused(tmp_path: Path) -> None:
    data = unary_model("Identity", ["batch", 1, 8, 8], elem=TensorProto.STRING)
    assert "has type string; this task feeds float32" in refusal(tmp_path, data)


def test_output_with_conflicting_fixed_shape_is_refused(tmp_path: Path) -> None:
    model = onnx.load_from_string(good_model())
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 7
    message = refusal(tmp_path, model.SerializeToString())
    assert message.startswith(
        "The model's output 'output' has shape [batch, 7], which cannot give this task's "
        "output shape [16, 10] "
    )
    assert "batch shape" not in message  # that is the input's; this refusal is about the output


def test_initializers_listed_as_graph_inputs_do_not_count_as_inputs(tmp_path: Path) -> None:
    model = onnx.load_from_string(good_model())
    model.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [64, 10]))
    model.ir_version = IR_VERSION
    assert inspect_model(write(tmp_path, model.SerializeToString()), SPEC).input_name == "input"


def test_ir_version_newer_than_onnxruntime_loads_is_refused_at_upload(tmp_path: Path) -> None:
    max_ir, _ = runtime_limits()
    model = onnx.load_from_string(good_model())
    model.ir_version = max_ir + 1
    assert refusal(tmp_path, model.SerializeToString()) == (
        f"The model has ONNX IR version {max_ir + 1}; onnxruntime {ort.__version__} on our workers "
        f"loads IR versions up to {max_ir}. Set model.ir_version = {max_ir} before onnx.save (or "
        "export with an older onnx package)."
    )


def test_ir_14_written_by_default_by_onnx_1_23_is_refused_by_onnxruntime_1_31() -> None:
    # The case that motivated the check; the probe must agree with onnxruntime's own refusal.
    if not ort.__version__.startswith("1.31."):
        pytest.skip("statement about onnxruntime 1.31")
    assert runtime_limits()[0] == 13


def test_newest_supported_ir_version_is_accepted(tmp_path: Path) -> None:
    model = onnx.load_from_string(good_model())
    model.ir_version = runtime_limits()[0]
    assert (
        inspect_model(write(tmp_path, model.SerializeToString()), SPEC).ir_version
        == (runtime_limits()[0])
    )


def test_opset_newer_than_onnxruntime_supports_is_refused_at_upload(tmp_path: Path) -> None:
    _, max_opset = runtime_limits()
    model = onnx.load_from_string(good_model())
    model.opset_import[0].version = max_opset + 1
    assert refusal(tmp_path, model.SerializeToString()) == (
        f"The model imports opset {max_opset + 1} of the default ONNX domain; onnxruntime "
        f"{ort.__version__} on our workers supports opsets up to {max_opset}. Export with "
        f"opset_version={max_opset} or lower."
    )


def test_a_local_function_name_that_is_not_utf8_is_refused_not_a_crash(tmp_path: Path) -> None:
    model = onnx.load_from_string(good_model())
    function = helper.make_function("local", "NAMEMARK", ["x"], ["y"], [], [], [])
    model.functions.append(function)
    data = model.SerializeToString().replace(b"NAMEMARK", b"NAME\xff\xfeRK")

    message = refusal(tmp_path, data)

    assert message.startswith("The model is damaged: a name or text field is not valid UTF-8")
