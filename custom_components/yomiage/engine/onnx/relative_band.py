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

from . import wire
from .wire import Chunks, Graph, Node

REWRITE_VERSION = 2  # bump when the rewrite changes: cached graphs are then rebuilt
_MIN_OPSET = 13  # Unsqueeze with its axes as an input; Pad (11) and Range (11) with inputs
_RESHUFFLES = frozenset({"Pad", "Reshape", "Slice"})  # what moves a product between layouts
# Between an embedding table and the product that reads it: its zero padding to 2T - 1 offsets,
# the offsets a length reads, a batch axis, and (keys) the transpose.
_EMBEDDING_PATH = frozenset({"Pad", "Slice", "Unsqueeze", "Transpose"})
_LENGTH_AXIS = 2  # of [batch, heads, T, .] (queries and attention weights)
_FLOAT = 1  # TensorProto.FLOAT, for Cast


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
    model_fields, graph_field = wire.model_graph(model)
    if wire.default_opset(model_fields) < _MIN_OPSET:
        return None
    graph = Graph.parse(wire.as_message(graph_field.value))
    terms = _Finder(graph).terms()
    if not terms:
        return None
    encoded = _Emitter(graph, terms).encode()
    return None if encoded is None else wire.with_graph(model_fields, graph_field, encoded)


class _Finder:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = {name: at for at, node in graph.nodes.items() for name in node.outputs}
        self.consumers = graph.consumers()

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
            padded |= node.op_type == "Pad" and _zero_padding(node)
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
        if node.op_type != "Add" or not _reshuffled(self.graph, steps):
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
        if not _reshuffled(self.graph, steps):
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


def _zero_padding(node: Node) -> bool:
    """Whether Pad ``node`` pads with zeros (constant mode, no value given)."""
    mode = node.attribute("mode")
    constant = mode is None or mode.s == b"constant"
    return constant and (len(node.inputs) < 3 or not node.inputs[2])


def _reshuffled(graph: Graph, steps: list[int]) -> bool:
    """Whether ``steps`` pad with zeros, reshape and slice (each at least once): the move
    between relative and absolute positions, not some other use of a product."""
    nodes = [graph.nodes[at] for at in steps]
    pads_zeros = all(_zero_padding(node) for node in nodes if node.op_type == "Pad")
    return pads_zeros and {node.op_type for node in nodes} == _RESHUFFLES


