"""Thirteen real architectures, each exported by both of PyTorch's ONNX exporters: their MACs
equal torchvision's published figures, whatever the exporter, and are complete.

The fixtures are the exported graphs with their weights' data stripped (``architectures/export.py``
says how they were made); costs need only shapes. torchvision's ``_ops`` counts the
multiply-accumulates of convolutions, linear layers and matrix products at batch 1 and the
weights' own input size, printed to three decimals of GMACs: the table below is that figure, as
torchvision publishes it, and docs/participants.md shows the same table.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from evaluation.costs import StaticCosts, static_costs
from evaluation.profiled_shapes import costs_from_run
from tests.builders import data_dependent_matmul

FIXTURES = Path(__file__).parent / "architectures"
EXPORTERS = ("legacy", "dynamo")  # torch.onnx.export(dynamo=False, opset 17), and dynamo=True

# name: (input side, torchvision's published GMACs, torchvision's published parameters)
PUBLISHED = {
    "resnet18": (224, 1.814, 11_689_512),
    "resnet50": (224, 4.089, 25_557_032),
    "mobilenet_v3_small": (224, 0.057, 2_542_856),
    "mobilenet_v3_large": (224, 0.217, 5_483_032),
    "efficientnet_b0": (224, 0.386, 5_288_548),
    "convnext_tiny": (224, 4.456, 28_589_128),
    "regnet_y_400mf": (224, 0.402, 4_344_144),
    "shufflenet_v2_x1_0": (224, 0.145, 2_278_604),
    "squeezenet1_1": (224, 0.349, 1_235_496),
    "densenet121": (224, 2.834, 7_978_856),
    "swin_t": (224, 4.491, 28_288_354),
    "vit_b_16": (224, 17.564, 86_567_656),
    "lraspp_mobilenet_v3_large": (520, 2.086, 3_221_538),  # 21 classes, at 520 x 520
}


def fixture(name: str, exporter: str) -> onnx.ModelProto:
    return onnx.load(str(FIXTURES / f"{name}.{exporter}.onnx"))


def inferred_costs(name: str, exporter: str, batch: int = 1) -> StaticCosts:
    side = PUBLISHED[name][0]
    return static_costs(fixture(name, exporter), (batch, 3, side, side))


def with_zero_weights(model: onnx.ModelProto) -> bytes:
    """The stripped fixture made runnable: every tensor without data filled with zeros."""
    for tensor in model.graph.initializer:
        if not tensor.raw_data and not tensor.int64_data and not tensor.float_data:
            dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
            tensor.CopyFrom(
                numpy_helper.from_array(np.zeros(tuple(tensor.dims), dtype), tensor.name)
            )
    return bytes(model.SerializeToString())


def portal_costs(name: str, exporter: str, batch: int = 1) -> StaticCosts:
    """What the portal stores: inspection's costs, completed by a worker's run at the batch
    shape where they are incomplete (``workers.jobs``)."""
    costs = inferred_costs(name, exporter, batch)
    if costs.complete:
        return costs
    side = PUBLISHED[name][0]
    batch_input = np.zeros((batch, 3, side, side), np.float32)
    return costs_from_run(with_zero_weights(fixture(name, exporter)), batch_input)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_macs_of_a_real_architecture_equal_torchvisions_published_figure(
    name: str, exporter: str
) -> None:
    _, gmacs, params = PUBLISHED[name]
    costs = portal_costs(name, exporter)
    assert costs.complete, costs.not_counted
    assert round(costs.macs / 1e9, 3) == gmacs
    # Parameters differ by what the exporters fold (BatchNorm into Conv, constants) and keep.
    assert costs.parameters == pytest.approx(params, rel=0.011)


# Exports whose MAC-bearing shapes onnx's shape inference cannot tell, even with data
# propagation: a channel shuffle's Reshape computed through a Div (ShuffleNetV2's old export), a
# Range on the batch size (ConvNeXt-T's and Swin-T's new exports), window padding through
# ScatterND (Swin-T's old export), attention heads reshaped to a computed shape (ViT-B/16's old
# export). Their upload shows a lower bound until a worker's run completes it.
NEED_A_RUN = {
    ("shufflenet_v2_x1_0", "legacy"),
    ("convnext_tiny", "dynamo"),
    ("swin_t", "dynamo"),
    ("swin_t", "legacy"),
    ("vit_b_16", "legacy"),
}


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_inference_alone_is_complete_or_says_it_is_not(name: str, exporter: str) -> None:
    costs = inferred_costs(name, exporter)
    assert costs.complete == ((name, exporter) not in NEED_A_RUN)
    if not costs.complete:
        assert costs.incomplete_reason.endswith(" left out, shape or operator unknown")
        assert costs.macs < portal_costs(name, exporter).macs


@pytest.mark.parametrize("name", ["shufflenet_v2_x1_0", "swin_t", "convnext_tiny", "vit_b_16"])
def test_both_exporters_give_the_same_macs_at_the_tasks_batch_shape(name: str) -> None:
    """The networks whose old export lost shapes to plain shape inference (a channel shuffle's
    Reshape through a Div, attention's MatMuls, a Range on the batch size), at batch 8."""
    legacy, dynamo = portal_costs(name, "legacy", batch=8), portal_costs(name, "dynamo", batch=8)
    assert legacy.complete and dynamo.complete
    assert legacy.macs == dynamo.macs == 8 * portal_costs(name, "dynamo").macs


def test_the_shapes_a_run_observes_give_the_same_costs_as_inference() -> None:
    model_bytes = with_zero_weights(fixture("resnet50", "legacy"))
    observed = costs_from_run(model_bytes, np.zeros((2, 3, 224, 224), np.float32))
    inferred = inferred_costs("resnet50", "legacy", batch=2)
    assert observed.shapes_from == "run" and inferred.shapes_from == "inference"
    assert observed == dataclasses.replace(inferred, shapes_from="run")


def test_a_matmul_whose_shape_only_a_run_can_tell_is_incomplete_until_one_does() -> None:
    model = onnx.load_from_string(data_dependent_matmul())
    inferred = static_costs(model, (16, 1, 8, 8))
    assert not inferred.complete
    assert inferred.incomplete_reason == "MatMul × 1 left out, shape or operator unknown"
    assert inferred.macs == 16 * 64 * 10  # the part it could count

    batch = np.zeros((16, 1, 8, 8), np.float32)
    batch[:5, 0, 0, 0] = 1.0  # five rows with a positive pixel: the side MatMul is [5, 1] x [1, 10]
    observed = costs_from_run(bytes(model.SerializeToString()), batch)
    assert observed.complete and observed.shapes_from == "run"
    assert observed.macs == 16 * 64 * 10 + 5 * 10
