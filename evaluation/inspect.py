"""Is this uploaded file an ONNX model the task can run? Answered before anything is stored.

Pure: takes a file path and a TaskSpec, returns what it found or raises ModelRejected with a
message written for the submitter. Parsing never loads external data, so a model cannot make the
server read files outside the upload.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort
from google.protobuf.message import DecodeError
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto

from evaluation.costs import CostsUnavailable, StaticCosts, static_costs
from evaluation.sizes import mib_text
from evaluation.spec import TaskSpec

ALLOWED_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})
_DTYPE_FOR_ELEM = {
    TensorProto.FLOAT: "float32",
    TensorProto.FLOAT16: "float16",
    TensorProto.DOUBLE: "float64",
    TensorProto.INT64: "int64",
    TensorProto.INT32: "int32",
    TensorProto.UINT8: "uint8",
}


class ModelRejected(Exception):
    """The upload is refused; ``str(exc)`` is safe to show the submitter."""


@dataclass(frozen=True)
class ModelInfo:
    ir_version: int
    opset: int | None
    producer: str
    input_name: str
    input_shape: list[int | str]
    input_dtype: str
    output_names: list[str]
    output_shape: list[int | str] | None
    node_count: int
    costs: StaticCosts | None = None  # None when they could not be computed: see costs_unavailable
    costs_unavailable: str = ""

    def as_dict(self) -> dict[str, Any]:
        """What inspection found, less the costs: they are stored in columns of their own."""
        found = asdict(self)
        del found["costs"]
        return found


def check_file_name(name: str) -> None:
    """Models travel as ``.onnx`` files; the upload service and the command-line check agree."""
    if not name.lower().endswith(".onnx"):
        raise ModelRejected("Upload a file with the .onnx extension.")


def _load(path: Path, spec: TaskSpec) -> ModelProto:
    size = path.stat().st_size
    if size == 0:
        raise ModelRejected("The file is empty.")
    if size > spec.max_model_bytes:
        raise ModelRejected(
            f"The model is {mib_text(size)} ({size:,} bytes); this task accepts models up to "
            f"{mib_text(spec.max_model_bytes)}."
        )
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ModelRejected(
            "This is not an ONNX model: the file could not be parsed as an ONNX protobuf "
            f"(is it truncated or another format?). Parser said: {exc}"
        ) from exc
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelRejected(
            "This is not an ONNX model: it has no graph or IR version "
            "(is it truncated or another format?)."
        )
    return model


def _loads_in_onnxruntime(ir_version: int, opset: int) -> bool:
    x = onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "p", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime's own exception types: "Unsupported model IR version" etc.
        return False
    return True


@cache
def runtime_limits() -> tuple[int, int]:
    """(newest IR version, newest default-domain opset) the installed onnxruntime loads.

    onnxruntime exposes neither number, so it is asked: a one-node model is loaded at decreasing
    versions (a few milliseconds, once per process, CPU only). Probing cannot drift from the
    library the workers really run, as a hard-coded table would on an upgrade.
    """
    ir = next(v for v in range(onnx.IR_VERSION + 2, 2, -1) if _loads_in_onnxruntime(v, 11))
    top = onnx.defs.onnx_opset_version() + 2
    opset = next(v for v in range(top, 0, -1) if _loads_in_onnxruntime(min(ir, 10), v))
    return ir, opset


def _check_runtime_support(model: ModelProto) -> None:
    max_ir, max_opset = runtime_limits()
    if model.ir_version > max_ir:
        raise ModelRejected(
            f"The model has ONNX IR version {model.ir_version}; onnxruntime {ort.__version__} on "
            f"our workers loads IR versions up to {max_ir}. Set model.ir_version = {max_ir} "
            "before onnx.save (or export with an older onnx package)."
        )
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version > max_opset:
            raise ModelRejected(
                f"The model imports opset {opset.version} of the default ONNX domain; onnxruntime "
                f"{ort.__version__} on our workers supports opsets up to {max_opset}. Export with "
                f"opset_version={max_opset} or lower."
            )


def _subgraphs(graph: GraphProto) -> Iterator[GraphProto]:
    """The graph and every graph nested in node attributes (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from _subgraphs(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _subgraphs(sub)


def _tensors(graph: GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == AttributeProto.TENSORS:
                yield from attr.tensors


def _check_no_external_data(model: ModelProto) -> None:
    graphs = [g for g in _subgraphs(model.graph)]
    for function in model.functions:
        graphs.extend(  # nodes of local functions can carry tensors too
            _subgraphs(onnx.helper.make_graph(list(function.node), function.name, [], []))
        )
    for graph in graphs:
        for tensor in _tensors(graph):
            if tensor.data_location == TensorProto.EXTERNAL or len(tensor.external_data) > 0:
                location = next((e.value for e in tensor.external_data if e.key == "location"), "?")
                raise ModelRejected(
                    f"The model stores tensor '{tensor.name}' as external data ('{location}'). "
                    "Upload one self-contained .onnx file: "
                    "onnx.save(model, path, save_as_external_data=False)."
                )


def _check_domains(model: ModelProto) -> None:
    for opset in model.opset_import:
        if opset.domain not in ALLOWED_DOMAINS:
            raise ModelRejected(
                f"The model imports operator domain '{opset.domain}'. Only the standard ONNX "
                "domains ('' / ai.onnx, ai.onnx.ml) and com.microsoft are allowed; custom "
                "operators cannot run on our workers."
            )
    graphs = list(_subgraphs(model.graph))
    nodes = [n for g in graphs for n in g.node] + [n for f in model.functions for n in f.node]
    local_functions = {(f.domain, f.name) for f in model.functions}
    for node in nodes:
        if (
            node.domain not in ALLOWED_DOMAINS
            and (node.domain, node.op_type) not in local_functions
        ):
            raise ModelRejected(
                f"Operator '{node.op_type}' is from domain '{node.domain}'. Only the standard "
                "ONNX domains ('' / ai.onnx, ai.onnx.ml) and com.microsoft are allowed."
            )


def _dims(value_info: onnx.ValueInfoProto) -> list[int | str] | None:
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
        for d in tensor_type.shape.dim
    ]


def _fmt(shape: list[int | str] | tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_shape(
    what: str, dims: list[int | str] | None, expected: tuple[int, ...], expected_as: str
) -> None:
    """``expected_as`` names the shape for the message: "take this task's fixed batch shape"."""
    if dims is None:
        return  # rank unknown: the runner checks the real shapes
    if len(dims) != len(expected) or any(
        isinstance(d, int) and d > 0 and d != e for d, e in zip(dims, expected, strict=False)
    ):
        raise ModelRejected(
            f"The model's {what} has shape {_fmt(dims)}, which cannot {expected_as} "
            f"{_fmt(expected)} (named/symbolic dimensions are fine; fixed ones must match)."
        )


def _check_io(model: ModelProto, spec: TaskSpec) -> ModelInfo:
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        names = ", ".join(f"'{i.name}'" for i in inputs) or "none"
        raise ModelRejected(
            f"The model has {len(inputs)} inputs ({names}); this task feeds exactly one input of "
            f"shape {_fmt(spec.batch_shape)}."
        )
    if len(graph.output) == 0:
        raise ModelRejected("The model has no outputs.")
    model_input = inputs[0]
    if not model_input.type.HasField("tensor_type"):
        raise ModelRejected(f"The model's input '{model_input.name}' is not a tensor.")
    elem = model_input.type.tensor_type.elem_type
    dtype = _DTYPE_FOR_ELEM.get(elem, TensorProto.DataType.Name(elem).lower())
    if dtype != spec.input_dtype:
        raise ModelRejected(
            f"The model's input '{model_input.name}' has type {dtype}; this task feeds "
            f"{spec.input_dtype}."
        )
    input_dims = _dims(model_input)
    batch_shape = "take this task's fixed batch shape"
    _check_shape(f"input '{model_input.name}'", input_dims, spec.batch_shape, batch_shape)
    output_dims = _dims(graph.output[0]) if graph.output[0].type.HasField("tensor_type") else None
    _check_shape(
        f"output '{graph.output[0].name}'",
        output_dims,
        spec.output_batch_shape,
        "give this task's output shape",
    )
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    return ModelInfo(
        ir_version=model.ir_version,
        opset=opset,
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        input_name=model_input.name,
        input_shape=input_dims if input_dims is not None else [],
        input_dtype=dtype,
        output_names=[o.name for o in graph.output],
        output_shape=output_dims,
        node_count=sum(len(g.node) for g in _subgraphs(graph)),
    )


def inspect_model(path: Path, spec: TaskSpec) -> ModelInfo:
    """Accept the model at ``path`` for ``spec`` or raise ModelRejected saying why not."""
    model = _load(path, spec)
    try:
        _check_runtime_support(model)
        _check_no_external_data(model)
        _check_domains(model)
        info = _check_io(model, spec)
    except UnicodeDecodeError as exc:
        # ONNX is proto2: string fields are not checked when parsed, only when read.
        raise ModelRejected(
            f"The model is damaged: a name or text field is not valid UTF-8 ({exc.reason} at "
            f"byte {exc.start}). Export it again and upload the new file."
        ) from exc
    try:
        return replace(info, costs=static_costs(model, spec.batch_shape))
    except CostsUnavailable as exc:  # the costs inform; they never refuse an upload
        return replace(info, costs_unavailable=str(exc))
