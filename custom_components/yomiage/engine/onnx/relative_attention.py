"""DeBERTa's relative-position attention cut to the buckets a run reads (a load-time rewrite).

Each attention layer of DeBERTa-v2 adds two terms over the relative-position embeddings: the
queries against every bucket's key projection, and the keys against every bucket's query
projection; a GatherElements then picks, for each pair of tokens, the bucket of their distance.
The exported graph holds the projections folded, [heads, buckets, head size] per layer and term
(92 MB for the large model), copies and multiplies them whole on every run, though n tokens fall
in at most 2n - 1 buckets, one run of consecutive ones.

``slice_relative_positions`` stores each term's projections bucket-major, all layers in one
initializer [buckets, layers, heads, head size], so that the buckets a run reads lie together in
the file; each layer takes the rows [lo, hi) of its column, and the bucket indices are shifted
by lo. The products of the buckets read are the same (the full BERT's output bit for bit here;
float rounding where a narrower product takes another kernel), for less work, and the rows
never read never enter memory (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from . import wire
from .wire import Chunks, Graph, Node

REWRITE_VERSION = 1  # bump when the rewrite changes: cached graphs are then rebuilt
_AXES_AS_INPUT_OPSET = 13  # Squeeze and Unsqueeze take their axes as an input from here on
# Ops between the bucket indices' source and the GatherElements that reads them: they move
# values around, never change one, so shifting the source shifts what the gather reads.
_INDEX_CARRIERS = frozenset({"Expand", "Squeeze", "Unsqueeze"})
_SCORES_PERM = [0, 2, 1]  # [heads, buckets, size] -> [heads, size, buckets]: buckets last


@dataclass
class _Term:
    """One attention term: the tensor its bucket indices come from and the folded projection
    each layer tiles (in graph order)."""

    indices: str
    tiles: list[int] = field(default_factory=list)  # node positions
    projections: list[str] = field(default_factory=list)  # initializer names


def slice_relative_positions(model: memoryview) -> Chunks | None:
    """The encoded ModelProto with its relative-position terms cut to the buckets each run
    reads, or None where the graph has no such term."""
    model_fields, graph_field = wire.model_graph(model)
    graph = Graph.parse(wire.as_message(graph_field.value))
    if wire.default_opset(model_fields) < _AXES_AS_INPUT_OPSET or _has_subgraphs(graph):
        return None
    terms = _terms(graph)
    if not terms:
        return None
    return wire.with_graph(model_fields, graph_field, _Emitter(graph, terms).encode())


def _has_subgraphs(graph: Graph) -> bool:
    """Subgraphs read outer names without saying so: the reordering below could not see them."""
    return any(a.graphs for node in graph.nodes.values() for a in node.attributes)


def _terms(graph: Graph) -> list[_Term]:
    producers = {name: position for position, node in graph.nodes.items() for name in node.outputs}
    consumers = graph.consumers()
    found: dict[str, _Term] = {}
    gathers: dict[str, set[int]] = {}
    for position, node in graph.nodes.items():
        match = _match(graph, node, producers, consumers)
        if match is None:
            continue
        indices, tile = match
        term = found.setdefault(indices, _Term(indices))
        term.tiles.append(tile)
        term.projections.append(graph.nodes[tile].inputs[0])
        gathers.setdefault(indices, set()).add(position)
    return [
        term
        for term in found.values()
        if _only_gathers_read(graph, term.indices, gathers[term.indices], consumers)
        and len({tuple(graph.initializers[name].dims) for name in term.projections}) == 1
    ]


def _match(
    graph: Graph, node: Node, producers: dict[str, int], consumers: dict[str, list[int]]
) -> tuple[str, int] | None:
    """(bucket indices' source, Tile position) where ``node`` is GatherElements(MatMul(x,
    Transpose(Tile(projection))), indices) on the bucket axis, over a float projection
    [heads, buckets, size] held in the graph, read by that Tile only, which repeats it along
    its first axis only (the batch)."""
    if node.op_type != "GatherElements" or node.domain or len(node.inputs) != 2:
        return None
    axis = node.attribute("axis")
    if axis is None or axis.i not in (-1, 2):
        return None
    scores = _producer(graph, producers, node.inputs[0], "MatMul")
    turned = _producer(graph, producers, scores.inputs[1], "Transpose") if scores else None
    perm = turned.attribute("perm") if turned else None
    if turned is None or perm is None or perm.ints != _SCORES_PERM:
        return None
    tile = producers.get(turned.inputs[0])
    if tile is None or graph.nodes[tile].op_type != "Tile":
        return None
    projection = graph.initializers.get(graph.nodes[tile].inputs[0])
    if (
        projection is None
        or len(projection.dims) != 3
        or wire.raw_data(projection, wire.TENSOR_FLOAT) is None
        or not _repeats_first_axis_only(graph, producers, graph.nodes[tile].inputs[1])
        or consumers.get(projection.name) != [tile]
        or projection.name in graph.outputs
        or projection.name in graph.inputs  # an old graph's overridable initializer
    ):
        return None
    indices = node.inputs[1]
    while indices in producers and graph.nodes[producers[indices]].op_type in _INDEX_CARRIERS:
        indices = graph.nodes[producers[indices]].inputs[0]
    if indices not in producers:  # a graph input or initializer: nothing to insert after
        return None
    return indices, tile


def _repeats_first_axis_only(graph: Graph, producers: dict[str, int], repeats: str) -> bool:
    """Whether Tile ``repeats`` are [n, 1, 1]: given so, or concatenated from [n] and ones given
    (DeBERTa's export: n from the batch size)."""
    concat = _producer(graph, producers, repeats, "Concat")
    parts = concat.inputs[1:] if concat else [repeats]
    ones = [_int64s(graph, name) for name in parts]
    return ones == [[1]] * len(ones) if concat else (ones[0] or [0])[1:] == [1, 1]


def _int64s(graph: Graph, name: str) -> list[int] | None:
    tensor = graph.initializers.get(name)
    data = wire.raw_data(tensor, wire.TENSOR_INT64) if tensor else None
    return None if data is None else [value for (value,) in struct.iter_unpack("<q", data)]


def _producer(graph: Graph, producers: dict[str, int], name: str, op_type: str) -> Node | None:
    position = producers.get(name)
    if position is None or graph.nodes[position].op_type != op_type:
        return None
    return graph.nodes[position]


def _only_gathers_read(
    graph: Graph, name: str, gathers: set[int], consumers: dict[str, list[int]]
) -> bool:
    """Whether every reader of ``name`` carries it (as data) to the index input of one of
    ``gathers``: then shifting it changes nothing else."""
    if name in graph.outputs:
        return False
    for position in consumers.get(name, []):
        node = graph.nodes[position]
        if position in gathers and node.inputs[0] != name:
            continue  # reads it as its indices
        carried = node.op_type in _INDEX_CARRIERS and node.inputs.count(name) == 1
        if not carried or node.inputs[0] != name:
            return False
        if not _only_gathers_read(graph, node.outputs[0], gathers, consumers):
            return False
    return True


@dataclass(frozen=True)
class _Encoded:
    inputs: list[str]
    outputs: list[str]
    field: bytes | memoryview


class _Emitter:
    """Writes the GraphProto: each term's projections as one bucket-major initializer, its
    bounds after its indices, a slice of its rows before each Tile; nodes in an order that
    computes every input first."""

    def __init__(self, graph: Graph, terms: list[_Term]) -> None:
        self.graph = graph
        self.terms = terms
        self.names = graph.names_in_use()
        self.constants: dict[tuple[int, ...], str] = {}

    def encode(self) -> Chunks:
        out = Chunks()
        before: dict[int, list[_Encoded]] = {}  # by Tile position
        after: dict[str, list[_Encoded]] = {}  # by the indices' name
        shifted: dict[str, str] = {}
        tiled: dict[int, str] = {}
        for term in self.terms:
            stacked = self._fresh(f"{term.indices}/buckets_first")
            out.extend(self._stacked(term, stacked))
            low, high, shifted[term.indices] = self._bounds(term.indices, after)
            for layer, tile in enumerate(term.tiles):
                rows = before.setdefault(tile, [])
                tiled[tile] = self._layer_rows(stacked, layer, low, high, rows)
        replaced = {name for term in self.terms for name in term.projections}
        nodes: list[_Encoded] = []
        for position, item in enumerate(self.graph.items):
            node = self.graph.nodes.get(position)
            if node is None:
                if item.number != wire.GRAPH_INITIALIZER or (
                    wire.parse_tensor(item).name not in replaced
                ):
                    out.add(item.raw)
                continue
            nodes.extend(before.get(position, []))
            inputs = [shifted.get(name, name) for name in node.inputs]
            if position in tiled:
                inputs[0] = tiled[position]
            nodes.append(_Encoded(inputs, node.outputs, wire.with_inputs(node, inputs)))
            for output in node.outputs:
                nodes.extend(after.get(output, []))
        for values, name in sorted(self.constants.items()):
            out.add(wire.int64_tensor(name, list(values)))
        for encoded in _in_dependency_order(nodes):
            out.add(encoded.field)
        return out

    def _stacked(self, term: _Term, name: str) -> Chunks:
        """The term's projections, [heads, buckets, size] each, as one initializer [buckets,
        layers, heads, size]."""
        layers = []
        for projection in term.projections:
            tensor = self.graph.initializers[projection]
            data = wire.raw_data(tensor, wire.TENSOR_FLOAT)
            assert data is not None  # _match checked
            layers.append(np.frombuffer(data, dtype="<f4").reshape(tensor.dims))
        stacked = np.ascontiguousarray(np.stack(layers).transpose(2, 0, 1, 3))
        return wire.raw_float_tensor(name, list(stacked.shape), memoryview(stacked).cast("B"))

    def _bounds(self, indices: str, after: dict[str, list[_Encoded]]) -> tuple[str, str, str]:
        """[lo] and [hi] (one-element int64 tensors) of the buckets ``indices`` hold, and the
        indices less lo."""
        encoded = after.setdefault(indices, [])
        keepdims = wire.int_attribute("keepdims", 0)
        lowest = self._op("ReduceMin", [indices], encoded, keepdims)
        highest = self._op("ReduceMax", [indices], encoded, keepdims)
        low = self._op("Unsqueeze", [lowest, self._const(0)], encoded)
        last = self._op("Unsqueeze", [highest, self._const(0)], encoded)
        high = self._op("Add", [last, self._const(1)], encoded)
        return low, high, self._op("Sub", [indices, lowest], encoded)

    def _layer_rows(
        self, stacked: str, layer: int, low: str, high: str, encoded: list[_Encoded]
    ) -> str:
        """The rows [lo, hi) of one layer's column of ``stacked``, as [heads, rows, size]."""
        axis = wire.int_attribute("axis", 0)
        starts = self._op("Concat", [low, self._const(layer)], encoded, axis)
        ends = self._op("Concat", [high, self._const(layer + 1)], encoded, axis)
        rows = self._op("Slice", [stacked, starts, ends, self._const(0, 1)], encoded)
        column = self._op("Squeeze", [rows, self._const(1)], encoded)
        return self._op("Transpose", [column], encoded, wire.ints_attribute("perm", [1, 0, 2]))

    def _op(
        self, op_type: str, inputs: list[str], encoded: list[_Encoded], *attributes: bytes
    ) -> str:
        output = self._fresh(f"yomiage/relative/{op_type.lower()}")
        name = self._fresh(f"yomiage/relative/{op_type}")
        node = wire.node_field(op_type, inputs, [output], name, attributes=attributes)
        encoded.append(_Encoded(inputs, [output], node))
        return output

    def _const(self, *values: int) -> str:
        if values not in self.constants:
            label = "_".join(str(value) for value in values)
            self.constants[values] = self._fresh(f"yomiage/relative/int_{label}")
        return self.constants[values]

    def _fresh(self, wanted: str) -> str:
        return wire.fresh_name(self.names, wanted)


def _in_dependency_order(nodes: list[_Encoded]) -> Iterator[_Encoded]:
    """``nodes`` in their given order where that computes every input first; a node waits for
    inputs that come later (the slices before the first layer's Tile wait for the bounds)."""
    producer = {name: index for index, node in enumerate(nodes) for name in node.outputs}
    unmet = [0] * len(nodes)
    followers: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        for name in set(node.inputs):
            if name in producer:
                unmet[index] += 1
                followers.setdefault(producer[name], []).append(index)
    queue = [index for index, count in enumerate(unmet) if count == 0]
    heapq.heapify(queue)
    emitted = 0
    while queue:
        index = heapq.heappop(queue)
        emitted += 1
        yield nodes[index]
        for follower in followers.get(index, []):
            unmet[follower] -= 1
            if unmet[follower] == 0:
                heapq.heappush(queue, follower)
    if emitted != len(nodes):
        raise wire.WireError("the graph's nodes form a cycle")
