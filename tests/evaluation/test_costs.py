"""Static costs of built models equal their hand counts (conventions: evaluation/costs.py)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from evaluation import costs as costs_module
from evaluation.costs import CostsUnavailable, StaticCosts, static_costs
from evaluation.inspect import ModelRejected, inspect_model
from submissions.demo import baselines
from submissions.demo.datasets import build_depth_dataset, load_digits_train
from tests.builders import DIGITS_SPEC, IR_VERSION, OPSET
from tests.evaluation.hostile.corpus import build_corpus


def weight(name: str, *shape: int) -> TensorProto:
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 100
    return numpy_helper.from_array(values, name)


def build(
    nodes: list[onnx.NodeProto],
    input_shape: Sequence[int | str],
    outputs: Sequence[str] = ("output",),
    initializers: Sequence[TensorProto] = (),
) -> onnx.ModelProto:
    """One float input "input" (leave the batch symbolic) and outputs with no declared shape."""
    graph = helper.make_graph(
        nodes,
        "costs",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def counted(
    parameters: int, macs: int, flops: int, activations: int, **rest: object
) -> StaticCosts:
    return StaticCosts(
        parameters=parameters,
        macs=macs,
        flops=flops,
        activations=activations,
        not_counted=rest.get("not_counted", ()),  # type: ignore[arg-type]
        unknown_shapes=rest.get("unknown_shapes", 0),  # type: ignore[arg-type]
    )


def test_conv_with_bias_stride_padding_and_groups() -> None:
    # X (2, 4, 9, 9), W (6, 4/2, 3, 3), stride 2, pad 1 → Y (2, 6, 5, 5): 300 elements.
    conv = helper.make_node(
        "Conv", ["input", "W", "B"], ["output"], strides=[2, 2], pads=[1, 1, 1, 1], group=2
    )
    model = build(
        [conv], ["batch", 4, 9, 9], initializers=[weight("W", 6, 2, 3, 3), weight("B", 6)]
    )
    macs = 300 * 2 * 3 * 3  # output elements x C/groups x kernel
    assert static_costs(model, (2, 4, 9, 9)) == counted(
        parameters=6 * 2 * 9 + 6, macs=macs, flops=2 * macs + 300, activations=300
    )


def test_depthwise_conv_without_bias() -> None:
    # 8 groups of one channel: Y (1, 8, 10, 10), each output reads 1 x 3 x 3 inputs.
    conv = helper.make_node("Conv", ["input", "W"], ["output"], pads=[1, 1, 1, 1], group=8)
    model = build([conv], ["batch", 8, 10, 10], initializers=[weight("W", 8, 1, 3, 3)])
    assert static_costs(model, (1, 8, 10, 10)) == counted(
        parameters=72, macs=800 * 9, flops=2 * 800 * 9, activations=800
    )


def test_conv_transpose_counts_per_input_element() -> None:
    # X (1, 4, 5, 5), W (4, 3, 3, 3), stride 2 → Y (1, 3, 11, 11): (5 - 1) · 2 + 3 = 11.
    deconv = helper.make_node("ConvTranspose", ["input", "W", "B"], ["output"], strides=[2, 2])
    model = build(
        [deconv], ["batch", 4, 5, 5], initializers=[weight("W", 4, 3, 3, 3), weight("B", 3)]
    )
    macs = 100 * 3 * 3 * 3  # input elements x M/groups x kernel
    assert static_costs(model, (1, 4, 5, 5)) == counted(
        parameters=108 + 3, macs=macs, flops=2 * macs + 363, activations=363
    )


def test_gemm_with_trans_b_and_c() -> None:
    gemm = helper.make_node("Gemm", ["input", "W", "C"], ["output"], transB=1)
    model = build([gemm], ["batch", 64], initializers=[weight("W", 10, 64), weight("C", 10)])
    assert static_costs(model, (4, 64)) == counted(
        parameters=650, macs=4 * 10 * 64, flops=2 * 4 * 10 * 64 + 40, activations=40
    )


def test_gemm_with_trans_a_takes_k_from_the_first_dimension() -> None:
    gemm = helper.make_node("Gemm", ["input", "W"], ["output"], transA=1)
    model = build([gemm], [64, "batch"], initializers=[weight("W", 64, 10)])
    assert static_costs(model, (64, 4)) == counted(
        parameters=640, macs=4 * 10 * 64, flops=2 * 4 * 10 * 64, activations=40
    )


def test_matmul_3d_by_2d_broadcasts_the_weight() -> None:
    matmul = helper.make_node("MatMul", ["input", "W"], ["output"])
    model = build([matmul], ["batch", 5, 16], initializers=[weight("W", 16, 8)])
    assert static_costs(model, (2, 5, 16)) == counted(
        parameters=128, macs=2 * 5 * 8 * 16, flops=2 * 2 * 5 * 8 * 16, activations=80
    )


def test_batched_matmul_broadcasts_both_sides() -> None:
    # (3, 1, 4, 5) x (2, 5, 6) → (3, 2, 4, 6): 144 outputs of 5 MACs each.
    matmul = helper.make_node("MatMul", ["input", "W"], ["output"])
    model = build([matmul], ["batch", 1, 4, 5], initializers=[weight("W", 2, 5, 6)])
    assert static_costs(model, (3, 1, 4, 5)) == counted(
        parameters=60, macs=144 * 5, flops=2 * 144 * 5, activations=144
    )


def test_attention_block_q_kt_v() -> None:
    # X (2, 6, 16): Q, K, V = X·W (2, 6, 16); S = Q·Kᵀ / 4 (2, 6, 6); O = softmax(S)·V (2, 6, 16).
    nodes = [
        helper.make_node("MatMul", ["input", "Wq"], ["q"]),
        helper.make_node("MatMul", ["input", "Wk"], ["k"]),
        helper.make_node("MatMul", ["input", "Wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["attention"], axis=-1),
        helper.make_node("MatMul", ["attention", "v"], ["output"]),
    ]
    weights = [weight(name, 16, 16) for name in ("Wq", "Wk", "Wv")]
    scale = numpy_helper.from_array(np.array(4.0, dtype=np.float32), "scale")
    model = build(nodes, ["batch", 6, 16], initializers=[*weights, scale])
    before = model.SerializeToString()
    projections = 3 * (2 * 6 * 16) * 16
    macs = projections + (2 * 6 * 6) * 16 + (2 * 6 * 16) * 6
    assert static_costs(model, (2, 6, 16)) == counted(
        parameters=3 * 256 + 1,
        macs=macs,
        flops=2 * macs + 72 + 72,  # Div and Softmax: one per score
        activations=3 * 192 + 192 + 72 + 72 + 72 + 192,  # q k v, kᵀ, scores, scaled, attn, out
    )
    assert model.SerializeToString() == before  # shape inference ran on a copy


def test_pooling() -> None:
    # X (1, 3, 8, 8) → MaxPool 2/2 (1, 3, 4, 4) → AveragePool 3, pad 1 (1, 3, 4, 4) → Global.
    nodes = [
        helper.make_node("MaxPool", ["input"], ["max"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["max"], ["avg"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["avg"], ["output"]),
    ]
    model = build(nodes, ["batch", 3, 8, 8])
    assert static_costs(model, (1, 3, 8, 8)) == counted(
        parameters=0, macs=0, flops=48 * 4 + 48 * 9 + 48, activations=48 + 48 + 3
    )


def test_normalisation() -> None:
    # X (2, 3, 4, 4): 96 elements. BatchNorm folded: 2 each; LayerNorm with scale and bias: 7 each.
    nodes = [
        helper.make_node("BatchNormalization", ["input", "s", "b", "mean", "var"], ["bn"]),
        helper.make_node("LayerNormalization", ["bn", "ls", "lb"], ["ln"], axis=-1),
        helper.make_node("InstanceNormalization", ["ln", "s", "b"], ["output"]),
    ]
    stats = [weight(name, 3) for name in ("s", "b", "mean", "var")]
    model = build(
        nodes, ["batch", 3, 4, 4], initializers=[*stats, weight("ls", 4), weight("lb", 4)]
    )
    assert static_costs(model, (2, 3, 4, 4)) == counted(
        parameters=12 + 8, macs=0, flops=96 * (2 + 7 + 7), activations=3 * 96
    )


def test_unsupported_ops_and_unknown_shapes_are_listed_not_guessed() -> None:
    nodes = [
        helper.make_node("Relu", ["input"], ["relu"]),
        helper.make_node("Einsum", ["relu"], ["output"], equation="ij->ji"),  # no rule
        helper.make_node("NonZero", ["relu"], ["nonzero"]),  # (2, unknown)
        helper.make_node("Cast", ["nonzero"], ["cast"], to=TensorProto.FLOAT),  # moves data: 0
        helper.make_node("Sigmoid", ["cast"], ["sigmoid"]),  # shape unknown: not counted
    ]
    model = build(nodes, ["batch", 8], outputs=["output", "sigmoid"])
    assert static_costs(model, (2, 8)) == counted(
        parameters=0,
        macs=0,
        flops=16,
        activations=16 + 16,  # relu, einsum
        not_counted=(("Einsum", 1), ("NonZero", 1), ("Sigmoid", 1)),
        unknown_shapes=3,  # nonzero, cast, sigmoid
    )


def test_parameters_count_each_initializer_once_and_constants_and_subgraphs() -> None:
    branch_out = helper.make_tensor_value_info("inner", TensorProto.FLOAT, [5])
    branch = helper.make_graph(
        [helper.make_node("Identity", ["t"], ["inner"])], "b", [], [branch_out], [weight("t", 5)]
    )
    nodes = [
        helper.make_node("MatMul", ["input", "W"], ["h"]),
        helper.make_node("MatMul", ["h", "W"], ["output"]),  # W read twice, counted once
        helper.make_node("Constant", [], ["c3"], value=weight("c", 3)),
        helper.make_node("Constant", [], ["c2"], value_floats=[1.0, 2.0]),
        helper.make_node("Constant", [], ["flag"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["flag"], ["branch"], then_branch=branch, else_branch=branch),
    ]
    model = build(
        nodes, ["batch", 4], outputs=["output", "branch"], initializers=[weight("W", 4, 4)]
    )
    result = static_costs(model, (1, 4))
    assert result.parameters == 16 + 3 + 2 + 1 + 5 + 5  # both branches are stored in the file
    assert result.not_counted == (("If", 1),)
    assert result.macs == 2 * 4 * 4


def test_demo_baselines_match_their_hand_counts() -> None:
    digits = baselines.digits_baselines(load_digits_train())
    # batch 32 of (1, 8, 8): Flatten (32, 64), Gemm 64 → 10 with bias.
    for baseline in digits:
        model = onnx.load_from_string(baseline.onnx_bytes)
        assert static_costs(model, (32, 1, 8, 8)) == counted(
            parameters=650, macs=32 * 10 * 64, flops=2 * 32 * 10 * 64 + 320, activations=2048 + 320
        ), baseline.name
    # batch 8 of (3, 448, 448): Conv kxk 3 → 1 'same' with bias, Clip, Reshape (8, 448, 448).
    plane = 8 * 448 * 448
    depth = baselines.depth_baselines(build_depth_dataset(n=1, seed=1))
    for baseline, kernel in zip(depth, (1, 1, 3), strict=True):
        macs = plane * 3 * kernel * kernel
        assert static_costs(onnx.load_from_string(baseline.onnx_bytes), (8, 3, 448, 448)) == (
            counted(
                parameters=3 * kernel * kernel + 1 + 1 + 3,  # weight, bias, floor, target shape
                macs=macs,
                flops=2 * macs + plane + plane,  # bias, Clip
                activations=3 * plane,  # conv, clipped, output
            )
        ), baseline.name


def test_resnet50_matches_its_published_4_1_gmacs() -> None:
    """onnx ships ResNet-50 (weights generated, so its parameters are not the real 25.6 M)."""
    path = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
    if not path.exists():
        pytest.skip("this onnx package ships no light ResNet-50")
    result = static_costs(onnx.load(str(path), load_external_data=False), (1, 3, 224, 224))
    assert result.macs == pytest.approx(4.09e9, rel=0.01)  # torchvision: 4.09 GFLOPS (MACs)
    assert (result.not_counted, result.unknown_shapes) == ((), 0)


# --- hostile models -----------------------------------------------------------------------------


def test_a_tensor_claiming_a_trillion_elements_is_counted_not_allocated() -> None:
    claimed = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[1_000_000, 1_000_000])
    matmul = helper.make_node("MatMul", ["input", "W"], ["output"])
    model = build([matmul], ["batch", 1_000_000], initializers=[claimed])
    result = static_costs(model, (2, 1_000_000))
    assert result.parameters == 10**12
    assert result.macs == (2 * 10**6) * 10**6  # output elements x K


def test_every_file_of_the_hostile_corpus_gets_costs_or_a_clear_error(tmp_path: Path) -> None:
    spec = replace(DIGITS_SPEC, max_model_bytes=200_000)
    outcomes: dict[str, str] = {}
    for case in build_corpus():
        try:
            model = onnx.load_from_string(case.data)
        except DecodeError:
            outcomes[case.name] = "not ONNX"  # inspection refuses these before any costs
            continue
        try:
            outcomes[case.name] = repr(static_costs(model, spec.batch_shape))
        except CostsUnavailable as exc:
            outcomes[case.name] = str(exc)
        path = tmp_path / case.name
        path.write_bytes(case.data)
        try:
            info = inspect_model(path, spec)
        except ModelRejected:
            continue
        assert info.costs is not None or info.costs_unavailable, case.name
    assert outcomes["expand-memory-bomb"].startswith("StaticCosts(")  # shapes only, no data
    assert outcomes["two-inputs"] == "The model does not have exactly one tensor input."


def test_a_name_that_is_not_utf8_is_a_clear_error() -> None:
    relu = helper.make_node("Relu", ["input"], ["output"], name="relu-node")
    data = build([relu], ["batch", 4]).SerializeToString().replace(b"relu-node", b"relu\xff\xfeode")
    with pytest.raises(CostsUnavailable, match="not valid UTF-8"):
        static_costs(onnx.load_from_string(data), (1, 4))


def test_randomly_damaged_corpus_files_get_costs_or_a_clear_error() -> None:
    rng = random.Random(11)
    seeds = [case.data for case in build_corpus() if case.data]
    analysed = 0
    for _ in range(600):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            model = onnx.load_from_string(bytes(data))
        except DecodeError:
            continue
        with contextlib.suppress(CostsUnavailable):
            static_costs(model, (16, 1, 8, 8))
            analysed += 1
    assert analysed > 100  # the damage left most parseable files analysable


def test_counts_beyond_64_bits_are_refused_with_a_clear_error() -> None:
    claimed = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2**32, 2**32])
    model = build(
        [helper.make_node("Relu", ["input"], ["output"])], ["batch"], initializers=[claimed]
    )
    with pytest.raises(CostsUnavailable, match=r"parameters reach 2\^63, beyond what is stored"):
        static_costs(model, (1,))
    # 100,000 dims of 2^62: the exact product would take minutes; it saturates instead.
    model.graph.initializer[0].ClearField("dims")
    model.graph.initializer[0].dims.extend([2**62] * 100_000)
    with pytest.raises(CostsUnavailable, match="parameters reach 2"):
        static_costs(model, (1,))


def test_a_graph_above_the_size_bound_is_not_analysed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs_module, "MAX_GRAPH_SIZE", 30)
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(10)]
    nodes[0].input[0], nodes[-1].output[0] = "input", "output"
    model = build(nodes, ["batch", 4])
    assert static_costs(model, (1, 4)).flops == 40  # 10 nodes x 3 names: exactly at the bound
    model.graph.node.append(helper.make_node("Identity", ["output"], ["copy"]))
    with pytest.raises(CostsUnavailable, match="graph is too large to analyse"):
        static_costs(model, (1, 4))


def test_an_input_of_unknown_rank_gets_the_batch_shape() -> None:
    model = build([helper.make_node("Relu", ["input"], ["output"])], ["batch", 64])
    model.graph.input[0].type.tensor_type.ClearField("shape")
    assert static_costs(model, (16, 1, 8, 8)).activations == 16 * 64


def test_an_input_that_cannot_take_the_batch_shape_is_a_clear_error() -> None:
    model = build([helper.make_node("Relu", ["input"], ["output"])], ["batch", 64])
    with pytest.raises(CostsUnavailable, match="cannot take the task's batch shape"):
        static_costs(model, (16, 1, 8, 8))


def test_costs_are_complete_unless_a_node_that_may_multiply_accumulate_is_left_out() -> None:
    relu = helper.make_node("Relu", ["input"], ["relu"])
    no_macs = build(
        [relu, helper.make_node("NonZero", ["relu"], ["nz"])], ["batch", 8], outputs=["nz"]
    )
    assert static_costs(no_macs, (2, 8)).complete  # NonZero multiplies nothing
    for leftover, name in (
        (helper.make_node("Einsum", ["relu"], ["output"], equation="ij->ji"), "Einsum × 1"),
        (
            helper.make_node("Gelu", ["relu"], ["output"], domain="com.microsoft"),
            "com.microsoft.Gelu × 1",
        ),
    ):
        model = build([relu, leftover], ["batch", 8])
        if leftover.domain:
            model.opset_import.append(helper.make_opsetid(leftover.domain, 1))
        costs = static_costs(model, (2, 8))
        assert not costs.complete
        assert costs.incomplete_reason == f"{name} left out, shape or operator unknown"


def test_a_matmul_of_unknown_shape_makes_the_costs_incomplete() -> None:
    nodes = [
        helper.make_node("NonZero", ["input"], ["nz"]),  # [2, unknown]
        helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["input", "f"], ["output"]),
    ]
    costs = static_costs(build(nodes, ["batch", 2]), (2, 2))
    assert not costs.complete and dict(costs.not_counted) == {"MatMul": 1, "NonZero": 1}
    assert costs.incomplete_reason == "MatMul × 1 left out, shape or operator unknown"
