"""A corpus of bad and hostile ONNX uploads, each with the exact message the portal must give.

Built from code with onnx.helper (nothing is downloaded). The end-to-end test uploads every file
through the API to a digits-like task (batch 16 of [1, 8, 8] float32 → [16, 10], 2 s time limit,
200 kB size limit) and runs a real worker; ``stage`` says where each must be stopped. Run as a
script to write the files for manual poking: ``python -m tests.evaluation.hostile.corpus DIR``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto

from tests.builders import unary_model
from tests.evaluation.hostile.models import (
    bad_reshape,
    batch_reduced,
    bias_model,
    cast_output,
    constant_of_shape_bomb,
    custom_domain,
    declared_output_shape,
    endless_loop,
    expand_bomb,
    external_in_function,
    external_in_subgraph,
    gemm_on_3d,
    good_model,
    no_graph,
    no_inputs,
    no_outputs,
    oversize,
    sequence_input,
    two_inputs,
    undeclared_domain_node,
    unknown_operator,
    versions,
    with_external,
)

BATCH_SHAPE = "[16, 1, 8, 8]"
_NOT_ONNX = re.escape("This is not an ONNX model: ")
_SHAPE_WORDS = "which cannot take this task's fixed batch shape"
_EXTERNAL = (
    "Upload one self-contained .onnx file: onnx.save(model, path, save_as_external_data=False)."
)


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    stage: str  # "upload": refused with 400; "worker": accepted, then failed by the worker
    pattern: str  # regular expression the whole message must match
    filename: str = "model.onnx"
    task: str = "digits"

    def matches(self, message: str) -> bool:
        return re.fullmatch(self.pattern, message, flags=re.DOTALL) is not None


def exact(text: str) -> str:
    return re.escape(text)


# --- the corpus ---------------------------------------------------------------------------------

_OOM = exact("The model ran out of memory: it needs more than the per-evaluation limit of ") + (
    r"[\d,]+ MiB on this worker\. It asked for [\d,]+ MiB at once \(operator {op}\)\."
)
_CANNOT_LOAD = exact("onnxruntime could not load the model: ")


def _upload_cases() -> list[Case]:
    good = good_model()
    shape_msg = "The model's input 'input' has shape {}, " + _SHAPE_WORDS + f" {BATCH_SHAPE} "
    shape_msg += "(named/symbolic dimensions are fine; fixed ones must match)."
    external = "The model stores tensor '{}' as external data ('{}'). " + _EXTERNAL
    domains = (
        "Only the standard ONNX domains ('' / ai.onnx, ai.onnx.ml) and com.microsoft are allowed"
    )
    return [
        Case("zero-bytes", b"", "upload", exact("The file is empty.")),
        Case("garbage", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, "upload", _NOT_ONNX + ".*"),
        Case("truncated", good[: len(good) // 2], "upload", _NOT_ONNX + ".*"),
        Case(
            "no-graph",
            no_graph(),
            "upload",
            exact(
                "This is not an ONNX model: it has no graph or IR version "
                "(is it truncated or another format?)."
            ),
        ),
        Case(
            "wrong-extension",
            good,
            "upload",
            exact("Upload a file with the .onnx extension."),
            filename="model.pt",
        ),
        Case(
            "oversize",
            oversize(),
            "upload",
            exact(
                f"The model is 0.31 MiB ({len(oversize()):,} bytes); this task accepts models "
                "up to 0.19 MiB."
            ),
        ),
        Case(
            "external-data-dotdot",
            with_external("../../etc/passwd"),
            "upload",
            exact(external.format("W", "../../etc/passwd")),
        ),
        Case(
            "external-data-absolute",
            with_external("/etc/shadow"),
            "upload",
            exact(external.format("W", "/etc/shadow")),
        ),
        Case(
            "external-data-in-subgraph",
            external_in_subgraph(),
            "upload",
            exact(external.format("W", "inner.bin")),
        ),
        Case(
            "external-data-in-local-function",
            external_in_function(),
            "upload",
            exact(external.format("W", "/proc/self/environ")),
        ),
        Case(
            "custom-op-domain",
            custom_domain(),
            "upload",
            exact(
                f"The model imports operator domain 'com.example'. {domains}; custom operators "
                "cannot run on our workers."
            ),
        ),
        Case(
            "node-in-undeclared-domain",
            undeclared_domain_node(),
            "upload",
            exact(f"Operator 'Flatten' is from domain 'org.pwn'. {domains}."),
        ),
        Case(
            "two-inputs",
            two_inputs(),
            "upload",
            exact(
                f"The model has 2 inputs ('a', 'b'); this task feeds exactly one input of shape "
                f"{BATCH_SHAPE}."
            ),
        ),
        Case(
            "no-inputs",
            no_inputs(),
            "upload",
            exact(
                f"The model has 0 inputs (none); this task feeds exactly one input of shape "
                f"{BATCH_SHAPE}."
            ),
        ),
        Case("no-outputs", no_outputs(), "upload", exact("The model has no outputs.")),
        Case(
            "wrong-rank",
            unary_model("Relu", ["batch", 64], ["batch", 10]),
            "upload",
            exact(shape_msg.format("[batch, 64]")),
        ),
        Case(
            "wrong-fixed-batch",
            good_model(batch=1),
            "upload",
            exact(shape_msg.format("[1, 1, 8, 8]")),
        ),
        Case(
            "wrong-sample-shape",
            unary_model("Relu", ["batch", 3, 8, 8]),
            "upload",
            exact(shape_msg.format("[batch, 3, 8, 8]")),
        ),
        Case(
            "wrong-dtype",
            unary_model("Identity", ["batch", 1, 8, 8], elem=TensorProto.DOUBLE),
            "upload",
            exact("The model's input 'input' has type float64; this task feeds float32."),
        ),
        Case(
            "string-input",
            unary_model("Identity", ["batch", 1, 8, 8], elem=TensorProto.STRING),
            "upload",
            exact("The model's input 'input' has type string; this task feeds float32."),
        ),
        Case(
            "sequence-input",
            sequence_input(),
            "upload",
            exact("The model's input 'input' is not a tensor."),
        ),
        Case(
            "declared-output-shape-wrong",
            declared_output_shape(7),
            "upload",
            exact(
                "The model's output 'output' has shape [batch, 7], which cannot give this task's "
                "output shape [16, 10] "
                "(named/symbolic dimensions are fine; fixed ones must match)."
            ),
        ),
        Case(
            "ir-version-too-new",
            versions(ir_version=14),
            "upload",
            r"The model has ONNX IR "
            r"version 14; onnxruntime [\d.]+ on our workers loads IR versions up to 13\. .*",
        ),
        Case(
            "opset-too-new",
            versions(opset=40),
            "upload",
            r"The model imports opset 40 of the "
            r"default ONNX domain; onnxruntime [\d.]+ on our workers supports opsets up to \d+\..*",
        ),
    ]


def _worker_cases(worker: str) -> list[Case]:
    nan_bias, inf_bias = np.zeros(10), np.zeros(10)
    nan_bias[3], inf_bias[0] = np.nan, -np.inf
    wrong = "The model's output has shape {} but this task expects [16, 10] "
    wrong += "(batch 16 × per-sample [10])."
    return [
        Case(
            "output-wrong-shape",
            unary_model("Flatten", ["batch", 1, 8, 8], ["batch", "features"]),
            "worker",
            exact(wrong.format("[16, 64]")),
        ),
        Case("output-batch-differs", batch_reduced(), "worker", exact(wrong.format("[1, 10]"))),
        Case(
            "nan-output",
            bias_model(nan_bias),
            "worker",
            exact("The model's output contains NaN or infinity (batch 1)."),
        ),
        Case(
            "inf-output",
            bias_model(inf_bias),
            "worker",
            exact("The model's output contains NaN or infinity (batch 1)."),
        ),
        Case(
            "string-output",
            cast_output(TensorProto.STRING),
            "worker",
            exact("The model's output has type object; a numeric tensor is expected."),
        ),
        Case(
            "bool-output",
            cast_output(TensorProto.BOOL),
            "worker",
            exact("The model's output has type bool; a numeric tensor is expected."),
        ),
        Case("endless-loop", endless_loop(), "worker", exact("time limit of 2 s exceeded")),
        Case("expand-memory-bomb", expand_bomb(), "worker", _OOM.format(op="Expand")),
        Case(
            "constant-of-shape-memory-bomb",
            constant_of_shape_bomb(),
            "worker",
            _OOM.format(op="ConstantOfShape"),
        ),
        Case("fails-at-session-creation", gemm_on_3d(), "worker", _CANNOT_LOAD + ".*Gemm.*"),
        Case("unknown-operator", unknown_operator(), "worker", _CANNOT_LOAD + ".*NoSuchOperator.*"),
        Case(
            "fails-while-running",
            bad_reshape(),
            "worker",
            exact("The model failed while running: ") + ".*Reshape.*",
        ),
    ]


def build_corpus(worker: str = "test-worker") -> list[Case]:
    """Every case; ``worker`` is the name the evaluating worker will report."""
    return _upload_cases() + _worker_cases(worker)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "hostile-corpus")
    out.mkdir(parents=True, exist_ok=True)
    for case in build_corpus():
        suffix = Path(case.filename).suffix
        (out / f"{case.name}{suffix}").write_bytes(case.data)
    print(f"wrote {len(build_corpus())} files to {out}")
