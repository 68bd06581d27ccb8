"""MACs and FLOPs of one ONNX node from its input and output shapes: the rules of costs.py.

Each rule takes the node and the shapes of its inputs and outputs (None where unknown) and returns
(MACs, FLOPs), or None when a shape it needs is unknown. Operators with no rule are not counted.
"""

from __future__ import annotations

from collections.abc import Callable

from onnx import NodeProto

Shape = tuple[int, ...]
Cost = tuple[int, int]  # (MACs, FLOPs)
Rule = Callable[[NodeProto, list[Shape | None], list[Shape | None]], Cost | None]


def _ops(names: str) -> frozenset[str]:
    return frozenset(names.split())


ELEMENTWISE = _ops(
    """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift Ceil Celu Clip Cos Cosh Div Elu Equal
    Erf Exp Floor Gelu Greater GreaterOrEqual HardSigmoid HardSwish Hardmax IsInf IsNaN LeakyRelu
    Less LessOrEqual Log LogSoftmax Mish Mod Mul Neg Not Or Pow PRelu Reciprocal Relu Round Selu
    Shrink Sigmoid Sign Sin Sinh Softmax Softplus Softsign Sqrt Sub Tan Tanh ThresholdedRelu Where
    Xor"""
)
VARIADIC = frozenset({"Sum", "Mean", "Min", "Max"})
PER_INPUT_ELEMENT = _ops(
    """ArgMax ArgMin GlobalAveragePool GlobalLpPool GlobalMaxPool ReduceL1 ReduceL2 ReduceLogSum
    ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare"""
)
DATA_MOVEMENT = _ops(
    """Cast CastLike Concat Constant ConstantOfShape DepthToSpace Dropout Expand EyeLike Flatten
    Gather GatherElements GatherND Identity Pad Range Reshape Shape Size Slice SpaceToDepth Split
    Squeeze Tile Transpose Unsqueeze"""
)
# Statistics and normalising (mean, centre, square, sum, scale by 1/sigma): 5 per element.
_NORM_STATS = 5
_STANDARD = ("", "ai.onnx")
SATURATED = 2**63  # above every count a 64-bit database column can hold


def elements(shape: Shape) -> int:
    """The product of the dims, saturated at 2^63 (a hostile rank would take quadratic time)."""
    if 0 in shape:
        return 0
    count = 1
    for dim in shape:
        count *= dim
        if count >= SATURATED:
            return SATURATED
    return count


def _has_input(node: NodeProto, index: int) -> bool:
    return len(node.input) > index and node.input[index] != ""


def _int_attr(node: NodeProto, name: str, default: int) -> int:
    return next((a.i for a in node.attribute if a.name == name), default)


def _conv(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    """Output elements x (C / groups) x kernel elements: the weight is (M, C/groups, *kernel)."""
    if len(ins) < 2 or ins[1] is None or not outs or outs[0] is None:
        return None
    out = elements(outs[0])
    macs = out * elements(ins[1][1:])
    return macs, 2 * macs + (out if _has_input(node, 2) else 0)


def _conv_transpose(
    node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]
) -> Cost | None:
    """Input elements x (M / groups) x kernel elements: the weight is (C, M/groups, *kernel)."""
    if len(ins) < 2 or ins[0] is None or ins[1] is None or not outs or outs[0] is None:
        return None
    macs = elements(ins[0]) * elements(ins[1][1:])
    return macs, 2 * macs + (elements(outs[0]) if _has_input(node, 2) else 0)


def _matmul(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    """Output elements x K, K the last dimension of A; broadcast batch dimensions included."""
    if not ins or ins[0] is None or not ins[0] or not outs or outs[0] is None:
        return None
    macs = elements(outs[0]) * ins[0][-1]
    return macs, 2 * macs


def _gemm(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    """Y (M, N) = A (M, K) · B (K, N) + C: M·N·K MACs, + M·N FLOPs for C."""
    if not ins or ins[0] is None or len(ins[0]) != 2 or not outs or outs[0] is None:
        return None
    k = ins[0][0] if _int_attr(node, "transA", 0) else ins[0][1]
    out = elements(outs[0])
    return out * k, 2 * out * k + (out if _has_input(node, 2) else 0)


def _pool(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    """Output elements x kernel elements (a compare or an add each)."""
    kernel = next((tuple(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
    if kernel is None or any(k < 0 for k in kernel) or not outs or outs[0] is None:
        return None
    return 0, elements(outs[0]) * elements(kernel)


def _per_output(flops_each: int) -> Rule:
    def rule(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
        return None if not outs or outs[0] is None else (0, flops_each * elements(outs[0]))

    return rule


def _variadic(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    return _per_output(max(1, len(node.input) - 1))(node, ins, outs)


def _per_input(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    return None if not ins or ins[0] is None else (0, elements(ins[0]))


def _normalization(affine_inputs: tuple[int, ...]) -> Rule:
    """5 per element for the statistics, + 1 per element for each affine input present."""

    def rule(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
        if not outs or outs[0] is None:
            return None
        each = _NORM_STATS + sum(1 for i in affine_inputs if _has_input(node, i))
        return 0, each * elements(outs[0])

    return rule


def _zero(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    return 0, 0


RULES: dict[str, Rule] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "LpPool": _pool,
    "BatchNormalization": _per_output(2),  # inference: x · scale' + shift', folded per channel
    "LayerNormalization": _normalization((1, 2)),
    "InstanceNormalization": _normalization((1, 2)),
    "GroupNormalization": _normalization((1, 2)),
    "MeanVarianceNormalization": _normalization(()),
    **dict.fromkeys(ELEMENTWISE, _per_output(1)),
    **dict.fromkeys(VARIADIC, _variadic),
    **dict.fromkeys(PER_INPUT_ELEMENT, _per_input),
    **dict.fromkeys(DATA_MOVEMENT, _zero),
}


def node_costs(node: NodeProto, ins: list[Shape | None], outs: list[Shape | None]) -> Cost | None:
    """(MACs, FLOPs) of ``node``, or None: no rule for its operator, or a needed shape unknown."""
    rule = RULES.get(node.op_type) if node.domain in _STANDARD else None
    return None if rule is None else rule(node, ins, outs)
