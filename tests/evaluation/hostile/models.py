"""Builders for the hostile-model corpus: each returns the bytes of one bad ONNX file."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.builders import finish, linear_classifier

# --- building blocks ----------------------------------------------------------------------------


def good_model(batch: int | str = "batch") -> bytes:
    rng = np.random.default_rng(0)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10), batch=batch)


def _io(
    elem: int = TensorProto.FLOAT, out_shape: list[int | str] | None = None
) -> tuple[onnx.ValueInfoProto, onnx.ValueInfoProto]:
    x = helper.make_tensor_value_info("input", elem, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape or ["batch", 10])
    return x, y


def _graph_model(
    nodes: list[onnx.NodeProto], init: list[TensorProto] | None = None, **io: object
) -> bytes:
    x, y = _io(**io)  # type: ignore[arg-type]
    return finish(helper.make_graph(nodes, "hostile", [x], [y], init or []))


def _tensor(values: object, name: str, dtype: type = np.float32) -> TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def _external(location: str, name: str = "W") -> TensorProto:
    tensor = _tensor(np.zeros((64, 10)), name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


def with_external(location: str) -> bytes:
    model = onnx.load_from_string(good_model())
    model.graph.initializer[0].CopyFrom(_external(location))
    return model.SerializeToString()


def external_in_subgraph() -> bytes:
    out = helper.make_tensor_value_info("c", TensorProto.FLOAT, [64, 10])
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=_external("inner.bin"))], "b", [], [out]
    )
    return _graph_model(
        [
            helper.make_node("Constant", [], ["cond"], value=_tensor(True, "t", np.bool_)),
            helper.make_node("If", ["cond"], ["W"], then_branch=branch, else_branch=branch),
            helper.make_node("Flatten", ["input"], ["flat"]),
            helper.make_node("MatMul", ["flat", "W"], ["output"]),
        ]
    )


def external_in_function() -> bytes:
    function = helper.make_function(
        "local.fn",
        "Weights",
        [],
        ["w"],
        [helper.make_node("Constant", [], ["w"], value=_external("/proc/self/environ"))],
        [helper.make_opsetid("", 17)],
    )
    x, y = _io()
    graph = helper.make_graph(
        [
            helper.make_node("Weights", [], ["W"], domain="local.fn"),
            helper.make_node("Flatten", ["input"], ["flat"]),
            helper.make_node("MatMul", ["flat", "W"], ["output"]),
        ],
        "fn",
        [x],
        [y],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local.fn", 1)],
        functions=[function],
    )
    model.ir_version = 9
    return model.SerializeToString()


def custom_domain() -> bytes:
    x, y = _io()
    node = helper.make_node("Evil", ["input"], ["output"], domain="com.example")
    return finish(helper.make_graph([node], "g", [x], [y]), opsets=[("", 17), ("com.example", 1)])


def undeclared_domain_node() -> bytes:
    model = onnx.load_from_string(good_model())
    model.graph.node[0].domain = "org.pwn"
    return model.SerializeToString()


def two_inputs() -> bytes:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 1, 8, 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1, 8, 8])
    return finish(
        helper.make_graph([helper.make_node("Add", ["a", "b"], ["output"])], "g", [a, b], [y])
    )


def no_inputs() -> bytes:
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [16, 10])
    const = helper.make_node("Constant", [], ["output"], value=_tensor(np.zeros((16, 10)), "c"))
    return finish(helper.make_graph([const], "g", [], [y]))


def no_outputs() -> bytes:
    model = onnx.load_from_string(good_model())
    del model.graph.output[:]
    return model.SerializeToString()


def sequence_input() -> bytes:
    model = onnx.load_from_string(good_model())
    seq = helper.make_tensor_sequence_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    model.graph.input[0].CopyFrom(seq)
    return model.SerializeToString()


def declared_output_shape(dim: int) -> bytes:
    model = onnx.load_from_string(good_model())
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = dim
    return model.SerializeToString()


def oversize() -> bytes:
    # 80,000 float32 weights (320 kB) that the graph never uses: over the 200 kB limit.
    model = onnx.load_from_string(good_model())
    model.graph.initializer.append(_tensor(np.ones(80_000), "padding"))
    return model.SerializeToString()


def versions(ir_version: int | None = None, opset: int | None = None) -> bytes:
    model = onnx.load_from_string(good_model())
    if ir_version is not None:
        model.ir_version = ir_version
    if opset is not None:
        model.opset_import[0].version = opset
    return model.SerializeToString()


def no_graph() -> bytes:
    model = onnx.ModelProto()
    model.ir_version = 9
    model.producer_name = "not really"
    return model.SerializeToString()


# --- accepted at upload, stopped by the worker ------------------------------------------------


def _linear(bias: np.ndarray, out: str = "output") -> list[onnx.NodeProto]:
    return [
        helper.make_node("Flatten", ["input"], ["flat"]),
        helper.make_node("MatMul", ["flat", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], [out]),
    ]


def bias_model(bias: np.ndarray) -> bytes:
    init = [_tensor(np.zeros((64, 10)), "W"), _tensor(bias, "b")]
    return _graph_model(_linear(bias), init)


def batch_reduced() -> bytes:
    # Sums over the batch: output [1, 10] whatever the batch, declared with a symbolic batch.
    init = [
        _tensor(np.zeros((64, 10)), "W"),
        _tensor(np.zeros(10), "b"),
        _tensor([0], "ax", np.int64),
    ]
    nodes = [
        *_linear(np.zeros(10), "logits"),
        helper.make_node("ReduceSum", ["logits", "ax"], ["output"]),
    ]
    return _graph_model(nodes, init)


def cast_output(to: int) -> bytes:
    init = [_tensor(np.zeros((64, 10)), "W"), _tensor(np.zeros(10), "b")]
    nodes = [
        *_linear(np.zeros(10), "logits"),
        helper.make_node("Cast", ["logits"], ["output"], to=to),
    ]
    x, _ = _io()
    y = helper.make_tensor_value_info("output", to, ["batch", 10])
    return finish(helper.make_graph(nodes, "cast", [x], [y], init))


def endless_loop() -> bytes:
    """A Loop with trip count int64 max and a condition that stays true: it never returns."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, ["batch", 10]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, ["batch", 10]),
        ],
        [_tensor(1.0, "one")],
    )
    init = [
        _tensor(np.iinfo(np.int64).max, "max", np.int64),
        _tensor(True, "true", np.bool_),
        _tensor(np.zeros((64, 10)), "W"),
    ]
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"]),
        helper.make_node("MatMul", ["flat", "W"], ["start"]),
        helper.make_node("Loop", ["max", "true", "start"], ["output"], body=body),
    ]
    return _graph_model(nodes, init)


