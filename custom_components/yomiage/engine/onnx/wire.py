"""Just enough of the ONNX protobuf wire format to rewrite a graph's structure.

Why not the ``onnx`` package: it would be a run-time dependency (33 MB, 0.25 s to import) and it
decodes every weight into Python memory. Here a model is read through a memory map; weights are
never decoded, only copied as byte ranges, so rewriting a 250 MB synthesizer costs no more memory
than its node list.

Protobuf basics used below: a message is a run of fields, each a varint tag
(``number << 3 | wire type``) then a payload; length-delimited payloads (strings, bytes, nested
messages, packed numbers) are a varint length and the bytes. Field numbers are those of onnx.proto.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Self

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_INT64_MODULUS = 1 << 64

# onnx.proto field numbers
MODEL_OPSET_IMPORT, MODEL_GRAPH, MODEL_METADATA_PROPS = 8, 7, 14
ENTRY_KEY, ENTRY_VALUE = 1, 2
GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_INPUT, GRAPH_OUTPUT, GRAPH_VALUE_INFO = 1, 5, 11, 12, 13
NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE, NODE_ATTRIBUTE, NODE_DOMAIN = 1, 2, 3, 4, 5, 7
ATTR_NAME, ATTR_I, ATTR_S, ATTR_T, ATTR_G, ATTR_INTS = 1, 3, 4, 5, 6, 8
ATTR_GRAPHS, ATTR_TYPE = 11, 20
ATTR_TYPE_INT, ATTR_TYPE_INTS = 2, 7
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_NAME, TENSOR_RAW_DATA, TENSOR_DATA_LOCATION = 1, 2, 8, 9, 14
TENSOR_EXTERNAL_DATA = 13
TENSOR_FLOAT, TENSOR_INT64, TENSOR_BOOL = 1, 7, 9  # TensorProto.DataType
TENSOR_EXTERNAL = 1
VALUE_INFO_NAME, VALUE_INFO_TYPE = 1, 2
TYPE_TENSOR, TENSOR_TYPE_ELEM_TYPE, TENSOR_TYPE_SHAPE, SHAPE_DIM = 1, 1, 2, 1
DIM_VALUE, DIM_PARAM = 1, 2
OPSET_DOMAIN, OPSET_VERSION = 1, 2


class WireError(ValueError):
    """The bytes are not a protobuf message of the expected shape."""


@dataclass(frozen=True)
class Field:
    number: int
    wire: int
    value: int | memoryview  # varint / fixed as int, length-delimited as the payload bytes
    raw: memoryview  # tag and payload: copied unchanged when the field is not rewritten


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def fields(buf: memoryview) -> Iterator[Field]:
    """The fields of one message, in order."""
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = read_varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: int | memoryview
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire == LENGTH:
            length, pos = read_varint(buf, pos)
            if pos + length > len(buf):
                raise WireError(f"field {number} runs past the end of its message")
            value, pos = buf[pos : pos + length], pos + length
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            value, pos = int.from_bytes(buf[pos : pos + size], "little"), pos + size
        else:
            raise WireError(f"unsupported wire type {wire} in field {number}")
        if pos > len(buf) or number == 0:
            raise WireError("malformed field")
        yield Field(number, wire, value, buf[start:pos])


def as_signed(value: int) -> int:
    """A varint read as int64 (negative numbers are ten-byte two's complement)."""
    return value - _INT64_MODULUS if value >= 1 << 63 else value


def as_text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise WireError("expected a string field")
    return bytes(value).decode("utf-8")


def as_message(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise WireError("expected a message field")
    return value


def repeated_ints(found: Sequence[Field]) -> list[int]:
    """Values of a repeated int64 field, whether written packed or one per field."""
    values: list[int] = []
    for item in found:
        if isinstance(item.value, memoryview):
            pos = 0
            while pos < len(item.value):
                number, pos = read_varint(item.value, pos)
                values.append(as_signed(number))
        else:
            values.append(as_signed(item.value))
    return values


# -- encoding ----------------------------------------------------------------------------------
def varint(value: int) -> bytes:
    value %= _INT64_MODULUS  # negative int64 -> two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(number: int, value: int) -> bytes:
    return varint(number << 3 | VARINT) + varint(value)


def float_field(number: int, value: float) -> bytes:
    return varint(number << 3 | FIXED32) + struct.pack("<f", value)


def length_prefix(number: int, size: int) -> bytes:
    return varint(number << 3 | LENGTH) + varint(size)


def bytes_field(number: int, payload: bytes) -> bytes:
    return length_prefix(number, len(payload)) + payload


def text_field(number: int, text: str) -> bytes:
    return bytes_field(number, text.encode("utf-8"))


def ints_field(number: int, values: Sequence[int]) -> bytes:
    """A repeated int64, unpacked (proto2's default, which every reader accepts)."""
    return b"".join(varint_field(number, value) for value in values)


@dataclass
class Chunks:
    """Pieces of an encoded message, kept as views so that weights are never copied in memory."""

    parts: list[bytes | memoryview] = field(default_factory=list)
    size: int = 0

    def add(self, part: bytes | memoryview) -> None:
        self.parts.append(part)
        self.size += len(part)

    def extend(self, other: Chunks) -> None:
        self.parts.extend(other.parts)
        self.size += other.size

    def as_field(self, number: int) -> Chunks:
        """These chunks as the payload of a length-delimited field."""
        wrapped = Chunks()
        wrapped.add(length_prefix(number, self.size))
        wrapped.extend(self)
        return wrapped


def with_graph(model_fields: list[Field], graph_field: Field, graph: Chunks) -> Chunks:
    """The model whose fields are ``model_fields`` with ``graph`` in place of ``graph_field``;
    every other field (opsets, metadata) copied as it is."""
    out = Chunks()
    for item in model_fields:
        if item is graph_field:
            out.extend(graph.as_field(MODEL_GRAPH))
        else:
            out.add(item.raw)
    return out


def rewrite_file(
    source: Path, target: Path, rewrite: Callable[[memoryview], Chunks | None]
) -> bool:
    """Write the model ``rewrite`` makes of ``source`` (read through a memory map) to
    ``target``; False, writing nothing, where it leaves the model as it is (returns None).

    Raises ``WireError`` when ``source`` is not a protobuf message of the expected shape.
    """
    rewritten = rewrite(mapped(source))
    if rewritten is None:
        return False
    write_model(rewritten, target)
    return True


def write_model(model: Chunks, target: Path) -> None:
    """The encoded model's pieces, one after the other, as the file ``target``."""
    with target.open("wb") as out:
        out.writelines(model.parts)


def write_external(source: Path, target: Path, data_name: str, min_bytes: int) -> bool:
    """Write the model ``source`` to ``target`` with the raw data of every graph initializer of
    ``min_bytes`` or more moved to the file ``data_name`` beside it (ONNX's external data), each
    starting on a page, so that whoever loads it can map the data rather than copy it; False,
    writing nothing, where no initializer is that large.

    Raises ``WireError`` when ``source`` is not a protobuf message of the expected shape."""
    model_fields, graph_field = model_graph(mapped(source))
    graph, moved = Chunks(), 0
    data_file = target.parent / data_name
    with data_file.open("wb") as data:
        for item in fields(as_message(graph_field.value)):
            tensor = None
            if item.number == GRAPH_INITIALIZER:
                tensor = _moved_out(as_message(item.value), data, data_name, min_bytes)
            graph.add(item.raw if tensor is None else bytes_field(GRAPH_INITIALIZER, tensor))
            moved += tensor is not None
    if not moved:
        data_file.unlink()
        return False
    write_model(with_graph(model_fields, graph_field, graph), target)
    return True


def _moved_out(tensor: memoryview, data: BinaryIO, data_name: str, min_bytes: int) -> bytes | None:
    """The TensorProto ``tensor`` with its raw data appended to ``data`` at the next page and
    referred to there; None (nothing written) where it has less raw data than ``min_bytes``."""
    parts = list(fields(tensor))
    raw = next((part.value for part in parts if part.number == TENSOR_RAW_DATA), None)
    if not isinstance(raw, memoryview) or len(raw) < min_bytes:
        return None
    offset = -(-data.tell() // mmap.PAGESIZE) * mmap.PAGESIZE
    data.write(bytes(offset - data.tell()))
    data.write(raw)
    where = {"location": data_name, "offset": str(offset), "length": str(len(raw))}
    kept = (p.raw for p in parts if p.number not in (TENSOR_RAW_DATA, TENSOR_DATA_LOCATION))
    return (
        b"".join(kept)
        + b"".join(
            bytes_field(TENSOR_EXTERNAL_DATA, text_field(ENTRY_KEY, k) + text_field(ENTRY_VALUE, v))
            for k, v in where.items()
        )
        + varint_field(TENSOR_DATA_LOCATION, TENSOR_EXTERNAL)
    )


def mapped(source: Path) -> memoryview:
    """The bytes of ``source`` through a read-only memory map (pages read as they are used).

    Raises ``WireError`` for an empty file."""
    with source.open("rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            raise WireError("empty file")
        # Not closed by hand: views into it live until they are garbage; unmapped then.
        return memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))


Shape = tuple[int | None, ...]  # a declared tensor shape: each axis' size, None where symbolic


@dataclass(frozen=True)
class Interface:
    """What a model declares to its users, read without its weights: inputs and outputs
    (name -> shape, None without one), its metadata (key -> value), and its nodes' positions
    (parsed only by who asks, ``nodes``)."""

    inputs: dict[str, Shape | None]
    outputs: dict[str, Shape | None]
    metadata: dict[str, str]
    initializer_dims: dict[str, tuple[int, ...]]
    node_fields: list[Field]

    def nodes(self, op_type: str) -> Iterator[Node]:
        """The nodes of one op type, parsed as they are met."""
        wanted = op_type.encode()
        for item in self.node_fields:
            if wanted in bytes(item.value):  # cheap filter before the full parse
                node = parse_node(item)
                if node.op_type == op_type:
                    yield node


def read_interface(source: Path) -> Interface:
    """The ``Interface`` of a model file; ``WireError`` where it is not a ModelProto."""
    model_fields, graph_field = model_graph(mapped(source))
    declared: dict[int, dict[str, Shape | None]] = {GRAPH_INPUT: {}, GRAPH_OUTPUT: {}}
    initializers: dict[str, tuple[int, ...]] = {}
    nodes: list[Field] = []
    for item in fields(as_message(graph_field.value)):
        if item.number in declared:
            name, shape = value_info_shape(item)
            declared[item.number][name] = shape
        elif item.number == GRAPH_INITIALIZER:
            tensor = parse_tensor(item)
            initializers[tensor.name] = tuple(tensor.dims)
        elif item.number == GRAPH_NODE:
            nodes.append(item)
    metadata: dict[str, str] = {}
    for item in model_fields:
        if item.number == MODEL_METADATA_PROPS:
            entry = {part.number: as_text(part.value) for part in fields(as_message(item.value))}
            metadata[entry.get(ENTRY_KEY, "")] = entry.get(ENTRY_VALUE, "")
    # Old exporters list initializers among the inputs too: those are not fed.
    inputs = {k: v for k, v in declared[GRAPH_INPUT].items() if k not in initializers}
    return Interface(inputs, declared[GRAPH_OUTPUT], metadata, initializers, nodes)


def model_graph(model: memoryview) -> tuple[list[Field], Field]:
    """A ModelProto's fields and the one that holds its graph."""
    model_fields = list(fields(model))
    graph_field = next((f for f in model_fields if f.number == MODEL_GRAPH), None)
    if graph_field is None:
        raise WireError("no graph in the model")
    return model_fields, graph_field


def read_graph(model: memoryview) -> Graph:
    """A ModelProto's graph, parsed (where its other fields are not written back)."""
    return Graph.parse(as_message(model_graph(model)[1].value))


# -- the few ONNX messages the graph code reads -------------------------------------------------
@dataclass(frozen=True)
class Attribute:
    name: str
    i: int | None  # the ``i`` field (an int attribute such as ``group``)
    ints: list[int]  # the ``ints`` field (empty for other attribute types)
    s: bytes  # the ``s`` field (a string attribute such as Pad's ``mode``; empty for others)
    tensor: Tensor | None  # the ``t`` field (a Constant node's value)
    graphs: list[memoryview]  # subgraphs (``g`` and ``graphs``)
    raw: memoryview  # the whole encoded attribute field


@dataclass(frozen=True)
class Node:
    inputs: list[str]
    outputs: list[str]
    name: str
    op_type: str
    domain: str
    attributes: list[Attribute]
    other: list[memoryview]  # encoded fields the rewrite does not interpret (doc_string, ...)
    raw: memoryview  # the whole encoded node field

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)

    def first_int(self, name: str, default: int) -> int:
        """The first of the ints attribute ``name`` (a 1-D convolution's stride, dilation...),
        ``default`` where it is absent or empty."""
        attribute = self.attribute(name)
        return attribute.ints[0] if attribute is not None and attribute.ints else default


@dataclass(frozen=True)
class Tensor:
    """An initializer: its name and shape; the data stays in ``raw``."""

    name: str
    dims: list[int]
    external: bool
    raw: memoryview


@dataclass
class Graph:
    """A GraphProto read for rewriting: every field in order, nodes by their position among
    them, initializers by name, and what each input, output and value_info declares (name ->
    rank, None without a shape)."""

    items: list[Field]
    nodes: dict[int, Node]
    initializers: dict[str, Tensor]
    inputs: dict[str, int | None]
    outputs: dict[str, int | None]
    value_infos: dict[str, int | None]

    @classmethod
    def parse(cls, payload: memoryview) -> Self:
        graph = cls(list(fields(payload)), {}, {}, {}, {}, {})
        declared = {
            GRAPH_INPUT: graph.inputs,
            GRAPH_OUTPUT: graph.outputs,
            GRAPH_VALUE_INFO: graph.value_infos,
        }
        for position, item in enumerate(graph.items):
            if item.number == GRAPH_NODE:
                graph.nodes[position] = parse_node(item)
            elif item.number == GRAPH_INITIALIZER:
                tensor = parse_tensor(item)
                graph.initializers[tensor.name] = tensor
            elif item.number in declared:
                name, rank = value_info_rank(item)
                declared[item.number][name] = rank
        return graph

    def names_in_use(self) -> set[str]:
        """Every tensor name the graph uses: what a new name must not be."""
        names = {name for node in self.nodes.values() for name in node.inputs + node.outputs}
        names.update(self.initializers, self.inputs, self.outputs, self.value_infos)
        return names

    def consumers(self) -> dict[str, list[int]]:
        """The positions of the nodes that read each name."""
        found: dict[str, list[int]] = {}
        for position, node in self.nodes.items():
            for name in node.inputs:
                found.setdefault(name, []).append(position)
        return found

    def producers(self) -> dict[str, int]:
        """The position of the node that makes each name."""
        return {name: position for position, node in self.nodes.items() for name in node.outputs}


def node_reads(node: Node) -> list[str]:
    """What ``node`` reads: its inputs and what its subgraphs read (``subgraph_reads``)."""
    return [*node.inputs, *subgraph_reads(node)]


def subgraph_reads(node: Node) -> list[str]:
    """Every name the subgraphs of ``node`` (an If's branches, a Loop's body, and theirs) read or
    hand back: they may take any tensor of the graph around them by name without declaring it
    (names made inside them too: more names than that is harmless to every caller)."""
    names: list[str] = []
    for attribute in node.attributes:
        for body in attribute.graphs:
            branch = Graph.parse(body)
            for inner in branch.nodes.values():
                names.extend(node_reads(inner))
            names.extend(branch.outputs)
    return names


def with_inputs(node: Node, inputs: list[str]) -> bytes | memoryview:
    """``node`` as a GraphProto field reading ``inputs`` (its own bytes where they are its
    inputs already)."""
    if inputs == node.inputs:
        return node.raw
    attributes = [attribute.raw for attribute in node.attributes]
    return node_field(
        node.op_type, inputs, node.outputs, node.name, node.domain, attributes, node.other
    )


def default_opset(model_fields: list[Field]) -> int:
    """The version of the default (ai.onnx) operator set a ModelProto imports."""
    for item in model_fields:
        if item.number != MODEL_OPSET_IMPORT:
            continue
        domain, version = "", 0
        for part in fields(as_message(item.value)):
            if part.number == OPSET_DOMAIN:
                domain = as_text(part.value)
            elif part.number == OPSET_VERSION and isinstance(part.value, int):
                version = part.value
        if domain in ("", "ai.onnx"):
            return version
    raise WireError("the model imports no default-domain opset")


def parse_node(item: Field) -> Node:
    inputs: list[str] = []
    outputs: list[str] = []
    name = op_type = domain = ""
    attributes: list[Attribute] = []
    other: list[memoryview] = []
    for part in fields(as_message(item.value)):
        if part.number == NODE_INPUT:
            inputs.append(as_text(part.value))
        elif part.number == NODE_OUTPUT:
            outputs.append(as_text(part.value))
        elif part.number == NODE_NAME:
            name = as_text(part.value)
        elif part.number == NODE_OP_TYPE:
            op_type = as_text(part.value)
        elif part.number == NODE_DOMAIN:
            domain = as_text(part.value)
        elif part.number == NODE_ATTRIBUTE:
            attributes.append(parse_attribute(part))
        else:
            other.append(part.raw)
    return Node(inputs, outputs, name, op_type, domain, attributes, other, item.raw)


def parse_attribute(item: Field) -> Attribute:
    name = ""
    i: int | None = None
    ints: list[Field] = []
    s = b""
    tensor: Tensor | None = None
    graphs: list[memoryview] = []
    for part in fields(as_message(item.value)):
        if part.number == ATTR_NAME:
            name = as_text(part.value)
        elif part.number == ATTR_I and isinstance(part.value, int):
            i = as_signed(part.value)
        elif part.number == ATTR_INTS:
            ints.append(part)
        elif part.number == ATTR_S:
            s = bytes(as_message(part.value))
        elif part.number == ATTR_T:
            tensor = parse_tensor(part)
        elif part.number in (ATTR_G, ATTR_GRAPHS):
            graphs.append(as_message(part.value))
    return Attribute(name, i, repeated_ints(ints), s, tensor, graphs, item.raw)


def parse_tensor(item: Field) -> Tensor:
    name = ""
    dims: list[Field] = []
    external = False
    for part in fields(as_message(item.value)):
        if part.number == TENSOR_NAME:
            name = as_text(part.value)
        elif part.number == TENSOR_DIMS:
            dims.append(part)
        elif part.number == TENSOR_DATA_LOCATION:
            external = part.value == TENSOR_EXTERNAL
    return Tensor(name, repeated_ints(dims), external, item.raw)


def raw_data(tensor: Tensor, elem_type: int) -> memoryview | None:
    """The bytes of an initializer of ``elem_type`` stored in the graph as raw data; None for
    another type or storage (typed fields, an external file)."""
    found_type, data = None, None
    for part in fields(_payload(tensor.raw)):
        if part.number == TENSOR_DATA_TYPE:
            found_type = part.value
        elif part.number == TENSOR_RAW_DATA and isinstance(part.value, memoryview):
            data = part.value
    if found_type != elem_type or tensor.external:
        return None
    return data


def value_info_rank(item: Field) -> tuple[str, int | None]:
    """Name and rank of a ValueInfoProto (None when it declares no shape)."""
    name, shape = value_info_shape(item)
    return name, None if shape is None else len(shape)


def value_info_shape(item: Field) -> tuple[str, Shape | None]:
    """Name and shape of a ValueInfoProto (None when it declares no shape)."""
    name = ""
    shape: Shape | None = None
    for part in fields(as_message(item.value)):
        if part.number == VALUE_INFO_NAME:
            name = as_text(part.value)
        elif part.number == VALUE_INFO_TYPE:
            shape = _tensor_type_shape(as_message(part.value))
    return name, shape


def _tensor_type_shape(type_proto: memoryview) -> Shape | None:
    for part in fields(type_proto):
        if part.number != TYPE_TENSOR:
            continue
        for tensor_part in fields(as_message(part.value)):
            if tensor_part.number == TENSOR_TYPE_SHAPE:
                return tuple(
                    _dim_size(as_message(dim.value))
                    for dim in fields(as_message(tensor_part.value))
                    if dim.number == SHAPE_DIM
                )
    return None


def _dim_size(dim: memoryview) -> int | None:
    """A Dimension's fixed size; None where it is a symbol or left open (some tools write -1,
    a varint of 2**64 - 1 here, for a size they do not know)."""
    size = next((int(part.value) for part in fields(dim) if part.number == DIM_VALUE), None)
    return size if size is not None and 0 < size < 1 << 63 else None


def retyped_tensor(tensor: Tensor, dims: Sequence[int]) -> Chunks:
    """``tensor`` (a GraphProto initializer field) with new dims; its data bytes are reused."""
    body = Chunks()
    body.add(ints_field(TENSOR_DIMS, dims))
    for part in fields(_payload(tensor.raw)):
        if part.number != TENSOR_DIMS:
            body.add(part.raw)
    return body.as_field(GRAPH_INITIALIZER)


def int64_tensor(name: str, values: Sequence[int], dims: Sequence[int] | None = None) -> bytes:
    """A small int64 initializer as a GraphProto field: a vector, or of shape ``dims`` (() for a
    scalar)."""
    body = ints_field(TENSOR_DIMS, [len(values)] if dims is None else dims)
    body += varint_field(TENSOR_DATA_TYPE, TENSOR_INT64)
    body += text_field(TENSOR_NAME, name)
    body += bytes_field(TENSOR_RAW_DATA, struct.pack(f"<{len(values)}q", *values))
    return bytes_field(GRAPH_INITIALIZER, body)


def float_tensor(name: str, dims: Sequence[int], values: Sequence[float]) -> bytes:
    """A small float32 initializer as a GraphProto field."""
    body = ints_field(TENSOR_DIMS, dims)
    body += varint_field(TENSOR_DATA_TYPE, TENSOR_FLOAT)
    body += text_field(TENSOR_NAME, name)
    body += bytes_field(TENSOR_RAW_DATA, struct.pack(f"<{len(values)}f", *values))
    return bytes_field(GRAPH_INITIALIZER, body)


def raw_float_tensor(name: str, dims: Sequence[int], *data: memoryview) -> Chunks:
    """A float32 initializer of any size as a GraphProto field, its bytes ``data`` one piece
    after the other; they are not copied."""
    body = Chunks()
    body.add(ints_field(TENSOR_DIMS, dims))
    body.add(varint_field(TENSOR_DATA_TYPE, TENSOR_FLOAT))
    body.add(text_field(TENSOR_NAME, name))
    body.add(length_prefix(TENSOR_RAW_DATA, sum(len(piece) for piece in data)))
    for piece in data:
        body.add(piece)
    return body.as_field(GRAPH_INITIALIZER)


def value_info(name: str, elem_type: int, dims: Sequence[int | str] | None) -> bytes:
    """A ValueInfoProto payload: a tensor of ``elem_type`` with fixed or symbolic dimensions
    (None: its shape left open)."""
    tensor_type = varint_field(TENSOR_TYPE_ELEM_TYPE, elem_type)
    if dims is not None:
        shape = b"".join(
            bytes_field(
                SHAPE_DIM,
                varint_field(DIM_VALUE, dim)
                if isinstance(dim, int)
                else text_field(DIM_PARAM, dim),
            )
            for dim in dims
        )
        tensor_type += bytes_field(TENSOR_TYPE_SHAPE, shape)
    body = text_field(VALUE_INFO_NAME, name)
    return body + bytes_field(VALUE_INFO_TYPE, bytes_field(TYPE_TENSOR, tensor_type))


def float_value_info(name: str, dims: Sequence[int | str]) -> bytes:
    """A GraphProto value_info field declaring a float tensor's shape (numbers or symbols)."""
    return bytes_field(GRAPH_VALUE_INFO, value_info(name, TENSOR_FLOAT, dims))


def int_attribute(name: str, value: int) -> bytes:
    body = text_field(ATTR_NAME, name) + varint_field(ATTR_I, value)
    body += varint_field(ATTR_TYPE, ATTR_TYPE_INT)
    return bytes_field(NODE_ATTRIBUTE, body)


def ints_attribute(name: str, values: Sequence[int]) -> bytes:
    body = text_field(ATTR_NAME, name) + ints_field(ATTR_INTS, values)
    body += varint_field(ATTR_TYPE, ATTR_TYPE_INTS)
    return bytes_field(NODE_ATTRIBUTE, body)


def node_field(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str = "",
    domain: str = "",
    attributes: Sequence[bytes | memoryview] = (),
    other: Sequence[memoryview] = (),
) -> bytes:
    """A NodeProto as a GraphProto field. ``attributes`` are encoded NodeProto attribute fields."""
    body = b"".join(text_field(NODE_INPUT, value) for value in inputs)
    body += b"".join(text_field(NODE_OUTPUT, value) for value in outputs)
    if name:
        body += text_field(NODE_NAME, name)
    body += text_field(NODE_OP_TYPE, op_type)
    if domain:
        body += text_field(NODE_DOMAIN, domain)
    body += b"".join(bytes(part) for part in attributes)
    body += b"".join(bytes(part) for part in other)
    return bytes_field(GRAPH_NODE, body)


def _payload(raw: memoryview) -> memoryview:
    """The payload of one encoded length-delimited field."""
    _, pos = read_varint(raw, 0)
    length, pos = read_varint(raw, pos)
    return raw[pos : pos + length]
