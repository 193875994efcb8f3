"""Convolutions that read the same tensor with the same kernel, run as one (a load-time rewrite
of the synthesizer's graphs).

Every attention layer of the text encoder and of the flow makes its queries, keys and values with
three 1x1 convolutions of the same input. onnxruntime runs each as a blocked convolution, shared
between its threads by sets of four blocks of output channels (MLAS ``snchwc.cpp``), and moves
each result back to the plain layout on its own: 192 channels in blocks of 16 are three sets,
which two threads split 2 + 1. One convolution of the stacked filters (576 channels: nine sets,
5 + 4) is one call and one move back; a Split then hands each consumer its channels. Every
output channel is the same products summed in the same order as before: the outputs are bit for
bit those of the separate convolutions (docs/PERFORMANCE.md, "Queries, keys and values in one
convolution").

Only where onnxruntime has blocked kernels (x86): where it has none (ARM) the gain is unmeasured
and the graph is left as exported.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from . import wire
from .wire import Chunks, Graph, Node

REWRITE_VERSION = 1  # bump when the rewrite changes: cached graphs are then rebuilt
_SPLIT_SIZES_AS_INPUT = 13  # the opset from which Split takes its sizes as an input
_CHANNEL_AXIS = 1


@dataclass(frozen=True)
class _Conv:
    position: int
    node: Node
    weight: wire.FloatInitializer
    bias: wire.FloatInitializer | None


def merge_sibling_convolutions(model: memoryview, block: int) -> Chunks | None:
    """The encoded ModelProto with each set of convolutions that read one tensor alike computed
    as one convolution and a Split, or None where there is no such set (or no blocked kernels:
    ``block`` 0)."""
    if block <= 0:
        return None
    model_fields, graph_field = wire.model_graph(model)
    graph = Graph.parse(wire.as_message(graph_field.value))
    siblings = _siblings(graph)
    if not siblings:
        return None
    opset = wire.default_opset(model_fields)
    encoded = _Emitter(graph, siblings, opset).encode()
    return wire.with_graph(model_fields, graph_field, encoded)


def _siblings(graph: Graph) -> list[list[_Conv]]:
    """Sets of two or more convolutions that read the same input with the same attributes and
    the same kernel, each with constant float weights (and all or none with a constant bias)."""
    by_input: dict[tuple[str, bytes, tuple[int, ...], bool], list[_Conv]] = defaultdict(list)
    for position, node in graph.nodes.items():
        conv = _mergeable(graph, position, node)
        if conv is None:
            continue
        attributes = b"".join(bytes(attribute.raw) for attribute in node.attributes)
        key = (node.inputs[0], attributes, tuple(conv.weight.tensor.dims[1:]), bool(conv.bias))
        by_input[key].append(conv)
    return [convs for convs in by_input.values() if len(convs) > 1]


def _mergeable(graph: Graph, position: int, node: Node) -> _Conv | None:
    if node.op_type != "Conv" or node.domain or len(node.outputs) != 1 or len(node.inputs) < 2:
        return None
    group = node.attribute("group")
    if group is not None and group.i not in (None, 1):
        return None
    if node.outputs[0] in graph.outputs:
        return None  # the graph's own output keeps the node that makes it
    weight = wire.float_initializer(graph, node.inputs[1])
    if weight is None or len(weight.tensor.dims) < 3:
        return None
    has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
    bias = wire.float_initializer(graph, node.inputs[2]) if has_bias else None
    if has_bias and bias is None:
        return None  # a bias computed in the graph: left as it is
    return _Conv(position, node, weight, bias)


class _Emitter:
    """Writes the GraphProto: each set's merged convolution and its Split where the set's first
    convolution was, under the first one's name; the others gone; the separate weights dropped
    where nothing else reads them."""

    def __init__(self, graph: Graph, siblings: list[list[_Conv]], opset: int) -> None:
        self.graph = graph
        self.opset = opset
        self.first = {convs[0].position: convs for convs in siblings}
        self.merged = {conv.position for convs in siblings for conv in convs}
        self.replaced = {
            part.tensor.name
            for convs in siblings
            for conv in convs
            for part in (conv.weight, conv.bias)
            if part is not None
        }
        self.names = graph.names_in_use()

    def encode(self) -> Chunks:
        read = wire.still_read(self.graph, self.merged)
        out = Chunks()
        for position, item in enumerate(self.graph.items):
            convs = self.first.get(position)
            if convs is not None:
                out.extend(self._merged(convs))
            elif position in self.merged:
                continue
            elif item.number != wire.GRAPH_INITIALIZER or self._kept(item, read):
                out.add(item.raw)
        return out

    def _kept(self, item: wire.Field, read: set[str]) -> bool:
        name = wire.parse_tensor(item).name
        return name not in self.replaced or name in read

    def _merged(self, convs: list[_Conv]) -> Chunks:
        """One convolution of the stacked weights (and biases), split back into each
        convolution's output."""
        out = Chunks()
        first = convs[0].node
        sizes = [conv.weight.tensor.dims[0] for conv in convs]
        weight = self._fresh(f"{convs[0].weight.tensor.name}/merged")
        dims = [sum(sizes), *convs[0].weight.tensor.dims[1:]]
        out.extend(wire.raw_float_tensor(weight, dims, *(conv.weight.data for conv in convs)))
        inputs = [first.inputs[0], weight]
        biases = [conv.bias for conv in convs if conv.bias is not None]
        if biases:
            bias = self._fresh(f"{biases[0].tensor.name}/merged")
            out.extend(wire.raw_float_tensor(bias, [sum(sizes)], *(part.data for part in biases)))
            inputs.append(bias)
        stacked = self._fresh(f"{first.outputs[0]}/merged")
        attributes = [attribute.raw for attribute in first.attributes]
        out.add(wire.node_field("Conv", inputs, [stacked], first.name, "", attributes, first.other))
        split_inputs = [stacked]
        split_attributes = [wire.int_attribute("axis", _CHANNEL_AXIS)]
        if self.opset >= _SPLIT_SIZES_AS_INPUT:
            split_inputs.append(self._fresh(f"{first.outputs[0]}/merged_sizes"))
            out.add(wire.int64_tensor(split_inputs[-1], sizes))
        else:
            split_attributes.append(wire.ints_attribute("split", sizes))
        outputs = [conv.node.outputs[0] for conv in convs]
        name = f"{first.name}/split"
        out.add(wire.node_field("Split", split_inputs, outputs, name, "", split_attributes))
        return out

    def _fresh(self, wanted: str) -> str:
        return wire.fresh_name(self.names, wanted)
