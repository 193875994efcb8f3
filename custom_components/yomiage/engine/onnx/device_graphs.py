"""Two tiny ONNX graphs the device path needs, encoded without the ``onnx`` package.

``spread_graph``: BERT's batch output ``hidden`` float32 [B, T, H] and a phone -> row index
``index`` int64 [P] (row = sentence * T + token) give the synthesizer's ``bert`` input
float32 [1, H, P]. It is ``np.repeat(features, word2ph, axis=0).T`` done where the features
already are, so on CUDA they never travel back to the host between BERT and the synthesizer.

``probe_graph``: ``y = x * x`` over float32 [N], enough to prove that a provider really runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import wire

OPSET = 17  # Unsqueeze takes its axes as an input from opset 13 on
IR_VERSION = 8  # the IR version that goes with opset 17

# onnx.proto fields not named in onnx_wire
MODEL_IR_VERSION, MODEL_PRODUCER = 1, 2
GRAPH_NAME = 2

SPREAD_INPUTS = ("hidden", "index")
SPREAD_OUTPUT = "bert"
PROBE_INPUT, PROBE_OUTPUT = "x", "y"


def spread_graph() -> bytes:
    """The serialised ModelProto of the spread graph (see the module docstring)."""
    hidden, index = SPREAD_INPUTS
    nodes = [
        wire.node_field("Flatten", [hidden], ["rows"], attributes=[wire.int_attribute("axis", 2)]),
        wire.node_field(
            "Gather", ["rows", index], ["picked"], attributes=[wire.int_attribute("axis", 0)]
        ),
        wire.node_field(
            "Transpose", ["picked"], ["spread"], attributes=[wire.ints_attribute("perm", [1, 0])]
        ),
        wire.node_field("Unsqueeze", ["spread", "batch_axis"], [SPREAD_OUTPUT]),
    ]
    return model(
        "spread_over_phones",
        nodes,
        inputs=[
            wire.value_info(hidden, wire.TENSOR_FLOAT, ["sentences", "tokens", "hidden_size"]),
            wire.value_info(index, wire.TENSOR_INT64, ["phones"]),
        ],
        outputs=[wire.value_info(SPREAD_OUTPUT, wire.TENSOR_FLOAT, [1, "hidden_size", "phones"])],
        initializers=[wire.int64_tensor("batch_axis", [0])],
    )


def probe_graph() -> bytes:
    """The serialised ModelProto of ``y = x * x``."""
    return model(
        "probe",
        [wire.node_field("Mul", [PROBE_INPUT, PROBE_INPUT], [PROBE_OUTPUT])],
        inputs=[wire.value_info(PROBE_INPUT, wire.TENSOR_FLOAT, ["n"])],
        outputs=[wire.value_info(PROBE_OUTPUT, wire.TENSOR_FLOAT, ["n"])],
    )


# -- encoding ----------------------------------------------------------------------------------
def model(
    name: str,
    nodes: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    initializers: Sequence[bytes] = (),
) -> bytes:
    """A ModelProto with one graph; ``nodes`` and ``initializers`` are encoded GraphProto fields,
    ``inputs`` and ``outputs`` encoded ValueInfoProto payloads."""
    graph = b"".join(nodes) + wire.text_field(GRAPH_NAME, name) + b"".join(initializers)
    graph += b"".join(wire.bytes_field(wire.GRAPH_INPUT, item) for item in inputs)
    graph += b"".join(wire.bytes_field(wire.GRAPH_OUTPUT, item) for item in outputs)
    opset = wire.text_field(wire.OPSET_DOMAIN, "") + wire.varint_field(wire.OPSET_VERSION, OPSET)
    return (
        wire.varint_field(MODEL_IR_VERSION, IR_VERSION)
        + wire.text_field(MODEL_PRODUCER, "yomiage")
        + wire.bytes_field(wire.MODEL_GRAPH, graph)
        + wire.bytes_field(wire.MODEL_OPSET_IMPORT, opset)
    )
