"""Blocked convolutions that would leave a thread idle, run as partial sums over groups of their
input channels (a load-time rewrite of the lifted graph).

onnxruntime shares a blocked (NCHWc) convolution between its threads by sets of four blocks of
output channels per output row (MLAS ``snchwc.cpp``), and a lifted ``[N, C, 1, T]`` tensor has
one row. In blocks of 16 floats (AVX-512) a 192-channel convolution is three such sets, which two
threads split 2 + 1: the flow's 768 -> 192 feed-forward convolutions, a quarter of its time, ran
at 0.78 of the rate of its 192 -> 768 ones (docs/PERFORMANCE.md). Written as a convolution of G
groups whose group g sums the products of input channels g I / G .. (g + 1) I / G into all O
outputs, it is G times as many sets of 1 / G of the work each (3 + 3 on two threads); a
ReduceSum over the groups then adds the G partial sums. The same products, summed in another
order: outputs agree with the graph to float rounding.

Only where the split evens the threads out and the reduction per output stays long (at least
``MIN_PRODUCTS_PER_GROUP``): measured on this box, 768 x 5 and 768 x 3 products gained
1.2x and 1.1-1.15x, 192 x 3 and 192 x 1 lost to the summing pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import wire
from .rewrite import BLOCKS_PER_WORK_ITEM
from .wire import Chunks, Graph, Node

REWRITE_VERSION = 1  # bump when the rewrite changes: cached graphs are then rebuilt
# Products per output and group below which the summing pass costs what the threads gain.
MIN_PRODUCTS_PER_GROUP = 1024
_MIN_OPSET = 13  # ReduceSum with its axes as an input
_GROUP_COUNTS = (2, 4, 8)
_LIFTED_RANK = 4  # [O, I, 1, K] weights: convolutions the lift moved to 2-D


@dataclass(frozen=True)
class _Float:
    """A float32 initializer stored as raw data, and that data."""

    tensor: wire.Tensor
    data: memoryview


@dataclass(frozen=True)
class _Split:
    position: int
    groups: int
    weight: _Float
    bias: _Float | None


def groups_for(out_channels: int, in_channels: int, kernel: int, block: int, threads: int) -> int:
    """How many groups of input channels a blocked convolution runs fastest as on ``threads``
    threads with blocks of ``block`` floats (1: as it is). onnxruntime's blocked kernels need
    whole blocks of channels in each group."""
    if block <= 0 or threads < 2 or out_channels % block:
        return 1
    sets = math.ceil(out_channels / (block * BLOCKS_PER_WORK_ITEM))
    best, best_time = 1, float(math.ceil(sets / threads))
    for groups in _GROUP_COUNTS:
        if (
            in_channels % (groups * block)
            or in_channels * kernel // groups < MIN_PRODUCTS_PER_GROUP
        ):
            break
        time = math.ceil(groups * sets / threads) / groups
        if time < best_time:
            best, best_time = groups, time
    return best


def split_reductions(model: memoryview, block: int, threads: int) -> Chunks | None:
    """The encoded ModelProto with each lifted convolution that leaves a thread idle computed as
    grouped partial sums and their ReduceSum, or None where there is none."""
    model_fields, graph_field = wire.model_graph(model)
    if wire.default_opset(model_fields) < _MIN_OPSET:
        return None
    graph = Graph.parse(wire.as_message(graph_field.value))
    splits = [
        split
        for position, node in graph.nodes.items()
        if (split := _split_of(graph, position, node, block, threads)) is not None
    ]
    if not splits:
        return None
    return wire.with_graph(model_fields, graph_field, _Emitter(graph, splits).encode())


def _split_of(graph: Graph, position: int, node: Node, block: int, threads: int) -> _Split | None:
    if node.op_type != "Conv" or node.domain or len(node.outputs) != 1 or len(node.inputs) < 2:
        return None
    group = node.attribute("group")
    if group is not None and group.i not in (None, 1):
        return None
    weight = _float_initializer(graph, node.inputs[1])
    if weight is None or len(weight.tensor.dims) != _LIFTED_RANK or weight.tensor.dims[2] != 1:
        return None
    has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
    bias = _float_initializer(graph, node.inputs[2]) if has_bias else None
    if has_bias and bias is None:
        return None  # a bias computed in the graph: left as it is
    out_channels, in_channels, _, kernel = weight.tensor.dims
    groups = groups_for(out_channels, in_channels, kernel, block, threads)
    return None if groups == 1 else _Split(position, groups, weight, bias)


def _float_initializer(graph: Graph, name: str) -> _Float | None:
    tensor = graph.initializers.get(name)
    if tensor is None or name in graph.inputs:
        return None
    data = wire.raw_data(tensor, wire.TENSOR_FLOAT)
    return None if data is None else _Float(tensor, data)


class _Emitter:
    """Writes the GraphProto: each split convolution as its grouped form, the Reshape that sets
    the groups on an axis of their own and their ReduceSum, under the convolution's output name;
    the original weights and biases dropped where nothing else reads them."""

    def __init__(self, graph: Graph, splits: list[_Split]) -> None:
        self.graph = graph
        self.splits = {split.position: split for split in splits}
        self.replaced = {
            part.tensor.name for split in splits for part in (split.weight, split.bias) if part
        }
        self.names = graph.names_in_use()
        self.int_constants: dict[tuple[int, ...], str] = {}

    def encode(self) -> Chunks:
        read = {
            name
            for position, node in self.graph.nodes.items()
            if position not in self.splits
            for name in wire.node_reads(node)
        }
        read |= set(self.graph.outputs)
        out = Chunks()
        for position, item in enumerate(self.graph.items):
            split = self.splits.get(position)
            if split is not None:
                out.extend(self._grouped(self.graph.nodes[position], split))
            elif item.number != wire.GRAPH_INITIALIZER or self._kept(item, read):
                out.add(item.raw)
        for values, name in sorted(self.int_constants.items()):
            out.add(wire.int64_tensor(name, list(values)))
        return out

    def _kept(self, item: wire.Field, read: set[str]) -> bool:
        name = wire.parse_tensor(item).name
        return name not in self.replaced or name in read

    def _grouped(self, node: Node, split: _Split) -> Chunks:
        """The grouped convolution's weights and nodes, ending in ``node``'s output."""
        out = Chunks()
        out_channels, in_channels, height, kernel = split.weight.tensor.dims
        groups = split.groups
        weight = self._fresh(f"{split.weight.tensor.name}/groups")
        out.extend(
            wire.raw_float_tensor(
                weight,
                [groups * out_channels, in_channels // groups, height, kernel],
                *_grouped_rows(split.weight, groups),
            )
        )
        inputs = [node.inputs[0], weight]
        if split.bias is not None:
            bias = self._fresh(f"{split.bias.tensor.name}/groups")
            # Added once: to the first group's sums, zeros to the others'.
            zeros = memoryview(bytes(len(split.bias.data) * (groups - 1)))
            out.extend(wire.raw_float_tensor(bias, [groups * out_channels], split.bias.data, zeros))
            inputs.append(bias)
        partial = self._fresh(f"{node.outputs[0]}/groups")
        attributes: list[bytes | memoryview] = [a.raw for a in node.attributes if a.name != "group"]
        attributes.append(wire.int_attribute("group", groups))
        out.add(wire.node_field("Conv", inputs, [partial], node.name, "", attributes, node.other))
        by_group = self._fresh(f"{node.outputs[0]}/by_group")
        shape = self._ints((0, groups, out_channels, height, -1))
        out.add(wire.node_field("Reshape", [partial, shape], [by_group], f"{node.name}/groups"))
        keepdims = wire.int_attribute("keepdims", 0)
        summed = [by_group, self._ints((1,))]
        out.add(
            wire.node_field("ReduceSum", summed, node.outputs, f"{node.name}/sum", "", [keepdims])
        )
        return out

    def _ints(self, values: tuple[int, ...]) -> str:
        if values not in self.int_constants:
            label = "_".join(str(value) for value in values).replace("-", "m")
            self.int_constants[values] = self._fresh(f"yomiage/split/int_{label}")
        return self.int_constants[values]

    def _fresh(self, wanted: str) -> str:
        return wire.fresh_name(self.names, wanted)


def _grouped_rows(weight: _Float, groups: int) -> list[memoryview]:
    """The rows of the grouped weight [G O, I / G, 1, K], as views of ``weight`` [O, I, 1, K]:
    group g's rows are every output's products with input channels g I / G .. (g + 1) I / G,
    which lie together in each output's row."""
    data = weight.data
    out_channels = weight.tensor.dims[0]
    row = len(data) // out_channels
    piece = row // groups
    return [
        data[o * row + g * piece : o * row + (g + 1) * piece]
        for g in range(groups)
        for o in range(out_channels)
    ]
