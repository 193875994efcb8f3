"""VITS's relative-position self-attention cut to the offsets that have embeddings (a load-time
rewrite of the graphs the published exporters write).

Style-Bert-VITS2's attention, and so every graph its lineage exports (hayakoe's exporter,
Style-Bert-VITS2's converter, AIVMX files), learns embeddings for the 2w + 1 offsets of the
window only, but pads them with zeros to all 2T - 1 offsets of a T-long sequence: the queries
are multiplied with every one of them ([.., T, 2T - 1], twice the content product's arithmetic)
and the product is moved to absolute positions by padding and reshaping [T, 2T] matrices; the
attention weights go the opposite way, over 2T - 1 offsets, before they meet the value
embeddings. Outside the window every one of those terms is a product with zeros; in the flow,
which attends over every frame of a sentence, that work grows with the square of its length
(docs/PERFORMANCE.md).

``band_relative_attention`` keeps the products with the 2w + 1 embeddings:
- keys: R = Q E_k^T [.., T, 2w + 1], moved to absolute positions by one skew: each row padded
  with T zeros to T + 2w + 1, the rows read as one run, cut to T (T + 2w), read back as rows of
  T + 2w, from which columns w .. w + T hold R[i, j - i + w] inside the window and zeros outside;
- values: the weights inside the window gathered into [.., T, 2w + 1] (by the index i T + j of
  key j, zero where j falls outside the sequence), then multiplied with E_v.
The products of the same numbers: the outputs agree with the graph as published to float
rounding. A graph whose attention already has this shape (Yomiage's own exporter) has no
zero-padded embedding and is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .. import wire
from ..graph_edit import GraphEdit, NewNodes, edit_model, is_zero_pad
from ..wire import Chunks, Graph, Node

SCOPE = "attention_band"
_MIN_OPSET = 13  # Unsqueeze with its axes as an input; Pad (11) and Range (11) with inputs
_RESHUFFLES = frozenset({"Pad", "Reshape", "Slice"})  # what moves a product between layouts
# Between an embedding table and the product that reads it: its zero padding to 2T - 1 offsets,
# the offsets a length reads, a batch axis, and (keys) the transpose.
_EMBEDDING_PATH = frozenset({"Pad", "Slice", "Unsqueeze", "Transpose"})
_LENGTH_AXIS = 2  # of [batch, heads, T, .] (queries and attention weights)


@dataclass(frozen=True)
class _Term:
    """One relative term of one attention layer: the product the rewrite replaces, what it
    reads, and the nodes that only served it."""

    kind: Literal["keys", "values"]
    source: str  # keys: the scaled queries [b, h, T, d]; values: the weights [b, h, T, T]
    embedding: str  # the initializer [heads or 1, 2w + 1, d]
    window: int  # w
    result: str  # the tensor the term's nodes end in ([b, h, T, T] keys; [b, h, T, d] values)
    place: int  # position of the node to emit the new nodes before
    dropped: frozenset[int]  # positions of the nodes the new ones replace


def band_relative_attention(model: memoryview) -> Chunks | None:
    """The encoded ModelProto with each zero-padded relative term computed on its band only, or
    None where the graph has none."""
    edited = edit_model(model, SCOPE, Graph.parse)
    if edited.opset < _MIN_OPSET:
        return None
    terms = _Finder(edited.edit).terms()
    if not terms or not _Band(edited.edit, terms).write():
        return None
    return edited.encode()


class _Finder:
    def __init__(self, edit: GraphEdit) -> None:
        self.graph = edit.graph
        self.producers = edit.producers
        self.consumers = edit.consumers

    def terms(self) -> list[_Term]:
        found = (self._term(at, node) for at, node in self.graph.nodes.items())
        return [term for term in found if term is not None]

    def _term(self, at: int, node: Node) -> _Term | None:
        """The relative term whose product is MatMul ``node``: its second factor is a padded
        embedding table (transposed for the keys); the keys' product then goes to absolute
        positions through pads, reshapes and slices into an Add, the values' first factor comes
        from the weights through them."""
        if node.op_type != "MatMul" or node.domain or len(node.inputs) != 2:
            return None
        embedding = self._padded_embedding(node.inputs[1])
        if embedding is None:
            return None
        table, path = embedding
        dims = self.graph.initializers[table].dims
        window = (dims[1] - 1) // 2
        if any(self.graph.nodes[step].op_type == "Transpose" for step in path):
            chain = self._chain_after(node.outputs[0])
            if chain is None:
                return None
            result, steps, add = chain
            return _Term("keys", node.inputs[0], table, window, result, add, steps | path | {at})
        found = self._chain_before(node.inputs[0])
        if found is None:
            return None
        weights, steps = found
        return _Term("values", weights, table, window, node.outputs[0], at, steps | path | {at})

    def _padded_embedding(self, name: str) -> tuple[str, frozenset[int]] | None:
        """The float initializer [heads, 2w + 1, d] that ``name`` is made from by zero padding
        (and slicing, a batch axis, a transpose), with the nodes on the way; None otherwise."""
        path: set[int] = set()
        padded = False
        while name not in self.graph.initializers:
            at = self.producers.get(name)
            if at is None or self._read_elsewhere(name):
                return None
            node = self.graph.nodes[at]
            if node.op_type not in _EMBEDDING_PATH or node.domain:
                return None
            padded |= is_zero_pad(node, self.graph, self.producers)
            path.add(at)
            name = node.inputs[0]
        tensor = self.graph.initializers[name]
        if (
            not padded
            or len(tensor.dims) != 3
            or tensor.dims[1] % 2 == 0
            or wire.raw_data(tensor, wire.TENSOR_FLOAT) is None
            or name in self.graph.inputs  # an old graph's overridable initializer
        ):
            return None
        return name, frozenset(path)

    def _chain_after(self, name: str) -> tuple[str, frozenset[int], int] | None:
        """From the keys' product on: the pads, reshapes and slices it passes alone, the name
        they end in and the position of the Add that reads it; None if it goes elsewhere."""
        steps: list[int] = []
        while True:
            readers = self._readers(name)
            if len(readers) != 1 or name in self.graph.outputs:
                return None
            node = self.graph.nodes[readers[0]]
            if node.op_type not in _RESHUFFLES or node.domain or node.inputs[0] != name:
                break
            steps.append(readers[0])
            name = node.outputs[0]
        if node.op_type != "Add" or not _reshuffled(self.graph, self.producers, steps):
            return None
        return name, frozenset(steps), readers[0]

    def _chain_before(self, name: str) -> tuple[str, frozenset[int]] | None:
        """Back from the values' first factor: the pads, reshapes and slices that made it from
        the attention weights alone, and the weights' name."""
        steps: list[int] = []
        while True:
            at = self.producers.get(name)
            if at is None or self.graph.nodes[at].op_type not in _RESHUFFLES:
                break
            if self._read_elsewhere(name) or self.graph.nodes[at].domain:
                return None
            steps.append(at)
            name = self.graph.nodes[at].inputs[0]
        if not _reshuffled(self.graph, self.producers, steps):
            return None
        return name, frozenset(steps)

    def _readers(self, name: str) -> list[int]:
        """The nodes that read the values of ``name``: its Shape nodes only serve the layout
        moves the band replaces, and fall with them (``_Emitter`` checks that they do)."""
        readers = self.consumers.get(name, [])
        return [at for at in readers if self.graph.nodes[at].op_type != "Shape"]

    def _read_elsewhere(self, name: str) -> bool:
        """Whether ``name`` is read by more than one node or is an output: then the node that
        makes it must stay."""
        return len(self._readers(name)) != 1 or name in self.graph.outputs


