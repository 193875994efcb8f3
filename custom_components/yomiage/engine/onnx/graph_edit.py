"""Editing a parsed graph: the one toolkit that every load-time pass (passes/) and the cuts of a
synthesizer (decoder_graph.py) write with.

An edit reads a ``wire.Graph``, then is told what changes: new nodes before or after a node, a
node replaced or dropped, a tensor read under another name, initializers added or given other
dims, tensor shapes declared or forgotten. ``encode`` writes the new GraphProto: its nodes in an
order that computes every input first (the original order wherever that holds), the constants
asked for (one pool: the same values give one initializer), and no initializer that nothing
reads any more. What the edit names is ``yomiage/<scope>/...``, never a name already in use.
Weights are never decoded: they are copied as the byte ranges they are.
"""

from __future__ import annotations

import functools
import heapq
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Self, TypeVar

from . import wire
from .wire import Chunks, Graph, Node, Tensor


@dataclass(frozen=True)
class _Written:
    """A node as it goes into the new graph: what it reads and makes, and its encoded field."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    field: bytes | memoryview


@dataclass
class NewNodes:
    """Nodes an edit makes, in the order they compute (``GraphEdit.nodes``)."""

    edit: GraphEdit
    written: list[_Written] = field(default_factory=list)

    def add(
        self,
        op_type: str,
        inputs: Sequence[str],
        *attributes: bytes | memoryview,
        outputs: Sequence[str] = (),
        name: str = "",
        domain: str = "",
        other: Sequence[memoryview] = (),
    ) -> str:
        """Append a node reading ``inputs``; the name of its first output (``outputs``, else
        one new name). Unnamed, the node is named after its op under the edit's scope."""
        made = list(outputs) or [self.edit.new_name(op_type.lower())]
        encoded = wire.node_field(
            op_type,
            inputs,
            made,
            name or self.edit.new_name(op_type),
            domain,
            attributes,
            other,
        )
        self.written.append(_Written(tuple(inputs), tuple(made), encoded))
        return made[0]

    def __bool__(self) -> bool:
        return bool(self.written)


