"""Static costs of an ONNX model at the task's fixed batch shape: parameters, MACs, FLOPs and
activations, from the graph's shapes (or those a run observed, given by the caller). Pure: no
Django, no onnxruntime, nothing is run here.

Conventions (also in the README):

- **parameters**: elements of every initializer (sparse ones: their stored values) and of every
  Constant node's tensor, in the main graph, in subgraphs (If/Loop/Scan bodies) and in local
  functions; each initializer counted once, however many nodes read it. Integer tensors such as
  Reshape targets count too: the rule is "elements stored in the file".
- **MACs**: multiply-accumulates of Conv, ConvTranspose, MatMul (batched, with broadcasting) and
  Gemm. Conv: output elements x (input channels / groups) x kernel elements; ConvTranspose: input
  elements x (output channels / groups) x kernel elements; MatMul and Gemm: output elements x the
  shared dimension K.
- **FLOPs**: 2 x MACs for those four, plus 1 per output element for a bias (Conv, ConvTranspose)
  or C (Gemm; alpha and beta are not counted). Element-wise operators (Add, Mul, Relu, Sigmoid,
  Erf, Gelu, Clip, Softmax, ...): 1 per output element, whatever the function; the variadic Sum,
  Mean, Min and Max: (inputs - 1) per output element. Max/Average/Lp pooling: output elements x
  kernel elements; global pooling, reductions, ArgMax/ArgMin: 1 per input element.
  BatchNormalization (inference, scale and shift folded per channel): 2 per element.
  LayerNormalization, InstanceNormalization, GroupNormalization, MeanVarianceNormalization:
  5 per element for the statistics and normalising, + 1 for a scale, + 1 for a bias.
  Data movement (Reshape, Transpose, Concat, Gather, Slice, Cast, Pad, Expand, Dropout, ...):
  0. Anything else (Resize, Einsum, If/Loop/Scan and their bodies, local functions, contrib
  operators, ...) and any counted operator whose shapes are unknown is listed in ``not_counted``.
- **activations**: elements of every tensor a node of the main graph produces at the batch shape,
  the model's outputs included, Constant outputs excluded (they are parameters). Shapes come from
  ``onnx.shape_inference.infer_shapes`` after the input's dimensions are set to the batch shape;
  an output whose shape stays unknown is counted in ``unknown_shapes`` instead.

Shapes: onnx's shape inference with data propagation, which follows the shape arithmetic of most
exports; where the caller has them, the shapes that a run of the model at the batch shape observed
(``evaluation.profiled_shapes``) override it. onnxruntime's symbolic shape inference is not used
here: it writes files into the process's working directory whenever it falls short, and its time
grows steeply with the graph, both wrong for the web process this runs in at upload.

**Complete or not**: the MACs (and so the FLOPs) are complete when no node in ``MAC_BEARING``
(operators that multiply-accumulate, or bodies and functions that may hold such operators) and no
operator outside the standard domain is left in ``not_counted``. An incomplete count is never
ranked as if it were the whole (``submissions.boards.ranking``): ``StaticCosts.complete`` says
which,
and ``incomplete_reason`` says why, on every surface.

Hostile files: only shapes are read, never tensor data. Shape inference runs on a copy whose large
tensors are stubs (type and dims, no data), so memory stays near the size of the graph's structure,
and graphs above MAX_GRAPH_SIZE are not analysed (the time is linear in the size below that).
Every failure is ``CostsUnavailable``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import onnx
from onnx import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    TensorShapeProto,
    ValueInfoProto,
)

from evaluation.op_costs import SATURATED, Shape, elements, node_costs

# Nodes plus the tensor names they read and write, in all graphs together: the work is linear in
# it, and the bound keeps one upload's inspection short. Real vision and language models stay
# far below.
MAX_GRAPH_SIZE = 250_000
_MAX_RANK = 64
_KEEP_TENSOR_BYTES = 64 * 1024  # tensors this small keep their data: shape inference may need it


# Operators that multiply-accumulate, and those whose bodies or functions may hold operators
# that do: while one of them is not counted, the MACs and FLOPs are a part, not the whole.
MAC_BEARING = frozenset(
    [
        "Conv",
        "ConvInteger",
        "ConvTranspose",
        "DeformConv",
        "Einsum",
        "GRU",
        "Gemm",
        "If",
        "LSTM",
        "Loop",
        "MatMul",
        "MatMulInteger",
        "QLinearConv",
        "QLinearMatMul",
        "RNN",
        "Scan",
    ]
)
SHAPES_INFERRED = "inference"  # shapes from the graph alone
SHAPES_OBSERVED = "run"  # shapes a run of the model at the task's batch shape observed


class CostsUnavailable(Exception):
    """The costs of this model cannot be computed; ``str(exc)`` says why, in plain words."""


def uncounted_macs(not_counted: Mapping[str, int]) -> dict[str, int]:
    """The entries of ``not_counted`` ({op: nodes}) that leave MACs out: MAC-bearing operators
    of the standard domain, and every operator of another domain (``domain.Op``)."""
    return {op: n for op, n in not_counted.items() if op in MAC_BEARING or "." in op}


def incomplete_reason(not_counted: Mapping[str, int]) -> str:
    """Why MACs and FLOPs counted with these nodes left out are incomplete; "" if they are not."""
    left_out = uncounted_macs(not_counted)
    if not left_out:
        return ""
    nodes = ", ".join(f"{op} × {n}" for op, n in left_out.items())
    return f"{nodes} left out, shape or operator unknown"


@dataclass(frozen=True)
class StaticCosts:
    parameters: int
    macs: int
    flops: int
    activations: int
    not_counted: tuple[tuple[str, int], ...]  # (op type, nodes), most frequent first
    unknown_shapes: int  # node outputs whose shape shape inference could not tell
    shapes_from: str = SHAPES_INFERRED  # or SHAPES_OBSERVED

    @property
    def complete(self) -> bool:
        """MACs and FLOPs count every node that multiply-accumulates."""
        return not uncounted_macs(dict(self.not_counted))

    @property
    def incomplete_reason(self) -> str:
        return incomplete_reason(dict(self.not_counted))


def static_costs(
    model: ModelProto,
    batch_shape: Sequence[int],
    observed: Mapping[str, Shape] | None = None,
) -> StaticCosts:
    """The costs of ``model`` when its one input has ``batch_shape``; see the module docstring.
    ``observed``: tensor shapes a run of the model at that shape recorded, by tensor name."""
    try:
        return _costs(model, tuple(batch_shape), observed)
    except UnicodeDecodeError as exc:  # protobuf decodes string fields only when they are read
        raise CostsUnavailable("The model holds a name that is not valid UTF-8 text.") from exc


def _costs(
    model: ModelProto, batch_shape: Shape, observed: Mapping[str, Shape] | None
) -> StaticCosts:
    graphs = _all_graphs(model)
    parameters = sum(_graph_parameters(graph) for graph in graphs)
    shapes = _inferred_shapes(model, batch_shape)
    if observed:
        shapes.update(observed)
    macs = flops = activations = unknown = 0
    not_counted: Counter[str] = Counter()
    for node in model.graph.node:
        ins = [shapes.get(name) if name else None for name in node.input]
        outs = [shapes.get(name) if name else None for name in node.output]
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            produced = [shapes.get(name) for name in node.output if name]
            activations += sum(elements(s) for s in produced if s is not None)
            unknown += sum(1 for s in produced if s is None)
        cost = node_costs(node, ins, outs)
        if cost is None:
            not_counted[_op_name(node)] += 1
        else:
            macs, flops = macs + cost[0], flops + cost[1]
    totals = {"parameters": parameters, "MACs": macs, "FLOPs": flops, "activations": activations}
    for what, value in totals.items():
        if value >= SATURATED:
            raise CostsUnavailable(f"The model's {what} reach 2^63, beyond what is stored.")
    return StaticCosts(
        parameters=parameters,
        macs=macs,
        flops=flops,
        activations=activations,
        not_counted=tuple(sorted(not_counted.items(), key=lambda item: (-item[1], item[0]))),
        unknown_shapes=unknown,
        shapes_from=SHAPES_OBSERVED if observed else SHAPES_INFERRED,
    )


def _op_name(node: NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


# --- graphs and parameters ----------------------------------------------------------------------


def _nested(node: NodeProto) -> Iterator[GraphProto]:
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def _all_graphs(model: ModelProto) -> list[GraphProto]:
    """The main graph, every nested body and each local function's nodes, within MAX_GRAPH_SIZE."""
    functions = [onnx.helper.make_graph(list(f.node), f.name, [], []) for f in model.functions]
    pending, graphs, size = [model.graph, *functions], [], 0
    while pending:
        graph = pending.pop()
        graphs.append(graph)
        for node in graph.node:
            size += 1 + len(node.input) + len(node.output)
            if size > MAX_GRAPH_SIZE:
                raise CostsUnavailable(
                    f"The model's graph is too large to analyse (more than {MAX_GRAPH_SIZE:,} "
                    "nodes, inputs and outputs); its costs are not computed."
                )
            pending.extend(_nested(node))
    return graphs


