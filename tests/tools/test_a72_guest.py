"""tools/a72_count/guest.py's parts of a decoder, read here (the guest imports nothing that only
the rootfs has at module level): a part per upsampling, named by its width, whatever the passes
for an aarch64 CPU made of the convolutions inside a stage and of the upsamplings."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from yomiage_engine.onnx import wire
from yomiage_engine.onnx.passes import vits_minimal_filtering

from tools.a72_count.guest import decoder_labels


def _stage(frame_rate: int, width: int, up_kernel: int) -> bytes:
    """A frame-rate Conv, a x2 upsampling to ``width`` channels (kernel ``up_kernel``), a
    kernel-7 Conv at that width."""
    rng = np.random.default_rng(0)
    weights = {
        "pre": rng.standard_normal((frame_rate, frame_rate, 3)).astype(np.float32),
        "up": rng.standard_normal((frame_rate, width, up_kernel)).astype(np.float32),
        "res": rng.standard_normal((width, width, 7)).astype(np.float32),
    }
    pad = (up_kernel - 2) // 2
    nodes = [
        helper.make_node("Conv", ["x", "pre"], ["a"], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("LeakyRelu", ["a"], ["a2"], alpha=0.1),
        helper.make_node(
            "ConvTranspose",
            ["a2", "up"],
            ["b"],
            strides=[2],
            kernel_shape=[up_kernel],
            pads=[pad, pad],
        ),
        helper.make_node("Conv", ["b", "res"], ["y"], pads=[3, 3], kernel_shape=[7]),
    ]
    graph = helper.make_graph(
        nodes,
        "stage",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, frame_rate, "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width, "T2"])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return onnx.helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]
    ).SerializeToString()


def _graph(model: bytes) -> wire.Graph:
    return wire.read_graph(memoryview(model))


@pytest.mark.parametrize("up_kernel", [2, 4], ids=["upsampling as published", "rewritten"])
def test_a_stage_in_minimal_filtering_form_stays_one_part(up_kernel: int) -> None:
    """The stage's convolutions in minimal filtering form, and its upsampling as well where its
    kernel is twice its stride: the part of 128 channels starts where the upsampling reads its
    input, the frame-rate one holds only what comes before."""
    model = _stage(192, 128, up_kernel)
    rewritten = vits_minimal_filtering.minimal_filtering(memoryview(model))
    assert rewritten is not None
    graph = _graph(b"".join(bytes(part) for part in rewritten.parts))
    positions = list(graph.nodes)
    labels = decoder_labels(_graph(model))(graph, positions)
    upsampling = next(
        index for index, position in enumerate(positions) if "a2" in graph.nodes[position].inputs
    )
    assert set(labels[:upsampling]) == {"decoder, frame rate"}
    assert set(labels[upsampling:]) == {"decoder, 128 ch"}
    ops = [graph.nodes[p].op_type for p in positions]
    assert ops[upsampling - 1] == "LeakyRelu"
    assert ("ConvTranspose" in ops) == (up_kernel == 2)
    # every convolution rewritten but a published upsampling: a products' MatMul each
    products = [
        p
        for p in positions
        if graph.nodes[p].op_type == "MatMul" and graph.nodes[p].inputs[1] in graph.initializers
    ]
    assert len(products) == (2 if up_kernel == 2 else 3)