class GraphEdit:
    """The changes one pass makes to ``graph``, written out by ``encode``."""

    def __init__(self, graph: Graph, scope: str) -> None:
        self.graph = graph
        self.scope = scope
        self._names = graph.names_in_use()
        self._before: dict[int, list[_Written]] = {}
        self._after: dict[int, list[_Written]] = {}
        self._replaced: dict[int, list[_Written]] = {}
        self._dropped: set[int] = set()
        self._renamed: dict[str, str] = {}
        self._constants: dict[tuple[int, tuple[int, ...], tuple[float, ...]], str] = {}
        self._added: dict[str, Chunks] = {}  # new initializers by name
        self._retyped: dict[str, list[int]] = {}
        self._declared: dict[str, list[int | str]] = {}
        self._forgotten: set[str] = set()
        self._interface: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self._interface_types: dict[str, int] = {}

    # -- reading ------------------------------------------------------------------------------
    @functools.cached_property
    def producers(self) -> dict[str, int]:
        """The position of the node that makes each name (in the graph as read)."""
        return self.graph.producers()

    @functools.cached_property
    def consumers(self) -> dict[str, list[int]]:
        """The positions of the nodes that read each name (in the graph as read)."""
        return self.graph.consumers()

    def producer(self, name: str) -> Node | None:
        """The node that makes ``name``; None for an input, an initializer or an unknown name."""
        position = self.producers.get(name)
        return None if position is None else self.graph.nodes[position]

    # -- names --------------------------------------------------------------------------------
    def fresh(self, wanted: str) -> str:
        """``wanted``, or it with the first free numeric suffix: a name nothing uses yet."""
        name, suffix = wanted, 1
        while name in self._names:
            suffix += 1
            name = f"{wanted}_{suffix}"
        self._names.add(name)
        return name

    def new_name(self, label: str) -> str:
        """A fresh name under the edit's scope: ``yomiage/<scope>/<label>``."""
        return self.fresh(f"{_scope_prefix(self.scope)}{label}")

    # -- nodes --------------------------------------------------------------------------------
    def nodes(self) -> NewNodes:
        """An empty run of new nodes, to place with ``insert_before``, ``insert_after`` or
        ``replace``."""
        return NewNodes(self)

    def insert_before(self, position: int, nodes: NewNodes) -> None:
        self._before.setdefault(position, []).extend(nodes.written)

    def insert_after(self, position: int, nodes: NewNodes) -> None:
        self._after.setdefault(position, []).extend(nodes.written)

    def replace(self, position: int, nodes: NewNodes) -> None:
        """The node at ``position`` written as ``nodes`` instead (which may re-emit it)."""
        self._replaced.setdefault(position, []).extend(nodes.written)

    def drop(self, position: int) -> None:
        self._dropped.add(position)

    def rename(self, name: str, new: str) -> None:
        """Every node of the graph that reads ``name`` reads ``new`` instead (followed through
        further renames)."""
        if new != name:
            self._renamed[name] = new

    def renamed(self, name: str) -> str:
        """What a node of the graph reads in place of ``name``."""
        while name in self._renamed:
            name = self._renamed[name]
        return name

    def keep_only(
        self,
        positions: set[int],
        inputs: Sequence[str] = (),
        outputs: Sequence[str] = (),
        types: Mapping[str, int] | None = None,
    ) -> None:
        """Cut the graph to the nodes at ``positions``: the graph's inputs that they read and
        outputs that they make stay declared, unless ``inputs`` or ``outputs`` (tensors of any
        shape, float unless ``types`` gives a name its TensorProto element type) replace them."""
        self._dropped.update(set(self.graph.nodes) - positions)
        self._interface = (tuple(inputs), tuple(outputs))
        self._interface_types = dict(types or {})

    # -- constants, initializers and shapes ----------------------------------------------------
    def ints(self, values: Sequence[int], dims: Sequence[int] | None = None) -> str:
        """An int64 initializer of ``values``: a vector, or of shape ``dims`` (() for a
        scalar); the same values and shape are one initializer."""
        shape = (len(values),) if dims is None else tuple(dims)
        key = (wire.TENSOR_INT64, shape, tuple(float(value) for value in values))
        if key not in self._constants:
            label = "_".join(str(value) for value in values).replace("-", "m")
            name = self.new_name(f"int_{label}")
            self._constants[key] = name
            self.add_initializer(name, wire.int64_tensor(name, values, shape))
        return self._constants[key]

    def floats(self, values: Sequence[float], dims: Sequence[int], label: str) -> str:
        """A float32 initializer of ``values`` in shape ``dims``, named after ``label``; the
        same values and shape are one initializer."""
        key = (wire.TENSOR_FLOAT, tuple(dims), tuple(values))
        if key not in self._constants:
            name = self.new_name(label)
            self._constants[key] = name
            self.add_initializer(name, wire.float_tensor(name, dims, values))
        return self._constants[key]

    def add_initializer(self, name: str, encoded: bytes | Chunks) -> None:
        """The initializer ``name`` the pass made (a GraphProto field, as wire's tensor builders
        give it); written where a node reads it."""
        if isinstance(encoded, Chunks):
            self._added[name] = encoded
        else:
            self._added[name] = Chunks()
            self._added[name].add(encoded)

    def retype(self, name: str, dims: Sequence[int]) -> None:
        """The initializer ``name`` declared with ``dims`` (the same data)."""
        self._retyped[name] = list(dims)

    def declare(self, name: str, dims: Sequence[int | str]) -> None:
        """The float tensor ``name`` declared with a shape (numbers or symbols)."""
        self._declared[name] = list(dims)

    def forget_shape(self, name: str) -> None:
        """What the graph declares of tensor ``name``'s shape left out (onnxruntime infers it)."""
        self._forgotten.add(name)

    # -- writing ------------------------------------------------------------------------------
    def encode(self) -> Chunks:
        """The edited GraphProto (see the module docstring)."""
        nodes = list(self._written_nodes())
        read = {name for node in nodes for name in node.inputs}
        for position, original in self.graph.nodes.items():
            if position not in self._dropped:  # a replaced node may be written again
                read.update(wire.subgraph_reads(original))
        made = {name for node in nodes for name in node.outputs}
        out = Chunks()
        for node in _in_dependency_order(nodes):
            out.add(node.field)
        for item in self.graph.items:
            if item.number == wire.GRAPH_INITIALIZER:
                out.extend(self._initializer(wire.parse_tensor(item), read))
            elif item.number != wire.GRAPH_NODE and self._keeps(item, read, made):
                out.add(item.raw)
        for name, initializer in self._added.items():
            if name in read:
                out.extend(initializer)
        for name, dims in self._declared.items():
            out.add(wire.float_value_info(name, dims))
        if self._interface is not None:
            kinds = (wire.GRAPH_INPUT, wire.GRAPH_OUTPUT)
            for number, names in zip(kinds, self._interface, strict=True):
                for name in names:
                    kind = self._interface_types.get(name, wire.TENSOR_FLOAT)
                    out.add(wire.bytes_field(number, wire.value_info(name, kind, None)))
        return out

    def _written_nodes(self) -> Iterator[_Written]:
        for position, node in self.graph.nodes.items():
            yield from self._before.get(position, [])
            if position in self._replaced:
                yield from self._replaced[position]
            elif position not in self._dropped:
                inputs = [self.renamed(name) for name in node.inputs]
                encoded = wire.with_inputs(node, inputs)
                yield _Written(tuple(inputs), tuple(node.outputs), encoded)
            yield from self._after.get(position, [])

    def _initializer(self, tensor: Tensor, read: set[str]) -> Chunks:
        """The initializer as the edit leaves it: retyped, as it is, or gone where nothing reads
        it (an old graph's initializer that is also an input stays: a caller may feed it)."""
        out = Chunks()
        name = tensor.name
        overridable = name in self.graph.inputs and self._interface is None
        if name in read or name in self.graph.outputs or overridable:
            dims = self._retyped.get(name)
            if dims is None:
                out.add(tensor.raw)
            else:
                out.extend(wire.retyped_tensor(tensor, dims))
        return out

    def _keeps(self, item: wire.Field, read: set[str], made: set[str]) -> bool:
        """Whether a declaration (input, output, value_info) or another field stays."""
        if item.number not in (wire.GRAPH_INPUT, wire.GRAPH_OUTPUT, wire.GRAPH_VALUE_INFO):
            return True
        name, _ = wire.value_info_rank(item)
        if item.number == wire.GRAPH_VALUE_INFO:
            restated = name in self._forgotten or name in self._declared
            return not restated and (self._interface is None or name in made)
        if self._interface is None:
            return True
        inputs, outputs = self._interface
        if item.number == wire.GRAPH_INPUT:
            return not inputs and name in read
        return not outputs and name in made


