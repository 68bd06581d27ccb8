"""What a ready work horse runs while it waits (evaluation.ready_horse.warm_up_model): on CUDA a
model whose operators load cuBLAS and cuDNN, so a submission's first run does not (measured on an
H100: docs/benchmarks.md); on CPU the tiny Add. This machine has no GPU: the model is checked and
run here on CPU, its effect on a GPU only measured there."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx

from evaluation.device import device_config
from evaluation.ready_horse import library_warm_model, warm_up_model
from evaluation.runner import create_session
from evaluation.selftest import tiny_model


def test_a_cuda_horse_warms_up_with_convolutions_and_matrix_products_a_cpu_horse_with_the_add():
    cpu = replace(device_config("warm-up-test"), use_cuda=False)
    cuda = replace(cpu, use_cuda=True)

    model, inputs = warm_up_model(cpu)
    assert model == tiny_model() and inputs.shape == (4,)

    model, inputs = warm_up_model(cuda)
    assert model == library_warm_model()
    graph = onnx.load_from_string(model).graph
    assert [n.op_type for n in graph.node].count("Conv") == 3
    assert all(len(n.input) == 3 for n in graph.node if n.op_type == "Conv")  # with a bias
    assert {"MatMul", "Gemm"} <= {n.op_type for n in graph.node}
    declared = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert list(inputs.shape) == declared and declared[0] > 1  # several rows: cuBLAS's gemm


def test_the_library_warm_up_model_is_valid_and_runs_with_the_workers_session_options():
    model = library_warm_model()
    onnx.checker.check_model(onnx.load_from_string(model), full_check=True)
    _, inputs = warm_up_model(replace(device_config("warm-up-test"), use_cuda=True))
    session = create_session(model, replace(device_config("warm-up-test"), use_cuda=False))
    (out,) = session.run(None, {"x": inputs + 1.0})
    assert out.shape == (inputs.shape[0], 4)
    assert np.isfinite(out).all() and (out > 0).all()