def _tensor_elements(tensor: TensorProto) -> int:
    if any(d < 0 for d in tensor.dims):
        raise CostsUnavailable(f"Tensor '{tensor.name}' has a negative dimension.")
    return elements(tuple(tensor.dims))


def _constant_elements(node: NodeProto) -> int:
    total = 0
    for attr in node.attribute:
        if attr.name == "value":
            total += _tensor_elements(attr.t)
        elif attr.name == "sparse_value":
            total += _tensor_elements(attr.sparse_tensor.values)
        elif attr.name in ("value_float", "value_int"):
            total += 1
        elif attr.name in ("value_floats", "value_ints"):
            total += len(attr.floats) + len(attr.ints)
    return total


def _graph_parameters(graph: GraphProto) -> int:
    stored = {t.name: _tensor_elements(t) for t in graph.initializer}
    stored.update({s.values.name: _tensor_elements(s.values) for s in graph.sparse_initializer})
    constants = sum(
        _constant_elements(node)
        for node in graph.node
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx")
    )
    return sum(stored.values()) + constants


# --- shapes ---------------------------------------------------------------------------------------


def _stub(tensor: TensorProto) -> TensorProto:
    """The tensor itself when small, else its name, type and dims without data."""
    if tensor.ByteSize() <= _KEEP_TENSOR_BYTES:
        return tensor
    return TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)