_Parsed = TypeVar("_Parsed", bound=Graph)


@dataclass(frozen=True)
class EditedModel(Generic[_Parsed]):
    """A ModelProto read for a pass: its default opset, its graph as ``parse`` read it, and an
    edit of that graph; ``encode`` writes the model with the edited graph, every other field as
    it was."""

    fields: list[wire.Field]
    graph_field: wire.Field
    opset: int
    graph: _Parsed
    edit: GraphEdit

    def encode(self) -> Chunks:
        return wire.with_graph(self.fields, self.graph_field, self.edit.encode())


def edit_model(
    model: memoryview, scope: str, parse: Callable[[memoryview], _Parsed]
) -> EditedModel[_Parsed]:
    """``model`` read for an edit under ``scope``, its graph read by ``parse``.

    Raises ``WireError`` where it is no ModelProto with a graph and a default opset."""
    model_fields, graph_field = wire.model_graph(model)
    opset = wire.default_opset(model_fields)
    graph = parse(wire.as_message(graph_field.value))
    return EditedModel(model_fields, graph_field, opset, graph, GraphEdit(graph, scope))


def _scope_prefix(scope: str) -> str:
    return f"yomiage/{scope}/"


CONVOLUTIONS = frozenset({"Conv", "ConvTranspose"})
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "LeakyRelu", "Relu", "Tanh", "Sigmoid"})