class _Emitter:
    """Writes the GraphProto: each term's band nodes before the node that reads its result,
    without the nodes it replaced and those that then feed nothing."""

    def __init__(self, graph: Graph, terms: list[_Term]) -> None:
        self.graph = graph
        self.terms = terms
        self.names = graph.names_in_use()
        self.int_constants: dict[tuple[tuple[int, ...], tuple[int, ...]], str] = {}
        self.reads = {at: wire.node_reads(node) for at, node in graph.nodes.items()}

    def encode(self) -> Chunks | None:
        before: dict[int, list[bytes]] = {}  # new nodes, by the position they go before
        renamed: dict[str, str] = {}
        dropped: set[int] = set()
        for term in self.terms:
            nodes = before.setdefault(term.place, [])
            band = self._keys(term, nodes) if term.kind == "keys" else self._values(term, nodes)
            renamed[term.result] = band
            dropped |= term.dropped
        kept = self._live(dropped, renamed)
        gone = {name for at in dropped for name in self.graph.nodes[at].outputs} - set(renamed)
        if any(not gone.isdisjoint(self.reads[at]) for at in kept):
            return None  # something besides the layout moves reads what they made
        read = {renamed.get(name, name) for at in kept for name in self.reads[at]}
        read |= {name for term in self.terms for name in (term.source, term.embedding)}
        read |= set(self.graph.outputs)
        out = Chunks()
        for position, item in enumerate(self.graph.items):
            node = self.graph.nodes.get(position)
            if node is None:
                if item.number != wire.GRAPH_INITIALIZER or wire.parse_tensor(item).name in read:
                    out.add(item.raw)
                continue
            for field in before.get(position, []):
                out.add(field)
            if position in kept:
                out.add(wire.with_inputs(node, [renamed.get(name, name) for name in node.inputs]))
        for (dims, values), name in sorted(self.int_constants.items()):
            out.add(wire.int64_tensor(name, values, dims))
        return out

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
    def _keys(self, term: _Term, nodes: list[bytes]) -> str:
        """[b, h, T, T]: R[i, j - i + w] inside the window, zeros outside (the skew above)."""
        w = term.window
        turned = self._op(
            "Transpose", [term.embedding], nodes, wire.ints_attribute("perm", [0, 2, 1])
        )
        by_offset = self._op("MatMul", [term.source, turned], nodes)  # [b, h, T, 2w + 1]
        # T read off the product, not the queries: a Shape of the queries would keep the
        # exporter's scaling and transpose of them alive, which onnxruntime otherwise folds
        # into this product.
        length = self._length(by_offset, nodes)
        pads = self._op("Concat", [self._ints([0] * 7), length], nodes, _axis0())
        padded = self._op("Pad", [by_offset, pads], nodes)  # rows of T + 2w + 1
        flat = self._op("Reshape", [padded, self._ints([0, 0, -1])], nodes)
        row = self._op("Add", [length, self._ints([2 * w])], nodes)
        kept = self._op("Mul", [length, row], nodes)  # T (T + 2w)
        cut = self._op("Slice", [flat, self._ints([0]), kept, self._ints([2])], nodes)
        rows = self._op("Concat", [self._ints([0, 0]), length, self._ints([-1])], nodes, _axis0())
        skewed = self._op("Reshape", [cut, rows], nodes)  # [b, h, T, T + 2w]
        end = self._op("Add", [length, self._ints([w])], nodes)
        return self._op("Slice", [skewed, self._ints([w]), end, self._ints([3])], nodes)

    def _values(self, term: _Term, nodes: list[bytes]) -> str:
        """[b, h, T, d]: the weights of keys i - w .. i + w (zero outside the sequence) times
        the value embeddings."""
        w = term.window
        length = self._length(term.source, nodes)
        scalar = self._op("Squeeze", [length, self._ints([0])], nodes)
        queries = self._op("Range", [self._scalar(0), scalar, self._scalar(1)], nodes)
        column = self._op("Unsqueeze", [queries, self._ints([1])], nodes)  # [T, 1]
        keys = self._op("Add", [column, self._ints(list(range(-w, w + 1)))], nodes)  # [T, 2w+1]
        last = self._op("Sub", [length, self._ints([1])], nodes)
        inside = self._op("Max", [self._op("Min", [keys, last], nodes), self._ints([0])], nodes)
        row_start = self._op("Mul", [column, length], nodes)
        index = self._op("Add", [row_start, inside], nodes)  # i T + j, [T, 2w + 1]
        present = self._op("Equal", [keys, inside], nodes)
        valid = self._op("Cast", [present], nodes, wire.int_attribute("to", _FLOAT))
        flat = self._op("Reshape", [term.source, self._ints([0, 0, -1])], nodes)  # [b, h, T T]
        near = self._op("Gather", [flat, index], nodes, wire.int_attribute("axis", 2))
        weights = self._op("Mul", [near, valid], nodes)  # [b, h, T, 2w + 1]
        return self._op("MatMul", [weights, term.embedding], nodes)

    def _length(self, tensor: str, nodes: list[bytes]) -> str:
        """[T] (int64, one element): axis 2 of ``tensor``."""
        shape = self._op("Shape", [tensor], nodes)
        return self._op("Gather", [shape, self._ints([_LENGTH_AXIS])], nodes, _axis0())

    def _op(self, op_type: str, inputs: list[str], nodes: list[bytes], *attributes: bytes) -> str:
        output = wire.fresh_name(self.names, f"yomiage/band/{op_type.lower()}")
        name = wire.fresh_name(self.names, f"yomiage/band/{op_type}")
        nodes.append(wire.node_field(op_type, inputs, [output], name, attributes=attributes))
        return output

    def _ints(self, values: list[int]) -> str:
        """A 1-D int64 initializer."""
        return self._int64((len(values),), tuple(values))

    def _scalar(self, value: int) -> str:
        return self._int64((), (value,))

    def _int64(self, dims: tuple[int, ...], values: tuple[int, ...]) -> str:
        key = (dims, values)
        if key not in self.int_constants:
            label = "_".join(str(value) for value in values).replace("-", "m")
            self.int_constants[key] = wire.fresh_name(self.names, f"yomiage/band/int_{label}")
        return self.int_constants[key]


def _axis0() -> bytes:
    return wire.int_attribute("axis", 0)