def _to_logits(big: str, axes: list[int]) -> tuple[list[onnx.NodeProto], list[TensorProto]]:
    """Reduce the huge tensor ``big`` to [16, 8, 8] and map it to [16, 10] logits."""
    nodes = [
        helper.make_node("ReduceSum", [big, "axes"], ["small"], keepdims=0),
        helper.make_node("Flatten", ["small"], ["flat"]),
        helper.make_node("MatMul", ["flat", "W"], ["output"]),
    ]
    return nodes, [_tensor(axes, "axes", np.int64), _tensor(np.zeros((64, 10)), "W")]


def expand_bomb() -> bytes:
    """Expand the [16, 1, 8, 8] input to [400, 16, 1000, 8, 8] float32: 1.6 GB from 4 kB."""
    tail, init = _to_logits("big", [0, 2])
    nodes = [helper.make_node("Expand", ["input", "shape"], ["big"]), *tail]
    return _graph_model(nodes, [_tensor([400, 16, 1000, 8, 8], "shape", np.int64), *init])


def constant_of_shape_bomb() -> bytes:
    """ConstantOfShape [16, 1000, 8, 8, 400] float32 (1.6 GB), added to the input's features."""
    tail, init = _to_logits("big", [1, 4])
    fill = _tensor([1.0], "fill")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=fill),
        helper.make_node("Reshape", ["input", "in_shape"], ["x5"]),
        helper.make_node("Add", ["ones", "x5"], ["big"]),
        *tail,
    ]
    extra = [
        _tensor([16, 1000, 8, 8, 400], "shape", np.int64),
        _tensor([16, 1, 8, 8, 1], "in_shape", np.int64),
    ]
    return _graph_model(nodes, [*extra, *init])


def gemm_on_3d() -> bytes:
    # Passes inspection (one input of the right shape) but Gemm takes 2-D inputs only.
    return _graph_model(
        [helper.make_node("Gemm", ["input", "W"], ["output"])], [_tensor(np.zeros((3, 3, 3)), "W")]
    )


def unknown_operator() -> bytes:
    return _graph_model([helper.make_node("NoSuchOperator", ["input"], ["output"])])


def bad_reshape() -> bytes:
    # Reshape [16, 1, 8, 8] (1,024 values) to [16, 7]: fails while running, not at load.
    nodes = [helper.make_node("Reshape", ["input", "shape"], ["output"])]
    shape = helper.make_node("Concat", ["n", "seven"], ["shape"], axis=0)
    nodes.insert(0, shape)
    nodes.insert(0, helper.make_node("Shape", ["input"], ["n"], start=0, end=1))
    return _graph_model(nodes, [_tensor([7], "seven", np.int64)])
