"""What a model process runs once before its job, so the job's first run does not set up
onnxruntime or load the GPU's libraries (``evaluation.model_process``)."""

from __future__ import annotations

import functools

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from evaluation.runner import DeviceConfig
from evaluation.selftest import tiny_model


def warm_up_model(device: DeviceConfig) -> tuple[bytes, np.ndarray]:
    """The model a model process runs once while it waits for its job, and its input.

    On CUDA a submission's first run would otherwise pay for loading cuBLAS and cuDNN and their
    kernels (figures in docs/benchmarks.md, ``benchmarks.model_process_start --cuda``), which the
    tiny Add does not load. On CPU nothing of the kind is loaded: the Add sets onnxruntime up.
    """
    if device.use_cuda:
        return library_warm_model(), np.zeros(LIBRARY_WARM_INPUT, dtype=np.float32)
    return tiny_model(), np.zeros(4, dtype=np.float32)


LIBRARY_WARM_INPUT = (4, 3, 64, 64)


@functools.cache
def library_warm_model() -> bytes:
    """x [4, 3, 64, 64] -> Conv 3x3 (8) -> Conv 3x3 (8) -> Conv 1x1 (1) -> Clip -> Flatten ->
    MatMul -> Gemm -> y [4, 4]: the operators whose first run in a process loads a GPU library
    (cuDNN's convolutions with a bias, cuBLAS's matrix products), at shapes that make the
    libraries load the kernels the demo models use (which kernels load depends on the shapes; a
    single small convolution without a bias left most of the first run's cost in place)."""
    batch, channels, height, width = LIBRARY_WARM_INPUT
    nodes = []
    initializers = []
    previous, depth = "x", channels
    for index, (out, kernel) in enumerate(((8, 3), (8, 3), (1, 1))):
        weight = np.full((out, depth, kernel, kernel), 0.01, dtype=np.float32)
        initializers += [
            numpy_helper.from_array(weight, f"weight{index}"),
            numpy_helper.from_array(np.zeros(out, dtype=np.float32), f"bias{index}"),
        ]
        nodes.append(
            helper.make_node(
                "Conv",
                [previous, f"weight{index}", f"bias{index}"],
                [f"conv{index}"],
                pads=[kernel // 2] * 4,
            )
        )
        previous, depth = f"conv{index}", out
    initializers += [
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "floor"),
        numpy_helper.from_array(np.full((height * width, 16), 0.01, dtype=np.float32), "project"),
        numpy_helper.from_array(np.full((16, 4), 0.01, dtype=np.float32), "classify"),
        numpy_helper.from_array(np.zeros(4, dtype=np.float32), "offset"),
    ]
    nodes += [
        helper.make_node("Clip", [previous, "floor"], ["clipped"]),
        helper.make_node("Flatten", ["clipped"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "project"], ["projected"]),
        helper.make_node("Gemm", ["projected", "classify", "offset"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "library-warm-up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(LIBRARY_WARM_INPUT))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())
