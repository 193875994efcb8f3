"""Tiny ONNX models written by hand (the runtime venv has no ``onnx`` package), for tests.

Encoded with the engine's own wire helpers; onnxruntime then loads them, which checks the encoding
independently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from custom_components.yomiage.engine.onnx import wire

_NP_TYPES = {np.dtype(np.float32): wire.TENSOR_FLOAT, np.dtype(np.int64): wire.TENSOR_INT64}


def tensor(name: str, array: NDArray[np.generic], *, external: str | None = None) -> bytes:
    """A TensorProto (its payload, not wrapped in a field)."""
    body = wire.ints_field(wire.TENSOR_DIMS, array.shape)
    body += wire.varint_field(wire.TENSOR_DATA_TYPE, _NP_TYPES[array.dtype])
    body += wire.text_field(wire.TENSOR_NAME, name)
    if external is None:
        body += wire.bytes_field(wire.TENSOR_RAW_DATA, array.tobytes())
    else:
        entry = wire.text_field(1, "location") + wire.text_field(2, external)
        body += wire.bytes_field(13, entry)
        body += wire.varint_field(wire.TENSOR_DATA_LOCATION, wire.TENSOR_EXTERNAL)
    return body


def float_attribute(name: str, value: float) -> bytes:
    body = wire.text_field(wire.ATTR_NAME, name) + wire.float_field(2, value)
    body += wire.varint_field(wire.ATTR_TYPE, 1)
    return wire.bytes_field(wire.NODE_ATTRIBUTE, body)


@dataclass
class ModelBuilder:
    opset: int = 17
    nodes: list[bytes] = field(default_factory=list)
    initializers: list[bytes] = field(default_factory=list)
    inputs: list[bytes] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)

    def node(self, op_type: str, inputs: Sequence[str], output: str, *attributes: bytes) -> str:
        self.nodes.append(wire.node_field(op_type, inputs, [output], attributes=attributes))
        return output

    def weight(self, name: str, array: NDArray[np.generic], external: str | None = None) -> str:
        self.initializers.append(
            wire.bytes_field(wire.GRAPH_INITIALIZER, tensor(name, array, external=external))
        )
        return name

    def input(
        self, name: str, shape: Sequence[int | str], elem_type: int = wire.TENSOR_FLOAT
    ) -> str:
        info = wire.value_info(name, elem_type, shape)
        self.inputs.append(wire.bytes_field(wire.GRAPH_INPUT, info))
        return name

    def output(self, name: str, shape: Sequence[int | str]) -> None:
        info = wire.value_info(name, wire.TENSOR_FLOAT, shape)
        self.outputs.append(wire.bytes_field(wire.GRAPH_OUTPUT, info))

    def encode(self) -> bytes:
        graph = b"".join(self.nodes) + wire.text_field(2, "test")
        graph += b"".join(self.initializers + self.inputs + self.outputs)
        opset = wire.text_field(wire.OPSET_DOMAIN, "") + wire.varint_field(
            wire.OPSET_VERSION, self.opset
        )
        model = wire.varint_field(1, 8)  # ir_version
        model += wire.bytes_field(wire.MODEL_OPSET_IMPORT, opset)
        model += wire.bytes_field(wire.MODEL_GRAPH, graph)
        return model


def conv_attributes(
    kernel: int, dilation: int = 1, stride: int = 1, pad: int | None = None
) -> list[bytes]:
    pad = (kernel * dilation - dilation) // 2 if pad is None else pad
    return [
        wire.ints_attribute("kernel_shape", [kernel]),
        wire.ints_attribute("dilations", [dilation]),
        wire.ints_attribute("strides", [stride]),
        wire.ints_attribute("pads", [pad, pad]),
    ]