def _reshuffled(graph: Graph, producers: dict[str, int], steps: list[int]) -> bool:
    """Whether ``steps`` pad with zeros, reshape and slice (each at least once): the move
    between relative and absolute positions, not some other use of a product."""
    nodes = [graph.nodes[at] for at in steps]
    pads_zeros = all(is_zero_pad(node, graph, producers) for node in nodes if node.op_type == "Pad")
    return pads_zeros and {node.op_type for node in nodes} == _RESHUFFLES


class _Band:
    """Tells the edit each term's band nodes (before the node that reads its result) and the
    nodes they replace, with those that then feed nothing."""

    def __init__(self, edit: GraphEdit, terms: list[_Term]) -> None:
        self.edit = edit
        self.graph = edit.graph
        self.terms = terms
        self.reads = {at: wire.node_reads(node) for at, node in self.graph.nodes.items()}

    def write(self) -> bool:
        """False, telling the edit nothing, where something besides the layout moves reads what
        they made."""
        placed: dict[int, NewNodes] = {}
        renamed: dict[str, str] = {}
        dropped: set[int] = set()
        for term in self.terms:
            nodes = placed.setdefault(term.place, self.edit.nodes())
            band = self._keys(term, nodes) if term.kind == "keys" else self._values(term, nodes)
            renamed[term.result] = band
            dropped |= term.dropped
        kept = self._live(dropped, renamed)
        gone = {name for at in dropped for name in self.graph.nodes[at].outputs} - set(renamed)
        if any(not gone.isdisjoint(self.reads[at]) for at in kept):
            return False
        for place, nodes in placed.items():
            self.edit.insert_before(place, nodes)
        for position in set(self.graph.nodes) - kept:
            self.edit.drop(position)
        for name, band in renamed.items():
            self.edit.rename(name, band)
        return True

    def _live(self, dropped: set[int], renamed: dict[str, str]) -> set[int]:
        """The nodes that still feed an output once ``dropped`` are gone and the band's nodes
        read the queries and weights (the shape arithmetic of the padded terms falls away)."""
        needed = set(self.graph.outputs) | {term.source for term in self.terms}
        kept: set[int] = set()
        for position in sorted(self.graph.nodes, reverse=True):  # a graph's nodes are in order
            node = self.graph.nodes[position]
            if position in dropped or needed.isdisjoint(node.outputs):
                continue
            kept.add(position)
            needed.update(renamed.get(name, name) for name in self.reads[position])
        return kept

    # -- the band ---------------------------------------------------------------------------
    def _keys(self, term: _Term, nodes: NewNodes) -> str:
        """[b, h, T, T]: R[i, j - i + w] inside the window, zeros outside (the skew above)."""
        w, ints = term.window, self.edit.ints
        turned = nodes.add("Transpose", [term.embedding], wire.ints_attribute("perm", [0, 2, 1]))
        by_offset = nodes.add("MatMul", [term.source, turned])  # [b, h, T, 2w + 1]
        # T read off the product, not the queries: a Shape of the queries would keep the
        # exporter's scaling and transpose of them alive, which onnxruntime otherwise folds
        # into this product.
        length = self._length(by_offset, nodes)
        pads = nodes.add("Concat", [ints([0] * 7), length], _axis0())
        padded = nodes.add("Pad", [by_offset, pads])  # rows of T + 2w + 1
        flat = nodes.add("Reshape", [padded, ints([0, 0, -1])])
        row = nodes.add("Add", [length, ints([2 * w])])
        kept = nodes.add("Mul", [length, row])  # T (T + 2w)
        cut = nodes.add("Slice", [flat, ints([0]), kept, ints([2])])
        rows = nodes.add("Concat", [ints([0, 0]), length, ints([-1])], _axis0())
        skewed = nodes.add("Reshape", [cut, rows])  # [b, h, T, T + 2w]
        end = nodes.add("Add", [length, ints([w])])
        return nodes.add("Slice", [skewed, ints([w]), end, ints([3])])

    def _values(self, term: _Term, nodes: NewNodes) -> str:
        """[b, h, T, d]: the weights of keys i - w .. i + w (zero outside the sequence) times
        the value embeddings."""
        w, ints = term.window, self.edit.ints
        length = self._length(term.source, nodes)
        scalar = nodes.add("Squeeze", [length, ints([0])])
        queries = nodes.add("Range", [ints([0], ()), scalar, ints([1], ())])
        column = nodes.add("Unsqueeze", [queries, ints([1])])  # [T, 1]
        keys = nodes.add("Add", [column, ints(list(range(-w, w + 1)))])  # [T, 2w + 1]
        last = nodes.add("Sub", [length, ints([1])])
        inside = nodes.add("Max", [nodes.add("Min", [keys, last]), ints([0])])
        row_start = nodes.add("Mul", [column, length])
        index = nodes.add("Add", [row_start, inside])  # i T + j, [T, 2w + 1]
        present = nodes.add("Equal", [keys, inside])
        valid = nodes.add("Cast", [present], wire.int_attribute("to", wire.TENSOR_FLOAT))
        flat = nodes.add("Reshape", [term.source, ints([0, 0, -1])])  # [b, h, T T]
        near = nodes.add("Gather", [flat, index], wire.int_attribute("axis", 2))
        weights = nodes.add("Mul", [near, valid])  # [b, h, T, 2w + 1]
        return nodes.add("MatMul", [weights, term.embedding])

    def _length(self, tensor: str, nodes: NewNodes) -> str:
        """[T] (int64, one element): axis 2 of ``tensor``."""
        shape = nodes.add("Shape", [tensor])
        return nodes.add("Gather", [shape, self.edit.ints([_LENGTH_AXIS])], _axis0())


def _axis0() -> bytes:
    return wire.int_attribute("axis", 0)
