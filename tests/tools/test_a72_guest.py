"""tools/a72_count/guest.py's parts of a decoder, read here (the guest imports nothing that only
the rootfs has at module level): a part per upsampling, named by its width, whatever the passes
for an aarch64 CPU made of the convolutions inside a stage."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from yomiage_engine.onnx import wire
from yomiage_engine.onnx.passes import vits_minimal_filtering

from tools.a72_count.guest import decoder_labels


def _stage(frame_rate: int, width: int) -> bytes:
    """A frame-rate Conv, a x2 upsampling to ``width`` channels, a kernel-7 Conv at that width."""
    rng = np.random.default_rng(0)
    weights = {
        "pre": rng.standard_normal((frame_rate, frame_rate, 3)).astype(np.float32),
        "up": rng.standard_normal((frame_rate, width, 2)).astype(np.float32),
        "res": rng.standard_normal((width, width, 7)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "pre"], ["a"], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("ConvTranspose", ["a", "up"], ["b"], strides=[2], kernel_shape=[2]),
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


def test_a_stage_in_minimal_filtering_form_stays_one_part() -> None:
    model = _stage(192, 128)
    rewritten = vits_minimal_filtering.minimal_filtering(memoryview(model))
    assert rewritten is not None
    joined = b"".join(bytes(part) for part in rewritten.parts)
    graph = wire.Graph.parse(wire.as_message(wire.model_graph(memoryview(joined))[1].value))
    positions = list(graph.nodes)
    labels = decoder_labels(graph, positions)
    upsampling = next(
        index
        for index, position in enumerate(positions)
        if graph.nodes[position].op_type == "ConvTranspose"
        and graph.initializers[graph.nodes[position].inputs[1]].dims[1] > 1
    )
    assert set(labels[:upsampling]) == {"decoder, frame rate"}
    assert set(labels[upsampling:]) == {"decoder, 128 ch"}
    # both convolutions rewritten: a products' MatMul each
    products = [
        p
        for p in positions
        if graph.nodes[p].op_type == "MatMul" and graph.nodes[p].inputs[1] in graph.initializers
    ]
    assert len(products) == 2