@dataclass
class RankedGraph(Graph):
    """A graph and its tensors' ranks where they can be told: declared, initializers, and
    through constants, convolutions (their weights') and element-wise operators (their inputs'
    largest), nodes taken in topological order."""

    ranks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, payload: memoryview) -> Self:
        graph = super().parse(payload)
        for name, tensor in graph.initializers.items():
            graph.ranks[name] = len(tensor.dims)
        for declared in (graph.inputs, graph.outputs, graph.value_infos):
            for name, rank in declared.items():
                if rank is not None:
                    graph.ranks.setdefault(name, rank)
        for node in graph.nodes.values():
            graph._infer_rank(node)
        return graph

    def _infer_rank(self, node: Node) -> None:
        rank: int | None = None
        if node.op_type == "Constant":
            value = node.attribute("value")
            rank = len(value.tensor.dims) if value and value.tensor else None
        elif node.op_type in CONVOLUTIONS and len(node.inputs) > 1:
            rank = self.ranks.get(node.inputs[1])
        elif node.op_type in ELEMENTWISE:
            known = [self.ranks.get(name) for name in node.inputs if name]
            rank = max(known) if known and None not in known else None  # type: ignore[type-var]
        if rank is not None and node.outputs:
            self.ranks.setdefault(node.outputs[0], rank)


def is_zero_pad(node: Node, graph: Graph, producers: dict[str, int]) -> bool:
    """Whether ``node`` is a Pad that pads with zeros: constant mode (named, empty or left to its
    default) and no padding value, or a value of 0."""
    if node.op_type != "Pad" or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return False
    mode = node.attribute("mode")
    if mode is not None and mode.s not in (b"", b"constant"):
        return False
    if len(node.inputs) < 3 or not node.inputs[2]:
        return True
    return float_scalar(node.inputs[2], graph, producers) == 0.0


def float_scalar(name: str, graph: Graph, producers: dict[str, int]) -> float | None:
    """The value of ``name`` where it is a one-element float32 constant: an initializer, or what
    a Constant node makes; None otherwise."""
    tensor: Tensor | None = graph.initializers.get(name)
    position = producers.get(name)
    if tensor is None and position is not None and graph.nodes[position].op_type == "Constant":
        value = graph.nodes[position].attribute("value")
        tensor = value.tensor if value is not None else None
    data = wire.raw_data(tensor, wire.TENSOR_FLOAT) if tensor is not None else None
    if data is None or len(data) != 4:
        return None
    (number,) = struct.unpack("<f", data)
    return float(number)


def _in_dependency_order(nodes: list[_Written]) -> Iterator[_Written]:
    """``nodes`` in their given order wherever that computes every input first; a node waits
    for inputs made by a later one.

    Raises ``WireError`` where the nodes depend on each other in a cycle."""
    producer = {name: index for index, node in enumerate(nodes) for name in node.outputs}
    unmet = [0] * len(nodes)
    followers: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        for name in set(node.inputs):
            if name in producer and producer[name] != index:
                unmet[index] += 1
                followers.setdefault(producer[name], []).append(index)
    ready = [index for index, count in enumerate(unmet) if count == 0]
    heapq.heapify(ready)
    emitted = 0
    while ready:
        index = heapq.heappop(ready)
        emitted += 1
        yield nodes[index]
        for follower in followers.get(index, []):
            unmet[follower] -= 1
            if unmet[follower] == 0:
                heapq.heappush(ready, follower)
    if emitted != len(nodes):
        raise wire.WireError("the graph's nodes form a cycle")
