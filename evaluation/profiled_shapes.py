"""The shapes of a model's tensors as one run at the task's batch shape sees them: what completes
the static costs (``evaluation.costs``) of a model whose shapes the graph alone does not tell.

One CPU session with graph optimisations off, so that every node runs as written and under its own
name, and onnxruntime's profiler on, which records each node's output shapes; one run on the given
batch. The nodes are renamed first (``p0``, ``p1``, ... in graph order), because an exporter's names
can be empty or repeated. Only the main graph's nodes are recorded: a body's operators stay
uncounted, as in the static costs. Pure: no Django.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import ModelProto

from evaluation.costs import StaticCosts, static_costs, uncounted_macs
from evaluation.op_costs import RULES, Shape

_PREFIX = "p"
_KERNEL = "_kernel_time"


def profiled_shapes(model: ModelProto, batch: np.ndarray, input_name: str) -> dict[str, Shape]:
    """{tensor name: shape} for every output of a main-graph node that ran on ``batch``.
    Renames ``model``'s nodes in place (the caller's copy is for this use alone)."""
    outputs_of = {}
    for index, node in enumerate(model.graph.node):
        node.name = f"{_PREFIX}{index}"
        outputs_of[node.name] = list(node.output)
    with tempfile.TemporaryDirectory(prefix="oep-profile-") as scratch:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(scratch) / "shapes")
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        session.run(None, {input_name: batch})
        events = json.loads(Path(session.end_profiling()).read_text())
    shapes: dict[str, Shape] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith(_KERNEL):
            continue
        outputs = outputs_of.get(name[: -len(_KERNEL)], [])
        recorded = event.get("args", {}).get("output_type_shape", [])
        for tensor, typed in zip(outputs, recorded, strict=False):
            dims = next(iter(typed.values()), None) if isinstance(typed, dict) else None
            if tensor and isinstance(dims, list) and all(isinstance(d, int) for d in dims):
                shapes[tensor] = tuple(dims)
    return shapes


def costs_from_run(model_bytes: bytes, batch: np.ndarray) -> StaticCosts:
    """The model's costs at ``batch``'s shape with the shapes one run on ``batch`` observed (raises
    ``CostsUnavailable`` as ``static_costs`` does, and onnxruntime's errors for a model that
    cannot run on the CPU)."""
    model = onnx.load_model_from_string(model_bytes)  # external data was refused at upload
    inferred = static_costs(model, batch.shape)
    left_out = uncounted_macs(dict(inferred.not_counted))
    if left_out and not any(op in RULES for op in left_out):
        # What is left out has no rule at any shape (a Loop's body, a custom operator): a run
        # would observe shapes for nothing, at the price of profiling every node it runs.
        return inferred
    stored = {t.name for t in model.graph.initializer}
    input_name = next(i.name for i in model.graph.input if i.name not in stored)
    observed = profiled_shapes(model, batch, input_name)
    return static_costs(model, batch.shape, observed)
