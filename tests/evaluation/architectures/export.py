"""Make the architecture fixtures: thirteen torchvision networks with random weights, exported by
both of PyTorch's ONNX exporters at a symbolic batch size, their weights' data stripped.

Static costs need shapes, not weights, so each fixture keeps every tensor's name, type and dims,
and the data only of tensors of up to ``KEEP_ELEMENTS`` elements (shape constants, which shape
inference reads); ``tests/evaluation/test_architecture_costs.py`` checks their MACs against
torchvision's published ``_ops``, and fills the stripped tensors with zeros to run them.

PyTorch is a tool for making the fixtures, never a dependency of the project. In a virtual
environment of its own (the CPU build of torch and the torchvision of the same release)::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0+cpu torchvision==0.28.0 onnx onnxscript
    /tmp/torchvenv/bin/python tests/evaluation/architectures/export.py

Nothing is downloaded: the models are built with random weights (``weights=None``); the
published figures are read from the weights' metadata, which ships inside torchvision.
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import torch

# torchvision's compiled operators (nms, qnms) need the CUDA build of torch; none of these
# networks uses them, so declaring their schemas lets torchvision's Python models import.
_torchvision_ops = torch.library.Library("torchvision", "DEF")
for _name in ("nms", "qnms"):
    _torchvision_ops.define(f"{_name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

import torchvision.models as tvm  # noqa: E402
import torchvision.models.segmentation as tvs  # noqa: E402

HERE = Path(__file__).parent
KEEP_ELEMENTS = 64
OPSET_LEGACY = 17
# name: (builder, weights enum member whose metadata holds the published figures, input side)
ARCHITECTURES = {
    "resnet18": (tvm.resnet18, tvm.ResNet18_Weights.IMAGENET1K_V1, 224),
    "resnet50": (tvm.resnet50, tvm.ResNet50_Weights.IMAGENET1K_V1, 224),
    "mobilenet_v3_small": (tvm.mobilenet_v3_small, tvm.MobileNet_V3_Small_Weights.DEFAULT, 224),
    "mobilenet_v3_large": (
        tvm.mobilenet_v3_large,
        tvm.MobileNet_V3_Large_Weights.IMAGENET1K_V1,
        224,
    ),
    "efficientnet_b0": (tvm.efficientnet_b0, tvm.EfficientNet_B0_Weights.DEFAULT, 224),
    "convnext_tiny": (tvm.convnext_tiny, tvm.ConvNeXt_Tiny_Weights.DEFAULT, 224),
    "regnet_y_400mf": (tvm.regnet_y_400mf, tvm.RegNet_Y_400MF_Weights.IMAGENET1K_V1, 224),
    "shufflenet_v2_x1_0": (tvm.shufflenet_v2_x1_0, tvm.ShuffleNet_V2_X1_0_Weights.DEFAULT, 224),
    "squeezenet1_1": (tvm.squeezenet1_1, tvm.SqueezeNet1_1_Weights.DEFAULT, 224),
    "densenet121": (tvm.densenet121, tvm.DenseNet121_Weights.DEFAULT, 224),
    "swin_t": (tvm.swin_t, tvm.Swin_T_Weights.DEFAULT, 224),
    "vit_b_16": (tvm.vit_b_16, tvm.ViT_B_16_Weights.IMAGENET1K_V1, 224),
    "lraspp_mobilenet_v3_large": (
        tvs.lraspp_mobilenet_v3_large,
        tvs.LRASPP_MobileNet_V3_Large_Weights.DEFAULT,
        520,
    ),
}


def strip(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the data of every tensor over KEEP_ELEMENTS elements removed, dims kept."""

    def stripped(tensor: onnx.TensorProto) -> onnx.TensorProto:
        count = 1
        for d in tensor.dims:
            count *= d
        if count <= KEEP_ELEMENTS:
            return tensor
        return onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)

    def graph(g: onnx.GraphProto) -> None:
        kept = [stripped(t) for t in g.initializer]
        del g.initializer[:]
        g.initializer.extend(kept)
        for node in g.node:
            node.doc_string = ""  # the exporters' source locations: size, not shape
            del node.metadata_props[:]
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    attr.t.CopyFrom(stripped(attr.t))
                elif attr.type == onnx.AttributeProto.GRAPH:
                    graph(attr.g)

    graph(model.graph)
    model.doc_string = ""
    del model.metadata_props[:]
    for function in model.functions:
        for node in function.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    attr.t.CopyFrom(stripped(attr.t))
    return model


def export(name: str, exporter: str) -> Path:
    build, _, side = ARCHITECTURES[name]
    torch.manual_seed(0)
    # weights_backbone=None: random weights for the backbone too (its default downloads them)
    kwargs = {"num_classes": 21, "weights_backbone": None} if name.startswith("lraspp") else {}
    model = build(weights=None, **kwargs).eval()
    # A batch of 2: torch.export specialises a dimension whose example is 1.
    x = torch.randn(2, 3, side, side)
    target = HERE / f"{name}.{exporter}.onnx"
    scratch = HERE / f"{name}.{exporter}.full.onnx"
    if exporter == "legacy":
        torch.onnx.export(
            model,
            (x,),
            str(scratch),
            dynamo=False,
            opset_version=OPSET_LEGACY,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
        )
    else:
        batch = torch.export.Dim("batch", max=1024)
        program = torch.onnx.export(
            model,
            (x,),
            dynamo=True,
            input_names=["input"],
            output_names=["output"],
            dynamic_shapes=({0: batch},),
        )
        program.save(str(scratch), external_data=False)
    full = onnx.load(str(scratch))
    scratch.unlink()
    onnx.save(strip(full), str(target))
    return target


def published(name: str) -> tuple[float, int]:
    """torchvision's published GMACs (``_ops``) and parameters of the network's weights."""
    meta = ARCHITECTURES[name][1].meta
    return meta["_ops"], meta["num_params"]


def main(names: list[str]) -> None:
    for name in names or list(ARCHITECTURES):
        for exporter in ("legacy", "dynamo"):
            path = export(name, exporter)
            print(f"{path.name}: {path.stat().st_size:,} bytes; published {published(name)}")


if __name__ == "__main__":
    main(sys.argv[1:])
