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

import struct
from dataclasses import dataclass, field

import numpy as np

from .. import wire
from ..graph_edit import GraphEdit, NewNodes, edit_model
from ..wire import Chunks, Graph, Node

SCOPE = "position_buckets"
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
    edited = edit_model(model, SCOPE, Graph.parse)
    if edited.opset < _AXES_AS_INPUT_OPSET or _has_subgraphs(edited.graph):
        return None
    terms = _terms(edited.edit)
    if not terms:
        return None
    for term in terms:
        _cut_to_buckets_read(edited.edit, term)
    return edited.encode()


def _has_subgraphs(graph: Graph) -> bool:
    """Subgraphs read outer names without saying so: the reordering below could not see them."""
    return any(a.graphs for node in graph.nodes.values() for a in node.attributes)


def _terms(edit: GraphEdit) -> list[_Term]:
    graph, producers, consumers = edit.graph, edit.producers, edit.consumers
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


def _cut_to_buckets_read(edit: GraphEdit, term: _Term) -> None:
    """The term's projections as one bucket-major initializer, its bounds computed after its
    indices, and a slice of each layer's rows read by the layer's Tile (the edit orders the
    nodes: the first layer's slices wait for the bounds)."""
    stacked = edit.new_name("buckets_first")
    edit.add_initializer(stacked, _stacked(edit.graph, term, stacked))
    bounds = edit.nodes()
    low, high, shifted = _bounds(edit, term.indices, bounds)
    edit.insert_after(edit.producers[term.indices], bounds)
    edit.rename(term.indices, shifted)
    for layer, tile in enumerate(term.tiles):
        rows = edit.nodes()
        layer_rows = _layer_rows(edit, stacked, layer, low, high, rows)
        node = edit.graph.nodes[tile]
        inputs = [layer_rows, *(edit.renamed(name) for name in node.inputs[1:])]
        rows.add(
            node.op_type,
            inputs,
            *(attribute.raw for attribute in node.attributes),
            outputs=node.outputs,
            name=node.name,
            domain=node.domain,
            other=node.other,
        )
        edit.replace(tile, rows)


def _stacked(graph: Graph, term: _Term, name: str) -> Chunks:
    """The term's projections, [heads, buckets, size] each, as one initializer [buckets,
    layers, heads, size]."""
    layers = []
    for projection in term.projections:
        tensor = graph.initializers[projection]
        data = wire.raw_data(tensor, wire.TENSOR_FLOAT)
        assert data is not None  # _match checked
        layers.append(np.frombuffer(data, dtype="<f4").reshape(tensor.dims))
    stacked = np.ascontiguousarray(np.stack(layers).transpose(2, 0, 1, 3))
    return wire.raw_float_tensor(name, list(stacked.shape), memoryview(stacked).cast("B"))


def _bounds(edit: GraphEdit, indices: str, nodes: NewNodes) -> tuple[str, str, str]:
    """[lo] and [hi] (one-element int64 tensors) of the buckets ``indices`` hold, and the
    indices less lo."""
    keepdims = wire.int_attribute("keepdims", 0)
    lowest = nodes.add("ReduceMin", [indices], keepdims)
    highest = nodes.add("ReduceMax", [indices], keepdims)
    low = nodes.add("Unsqueeze", [lowest, edit.ints([0])])
    last = nodes.add("Unsqueeze", [highest, edit.ints([0])])
    high = nodes.add("Add", [last, edit.ints([1])])
    return low, high, nodes.add("Sub", [indices, lowest])


def _layer_rows(
    edit: GraphEdit, stacked: str, layer: int, low: str, high: str, nodes: NewNodes
) -> str:
    """The rows [lo, hi) of one layer's column of ``stacked``, as [heads, rows, size]."""
    axis = wire.int_attribute("axis", 0)
    starts = nodes.add("Concat", [low, edit.ints([layer])], axis)
    ends = nodes.add("Concat", [high, edit.ints([layer + 1])], axis)
    rows = nodes.add("Slice", [stacked, starts, ends, edit.ints([0, 1])])
    column = nodes.add("Squeeze", [rows, edit.ints([1])])
    return nodes.add("Transpose", [column], wire.ints_attribute("perm", [1, 0, 2]))