def _light_node(node: NodeProto) -> NodeProto:
    light = NodeProto(
        name=node.name,
        op_type=node.op_type,
        domain=node.domain,
        input=node.input,
        output=node.output,
    )
    for attr in node.attribute:
        if attr.type == AttributeProto.TENSOR:
            light.attribute.add(name=attr.name, type=attr.type, t=_stub(attr.t))
        elif attr.type == AttributeProto.SPARSE_TENSOR:
            dense = TensorProto(name=attr.name, data_type=attr.sparse_tensor.values.data_type)
            dense.dims.extend(attr.sparse_tensor.dims)
            light.attribute.add(name="value", type=AttributeProto.TENSOR, t=dense)
        elif attr.type == AttributeProto.GRAPH:
            light.attribute.add(name=attr.name, type=attr.type, g=_light_graph(attr.g))
        elif attr.type == AttributeProto.GRAPHS:
            graphs = [_light_graph(g) for g in attr.graphs]
            light.attribute.add(name=attr.name, type=attr.type, graphs=graphs)
        else:
            light.attribute.append(attr)
    return light


def _light_graph(graph: GraphProto) -> GraphProto:
    """A copy for shape inference: large tensors are stubs, declared inner shapes dropped."""
    light = GraphProto(name=graph.name, input=graph.input, output=graph.output)
    light.initializer.extend(_stub(t) for t in graph.initializer)
    for sparse in graph.sparse_initializer:
        dense = TensorProto(name=sparse.values.name, data_type=sparse.values.data_type)
        dense.dims.extend(sparse.dims)
        light.initializer.append(dense)
    light.node.extend(_light_node(node) for node in graph.node)
    return light


def _shape(value: ValueInfoProto) -> Shape | None:
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    dims = value.type.tensor_type.shape.dim
    if len(dims) > _MAX_RANK or any(not d.HasField("dim_value") or d.dim_value < 0 for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def _inferred_shapes(model: ModelProto, batch_shape: Shape) -> dict[str, Shape | None]:
    """Shapes by tensor name, from onnx's shape inference with data propagation."""
    light = _light_model(model, batch_shape)
    try:
        inferred = onnx.shape_inference.infer_shapes(
            light, check_type=False, strict_mode=False, data_prop=True
        ).graph
    except Exception:  # onnx raises several types here; the shapes then stay unknown
        inferred = light.graph
    shapes: dict[str, Shape | None] = {
        t.name: None if any(d < 0 for d in t.dims) else tuple(t.dims)
        for t in light.graph.initializer
    }
    for value in [*inferred.input, *inferred.value_info, *inferred.output]:
        shapes[value.name] = _shape(value)
    return shapes


def _light_model(model: ModelProto, batch_shape: Shape) -> ModelProto:
    """A copy for shape inference (large tensors stubbed), its one input at ``batch_shape``."""
    light = ModelProto(ir_version=model.ir_version, opset_import=model.opset_import)
    for function in model.functions:
        light.functions.add(
            name=function.name,
            domain=function.domain,
            input=function.input,
            output=function.output,
            attribute=function.attribute,
            attribute_proto=function.attribute_proto,
            opset_import=function.opset_import,
            node=[_light_node(node) for node in function.node],
        )
    light.graph.CopyFrom(_light_graph(model.graph))
    graph = light.graph
    stored = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in stored]
    if len(inputs) != 1 or not inputs[0].type.HasField("tensor_type"):
        raise CostsUnavailable("The model does not have exactly one tensor input.")
    tensor_type = inputs[0].type.tensor_type
    if tensor_type.HasField("shape") and len(tensor_type.shape.dim) != len(batch_shape):
        raise CostsUnavailable("The model's input cannot take the task's batch shape.")
    tensor_type.ClearField("shape")  # symbolic, fixed or absent: the batch shape it will get
    tensor_type.shape.dim.extend(TensorShapeProto.Dimension(dim_value=d) for d in batch_shape)
    for output in graph.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")  # inferred, not declared ("batch")
    return light
