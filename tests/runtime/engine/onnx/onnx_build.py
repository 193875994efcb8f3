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

FLOAT = 1
_NP_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): wire.TENSOR_INT64}


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


def value_info(name: str, shape: Sequence[int | str], elem_type: int = FLOAT) -> bytes:
    dims = b"".join(
        wire.bytes_field(
            wire.SHAPE_DIM,
            wire.varint_field(1, d) if isinstance(d, int) else wire.text_field(2, d),
        )
        for d in shape
    )
    tensor_type = wire.varint_field(1, elem_type) + wire.bytes_field(wire.TENSOR_TYPE_SHAPE, dims)
    type_proto = wire.bytes_field(wire.TYPE_TENSOR, tensor_type)
    return wire.text_field(wire.VALUE_INFO_NAME, name) + wire.bytes_field(
        wire.VALUE_INFO_TYPE, type_proto
    )


def float_attribute(name: str, value: float) -> bytes:
    body = wire.text_field(wire.ATTR_NAME, name) + wire.float_field(2, value)
    body += wire.varint_field(wire.ATTR_TYPE, 1)
    return wire.bytes_field(wire.NODE_ATTRIBUTE, body)


def int_attribute(name: str, value: int) -> bytes:
    body = wire.text_field(wire.ATTR_NAME, name) + wire.varint_field(wire.ATTR_I, value)
    body += wire.varint_field(wire.ATTR_TYPE, 2)
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

    def input(self, name: str, shape: Sequence[int | str], elem_type: int = FLOAT) -> str:
        self.inputs.append(wire.bytes_field(wire.GRAPH_INPUT, value_info(name, shape, elem_type)))
        return name

    def output(self, name: str, shape: Sequence[int | str]) -> None:
        self.outputs.append(wire.bytes_field(wire.GRAPH_OUTPUT, value_info(name, shape)))

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
