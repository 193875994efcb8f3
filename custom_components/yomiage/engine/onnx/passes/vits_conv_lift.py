"""Load-time graph rewrites, cached on disk.

The decoder of an SBV2 synthesizer is a stack of 1-D convolutions over [N, C, T], which is where
almost all of the synthesis time goes. onnxruntime's CPU provider runs convolutions over 4-D
tensors in its blocked NCHWc layout with direct kernels, but 1-D ones through im2col + GEMM, so
the same convolution written over [N, C, 1, T] is up to 1.5x faster (docs/PERFORMANCE.md).

``lift_convolutions`` rewrites a published graph that way: each convolution of the decoder's
audio-rate part (from the first upsampling ConvTranspose on), and the element-wise glue between
them (LeakyRelu, Add, Div, ...), moves to rank 4 with an Unsqueeze where a tensor enters the
region and a Squeeze where one leaves it, so that whole residual blocks stay in the blocked
layout. Frame-rate convolutions (text encoder, flow, durations) lift only in a graph that has no
audio-rate part (the synthesizer's front, the duration predictor) and only where onnxruntime has
blocked kernels (``frame_rate_lift_pays``): the front ran 1.04-1.14x faster on AVX2, the flow 1.05x
on AVX-512 (docs/PERFORMANCE.md), where a micro-benchmark of one layer had shown no gain. Same
arithmetic, same weights (only their declared shape changes): outputs agree with the original to
float rounding (~1e-6).

More exact changes keep the work in the blocked kernels (measured in docs/PERFORMANCE.md):
identity 1x1 depthwise convolutions after each ConvTranspose and in front of LeakyRelus
onnxruntime cannot fuse, with declared shapes, so that a stage's residual stream stays blocked
(``_Plan._keep_blocked``); and the narrow end of the decoder runs as two overlapping halves in
one batch, so that its blocked convolutions give both threads work (``_Tail``). onnxruntime
shares a blocked convolution between threads by sets of four blocks of output channels, so the
narrow end begins at 64 channels where blocks hold 16 floats (AVX-512), at 32 where they hold 8
(AVX2). A zero Pad in front of a lifted convolution (Style-Bert-VITS2's feed-forward layers)
lifts with it, where onnxruntime folds it into the convolution (``_Plan._pads_convolutions``).

sessions.py builds a session from the rewritten graph once, saves onnxruntime's own optimised form
of it in the graph cache (graph_cache.py), and memory-maps its weights on every later load.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from .. import wire
from ..decoder_graph import is_upsampling
from ..graph_edit import (
    CONVOLUTIONS,
    ELEMENTWISE,
    GraphEdit,
    NewNodes,
    RankedGraph,
    edit_model,
    is_zero_pad,
)
from ..wire import Chunks, Node, Tensor

SCOPE = "conv_lift"
# Convolutions with fewer input or output channels stay 1-D: the blocked kernels split a
# [C, 1, T] convolution between threads by blocks of channels, so a 16- or 32-channel one runs on
# one thread, while the 1-D GEMM splits along time (docs/PERFORMANCE.md).
DEFAULT_MIN_CHANNELS = 64
# onnxruntime's blocked layout takes channel counts that fill its blocks (8 floats on AVX2 and
# NEON, 16 on AVX-512).
BLOCKED_CHANNELS_MULTIPLE = 16
AVX2_BLOCK = 8  # floats per block where the caller does not say (the narrower tail)
# Blocks of output channels that onnxruntime's blocked convolution computes as one piece of work
# (its filter set): a convolution with no more channels than that runs on one thread.
BLOCKS_PER_WORK_ITEM = 4
_SQUEEZE_AXES_AS_INPUT = 13  # from opset 13 on, Squeeze/Unsqueeze take axes as an input
_PAIRS_OPSET = 13  # int64 Min (12) and Slice with inputs (10) for the narrow tail's halves
_LIFTED_AXIS = 2  # [N, C, T] -> [N, C, 1, T]
_TIME_AXIS = 3  # of a lifted tensor
_LAST = (1 << 63) - 1  # a Slice end that means "to the end"


def frame_rate_lift_pays(block: int) -> bool:
    """Whether frame-rate convolutions run faster lifted where onnxruntime's blocks hold
    ``block`` floats: on AVX2 (8) and AVX-512 (16), measured; not without blocked kernels (0)."""
    return block > 0


def lift_for_cpu(model: memoryview, block: int) -> Chunks | None:
    """The lift as graphs are prepared where onnxruntime's blocked kernels hold ``block`` floats
    (0: none): the audio-rate part, and the frame-rate convolutions where that pays."""
    return lift_convolutions(model, block=block, frame_rate=frame_rate_lift_pays(block))


def lift_convolutions(
    model: memoryview,
    min_channels: int = DEFAULT_MIN_CHANNELS,
    audio_rate_only: bool = True,
    block: int = AVX2_BLOCK,
    frame_rate: bool = False,
) -> Chunks | None:
    """The encoded ModelProto with its 1-D convolutions lifted, or None if nothing is lifted.

    ``audio_rate_only``: only convolutions from the first upsampling ConvTranspose on;
    ``frame_rate``: but every convolution of a graph that has no upsampling (the synthesizer's
    front, the duration predictor), the decoder keeping its frame-rate part 1-D.
    ``block``: floats per block of onnxruntime's blocked (NCHWc) kernels here, 0 where it has
    none; without them the identities and halves that serve those kernels would only cost time,
    and are left out.
    """
    edited = edit_model(model, SCOPE, _Graph.parse)
    graph = edited.graph
    if any(tensor.external for tensor in graph.initializers.values()):
        return None  # a copy elsewhere would lose the relative paths of its weight files
    pairs = block > 0 and edited.opset >= _PAIRS_OPSET
    plan = _Plan.make(
        graph, min_channels, audio_rate_only, pairs=pairs, block=block, frame_rate=frame_rate
    )
    if not plan.lifted:
        return None
    _Lifter(edited.edit, graph, plan, edited.opset).write()
    return edited.encode()


# -- what the graph holds ------------------------------------------------------------------------
@dataclass
class _Graph(RankedGraph):
    """The graph, its tensors' ranks (RankedGraph), and the names subgraphs read."""

    in_subgraphs: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, payload: memoryview) -> Self:
        graph = super().parse(payload)
        for node in graph.nodes.values():
            graph.in_subgraphs.update(wire.subgraph_reads(node))
        return graph


# -- which nodes move to rank 4 --------------------------------------------------------------
@dataclass
class _Plan:
    lifted: set[int]  # node positions
    lifted_tensors: set[str]
    retyped_weights: set[str]  # Conv weights whose declared shape simply gains the unit axis
    tail: _Tail | None = None
    extents: dict[str, _Extent] = field(default_factory=dict)  # lifted and entering tensors
    blocked_after: set[int] = field(default_factory=set)  # ConvTranspose positions
    blocked_before: set[int] = field(default_factory=set)  # LeakyRelu positions

    @classmethod
    def make(
        cls,
        graph: _Graph,
        min_channels: int,
        audio_rate_only: bool,
        pairs: bool = True,
        block: int = AVX2_BLOCK,
        frame_rate: bool = False,
    ) -> _Plan:
        plan = cls(set(), set(), set())
        in_scope = _upsampled_nodes(graph)
        if not audio_rate_only or (frame_rate and not in_scope):
            in_scope = set(graph.nodes)
        # The tail takes what the blocked kernels would run on one thread, and what is too
        # narrow to lift on its own.
        narrower_than = max(min_channels, BLOCKS_PER_WORK_ITEM * block + 1)
        plan.tail = _narrow_tail(graph, in_scope, narrower_than) if pairs else None
        paired = plan.tail.nodes if plan.tail is not None else set()
        for position, node in graph.nodes.items():
            # In the paired tail every convolution lifts: two halves give both threads work.
            width = 0 if position in paired else min_channels
            if _liftable(node, graph, plan.lifted_tensors, width, position in in_scope):
                plan._lift(position, node)
        if plan.tail is not None and not plan.tail.nodes <= plan.lifted:
            plan.tail = None  # cannot happen for a valid tail; never pair an unlifted node
        # Backwards: glue that only feeds the region (a LeakyRelu before the first convolution)
        # joins it, so that its input enters the region once instead of twice; a zero Pad in
        # front of a convolution joins it too, where onnxruntime folds it into the convolution.
        consumers, producers = graph.consumers(), graph.producers()
        for position in sorted(graph.nodes, reverse=True):
            node = graph.nodes[position]
            if position not in plan.lifted and (
                plan._only_feeds_region(node, graph, consumers)
                or plan._pads_convolutions(node, graph, consumers, producers)
            ):
                plan._lift(position, node)
        plan.retyped_weights = _weights_only_lifted_convs_use(graph, plan.lifted)
        plan.extents = _extents(graph, plan.lifted, plan.tail)
        if block:
            plan._keep_blocked(graph, consumers, producers)
        return plan

    def _keep_blocked(
        self, graph: _Graph, consumers: dict[str, list[int]], producers: dict[str, int]
    ) -> None:
        """Where an identity depthwise convolution keeps a region in the blocked layout.

        onnxruntime's NCHWc pass converts convolutions, Add and a few activations, not
        ConvTranspose nor a LeakyRelu it cannot fuse into the convolution before it: around
        those it reorders whole tensors in and out of the blocked layout, and the residual Adds
        then run unblocked too. A 1x1 depthwise convolution with weights 1 is exact (x * 1) and
        blocked: after a ConvTranspose it starts the blocked residual stream; in front of a
        LeakyRelu onnxruntime fuses the two into one blocked kernel.
        """
        for position in self.lifted:
            node = graph.nodes[position]
            if node.op_type == "ConvTranspose" and self._blocked_width(node.outputs[0]):
                self.blocked_after.add(position)
            elif node.op_type == "LeakyRelu" and self._blocked_width(node.inputs[0]):
                source = producers.get(node.inputs[0])
                if source is not None and self._arrives_blocked(graph, source, consumers):
                    self.blocked_before.add(position)

    def _arrives_blocked(self, graph: _Graph, source: int, consumers: dict[str, list[int]]) -> bool:
        """Whether onnxruntime produces this LeakyRelu's input blocked without fusing the two:
        an Add, a ConvTranspose made blocked, or a Conv read by more than the LeakyRelu (a
        Conv's only LeakyRelu is fused into it)."""
        node = graph.nodes[source]
        if source not in self.lifted:
            return False
        if node.op_type == "Conv":
            return len(consumers.get(node.outputs[0], [])) > 1
        return node.op_type == "Add" or source in self.blocked_after

    def _blocked_width(self, name: str) -> bool:
        extent = self.extents.get(name)
        if name not in self.lifted_tensors or extent is None or not extent.channels:
            return False
        return extent.channels % BLOCKED_CHANNELS_MULTIPLE == 0

    def _lift(self, position: int, node: Node) -> None:
        self.lifted.add(position)
        self.lifted_tensors.update(node.outputs)

    def _pads_convolutions(
        self,
        node: Node,
        graph: _Graph,
        consumers: dict[str, list[int]],
        producers: dict[str, int],
    ) -> bool:
        """A Pad with zeros (Style-Bert-VITS2's feed-forward layers pad before each
        convolution) read only as the data of lifted convolutions. Lifted with them, it sits
        right before each one, where onnxruntime folds it into the convolution's own padding
        (its PadFusion, once the pads are folded constants): no padded copy, and a convolution
        that reads another one's blocked output reads it as it is (vits_flow_mask.py)."""
        if not is_zero_pad(node, graph, producers):
            return False
        # Pads as an input (opset 11 on), no axes input (opset 18): pads of every axis.
        if not 2 <= len(node.inputs) <= 3 or not node.inputs[1]:
            return False
        output = node.outputs[0]
        readers = _node_readers(output, graph, consumers)
        if not readers:
            return False
        return all(
            r in self.lifted
            and graph.nodes[r].op_type == "Conv"
            and graph.nodes[r].inputs[0] == output
            and output not in graph.nodes[r].inputs[1:]
            for r in readers
        )

    def _only_feeds_region(
        self, node: Node, graph: _Graph, consumers: dict[str, list[int]]
    ) -> bool:
        if node.op_type not in ELEMENTWISE or node.domain not in ("", "ai.onnx"):
            return False
        if len(node.outputs) != 1:
            return False
        output = node.outputs[0]
        readers = _node_readers(output, graph, consumers)
        if not readers:
            return False
        if any(r not in self.lifted or _reads_as_weight(graph.nodes[r], output) for r in readers):
            return False
        inputs = [name for name in node.inputs if name]
        if graph.ranks.get(output) != 3 or any(name not in graph.ranks for name in inputs):
            return False
        entering = [n for n in inputs if n not in self.lifted_tensors and graph.ranks[n] >= 2]
        return len(entering) <= 1  # never more reshapes than before


def _node_readers(name: str, graph: _Graph, consumers: dict[str, list[int]]) -> list[int]:
    """The nodes that read ``name``; none where the graph also returns it or a subgraph reads it
    (then what makes it stays as it is)."""
    if name in graph.outputs or name in graph.in_subgraphs:
        return []
    return consumers.get(name, [])


def _upsampled_nodes(graph: _Graph) -> set[int]:
    """Positions of the upsampling ConvTransposes and of every node downstream of one: the
    decoder's audio-rate part. Frame-rate convolutions (text encoder, flow) are short along
    time; there the 1-D kernels are as fast or faster (docs/PERFORMANCE.md)."""
    found: set[int] = set()
    upsampled: set[str] = set()
    for position, node in graph.nodes.items():
        if is_upsampling(node) or upsampled.intersection(node.inputs):
            found.add(position)
            upsampled.update(node.outputs)
    return found


def _liftable(
    node: Node, graph: _Graph, lifted: set[str], min_channels: int, in_scope: bool
) -> bool:
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return False
    if node.op_type in CONVOLUTIONS:
        return in_scope and _is_wide_1d_convolution(node, graph, min_channels)
    if node.op_type not in ELEMENTWISE or graph.ranks.get(node.outputs[0]) != 3:
        return False
    inputs = [name for name in node.inputs if name]
    return any(name in lifted for name in inputs) and all(
        name in lifted or name in graph.ranks for name in inputs
    )


def _is_wide_1d_convolution(node: Node, graph: _Graph, min_channels: int) -> bool:
    weight = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if weight is None or len(weight.dims) != 3:
        return False
    group = node.attribute("group")
    groups = group.i if group is not None and group.i else 1
    # Conv weights are [out, in / groups, k]; ConvTranspose ones [in, out / groups, k].
    channels = (weight.dims[0], weight.dims[1] * groups)
    return min(channels) >= min_channels


def _reads_as_weight(node: Node, name: str) -> bool:
    return node.op_type in CONVOLUTIONS and name in node.inputs[1:]


def _weights_only_lifted_convs_use(graph: _Graph, lifted: set[int]) -> set[str]:
    weights = {
        graph.nodes[position].inputs[1]
        for position in lifted
        if graph.nodes[position].op_type in CONVOLUTIONS
    }
    for position, node in graph.nodes.items():
        for index, name in enumerate(node.inputs):
            used_as_lifted_weight = (
                position in lifted and index == 1 and node.op_type in CONVOLUTIONS
            )
            if name in weights and not used_as_lifted_weight:
                weights.discard(name)
    return weights - graph.in_subgraphs


# -- shapes of the lifted tensors ------------------------------------------------------------
@dataclass(frozen=True)
class _Extent:
    """What the rewrite can tell of an [N, C, 1, T] tensor: C (None: unknown) and its length,
    as a number shared by every tensor known to have the same length."""

    channels: int | None
    length: int
    paired: bool = False  # in the narrow tail, whose batch holds the two halves

    def dims(self) -> list[int | str]:
        batch = "yomiage_pairs" if self.paired else "yomiage_n"
        return [batch, self.channels or 0, 1, f"yomiage_t{self.length}"]


def _extents(graph: _Graph, lifted: set[int], tail: _Tail | None) -> dict[str, _Extent]:
    """Extents of the lifted tensors and of the tensors that enter the region.

    onnxruntime's NCHWc pass keeps an Add blocked only when it can prove both inputs the same
    shape; with a dynamic length it loses track after a dilated convolution. Declared here, the
    shapes let every residual Add stay blocked and fuse into the convolution before it.
    """
    found: dict[str, _Extent] = {}
    lengths = itertools.count()

    def entering(name: str) -> _Extent:
        if name not in found:
            found[name] = _Extent(None, next(lengths))
        return found[name]

    for position in sorted(lifted):
        node = graph.nodes[position]
        if node.op_type in CONVOLUTIONS:
            source = found.get(node.inputs[0]) or entering(node.inputs[0])
            weight = graph.initializers.get(node.inputs[1])
            channels = _output_channels(node, weight) if weight is not None else None
            same = node.op_type == "Conv" and weight is not None and _keeps_length(node, weight)
            length = source.length if same else next(lengths)
            paired = tail is not None and position in tail.nodes
            found[node.outputs[0]] = _Extent(channels, length, paired)
        elif node.op_type == "Pad":  # longer by its pads: a length of its own
            source = found.get(node.inputs[0]) or entering(node.inputs[0])
            found[node.outputs[0]] = _Extent(source.channels, next(lengths))
        else:
            extent = _elementwise_extent(node, graph, found, entering)
            if extent is not None:
                found[node.outputs[0]] = extent
    return found


def _elementwise_extent(
    node: Node, graph: _Graph, found: dict[str, _Extent], entering: Callable[[str], _Extent]
) -> _Extent | None:
    """The common extent of the full-rank operands; None unless they provably agree."""
    operands = [
        found.get(name) or entering(name)
        for name in node.inputs
        if name and (name in found or graph.ranks.get(name, 0) >= 2)
    ]
    if not operands or any(extent != operands[0] for extent in operands):
        return None
    return operands[0]


def _output_channels(node: Node, weight: Tensor) -> int:
    if node.op_type == "Conv":
        return weight.dims[0]
    group = node.attribute("group")
    return weight.dims[1] * (group.i if group is not None and group.i else 1)


def _keeps_length(node: Node, weight: Tensor) -> bool:
    """A stride-1 convolution padded by its dilated kernel's span: output as long as input."""
    if node.attribute("auto_pad") is not None or len(weight.dims) != 3:
        return False
    strides = node.attribute("strides")
    if strides is not None and any(stride != 1 for stride in strides.ints):
        return False
    dilations = node.attribute("dilations")
    dilation = dilations.ints[0] if dilations is not None and dilations.ints else 1
    pads = node.attribute("pads")
    padding = sum(pads.ints) if pads is not None else 0
    return padding == (weight.dims[2] - 1) * dilation


# -- the narrow tail, run as two overlapping halves ------------------------------------------
@dataclass(frozen=True)
class _Tail:
    """The decoder's end from the first upsampling to fewer than ``narrower_than`` channels.

    Blocked kernels split a convolution between threads by sets of four blocks of output
    channels (and rows), so a [N, C, 1, T] one of at most four blocks runs on one thread. Here
    the ConvTranspose's output is cut into two halves, each with ``halo`` extra samples of its
    neighbour, and stacked as a batch of two: each half is one piece of work per convolution,
    both threads are busy, and the blocked kernels' efficiency applies. A halo as wide as the
    tail's reach makes every kept sample exactly what the whole sequence gives (the outer ends
    see zero padding as before).
    """

    entry: int  # position of the ConvTranspose whose output is cut in two
    nodes: set[int]  # the entry and every node downstream of it
    output: str  # the graph output the tail makes
    halo: int  # samples at the entry's output rate
    rate: int  # output samples per sample of the entry's output


def _narrow_tail(graph: _Graph, in_scope: set[int], narrower_than: int) -> _Tail | None:
    entry = next(
        (
            position
            for position in sorted(in_scope)
            if is_upsampling(graph.nodes[position])
            and _narrow(graph.nodes[position], graph, narrower_than)
        ),
        None,
    )
    if entry is None:
        return None
    nodes = _downstream(graph, entry)
    output = _single_output(graph, nodes)
    if output is None or not all(_pairable(graph.nodes[p], graph, nodes) for p in nodes):
        return None
    reach = _reach(graph, entry, nodes)
    if reach is None or output not in reach:
        return None
    samples, rate = reach[output]
    return _Tail(entry, nodes, output, halo=-(-samples // rate) + 1, rate=rate)


def _narrow(node: Node, graph: _Graph, narrower_than: int) -> bool:
    weight = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    return weight is not None and len(weight.dims) == 3 and weight.dims[1] < narrower_than


def _downstream(graph: _Graph, start: int) -> set[int]:
    found = {start}
    made = set(graph.nodes[start].outputs)
    for position in sorted(graph.nodes):
        if position > start and made.intersection(graph.nodes[position].inputs):
            found.add(position)
            made.update(graph.nodes[position].outputs)
    return found


def _single_output(graph: _Graph, nodes: set[int]) -> str | None:
    """The one graph output the tail makes, if nothing outside the tail reads its tensors."""
    made = {name for p in nodes for name in graph.nodes[p].outputs}
    if made & graph.in_subgraphs:
        return None
    for position, node in graph.nodes.items():
        if position not in nodes and made.intersection(node.inputs):
            return None
    outputs = made & graph.outputs.keys()
    return next(iter(outputs)) if len(outputs) == 1 else None


def _pairable(node: Node, graph: _Graph, nodes: set[int]) -> bool:
    """Ops that treat the halves alike and keep lengths in step (so that the halves can be
    cut back out by arithmetic on the entry's length)."""
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return False
    if node.op_type in CONVOLUTIONS:
        weight = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if weight is None or len(weight.dims) != 3:
            return False
        if node.op_type == "Conv":
            return _keeps_length(node, weight)
        return _scales_length(node, weight) is not None
    if node.op_type not in ELEMENTWISE:
        return False
    made = {name for p in nodes for name in graph.nodes[p].outputs}
    return all(name in made or _is_scalar(name, graph) for name in node.inputs if name)


def _is_scalar(name: str, graph: _Graph) -> bool:
    """A single number (which broadcasts over both halves alike)."""
    if graph.ranks.get(name) == 0:
        return True
    tensor = graph.initializers.get(name)
    return tensor is not None and all(dim == 1 for dim in tensor.dims)


def _scales_length(node: Node, weight: Tensor) -> int | None:
    """The stride of a ConvTranspose whose output is exactly stride x its input, else None."""
    if any(node.attribute(name) is not None for name in ("auto_pad", "output_shape")):
        return None
    stride = node.first_int("strides", 1)
    if node.first_int("dilations", 1) != 1:
        return None
    pads = node.attribute("pads")
    padding = sum(pads.ints) if pads is not None else 0
    extra = node.first_int("output_padding", 0)
    return stride if weight.dims[2] + extra - padding == stride else None


def _reach(graph: _Graph, entry: int, nodes: set[int]) -> dict[str, tuple[int, int]] | None:
    """For each tail tensor: how many of its samples next to a cut can differ from the whole
    sequence's, and its rate in samples per sample of the entry's output."""
    reach = {graph.nodes[entry].outputs[0]: (0, 1)}
    for position in sorted(nodes - {entry}):
        node = graph.nodes[position]
        known = [reach[name] for name in node.inputs if name in reach]
        if not known or any(rate != known[0][1] for _, rate in known):
            return None
        samples, rate = max(known)
        if node.op_type == "Conv":
            weight = graph.initializers[node.inputs[1]]
            span = (weight.dims[2] - 1) * node.first_int("dilations", 1)
            pads = node.attribute("pads")
            left = pads.ints[0] if pads is not None and pads.ints else 0
            samples += max(left, span - left)
        elif node.op_type == "ConvTranspose":
            weight = graph.initializers[node.inputs[1]]
            stride = _scales_length(node, weight) or 1
            samples, rate = samples * stride + weight.dims[2], rate * stride
        reach[node.outputs[0]] = (samples, rate)
    return reach


# -- writing the new graph -------------------------------------------------------------------
_SPATIAL_ATTRIBUTES = {  # how a 1-D convolution attribute reads in 2-D with a unit height
    "kernel_shape": lambda v: [1, *v],
    "strides": lambda v: [1, *v],
    "dilations": lambda v: [1, *v],
    "output_padding": lambda v: [0, *v],
    "output_shape": lambda v: [1, *v],
    "pads": lambda v: [0, v[0], 0, v[1]],
}


class _Lifter:
    """Tells the edit each lifted node at rank 4, after the Unsqueezes its inputs need and
    before its Squeeze; the narrow tail's halves; the identities that keep a region blocked."""

    def __init__(self, edit: GraphEdit, graph: _Graph, plan: _Plan, opset: int) -> None:
        self.edit = edit
        self.graph = graph
        self.plan = plan
        self.axes_as_input = opset >= _SQUEEZE_AXES_AS_INPUT
        self.renamed = {name: edit.fresh(f"{name}/4d") for name in sorted(plan.lifted_tensors)}
        self.unsqueezed: dict[tuple[str, int], str] = {}
        self.widened_pads: dict[str, str] = {}  # a Pad's pads at rank 4, by the pads' name
        self.halves: _Halves | None = None
        self.declared: dict[str, _Extent] = {
            self.renamed[name]: extent
            for name, extent in plan.extents.items()
            if name in self.renamed and extent.channels
        }

    def write(self) -> None:
        for position in sorted(self.plan.lifted):
            nodes = self.edit.nodes()
            self._lifted_node(position, self.graph.nodes[position], nodes)
            self.edit.replace(position, nodes)
        for name in self.plan.retyped_weights:
            self.edit.retype(name, _with_unit_axis(self.graph.initializers[name].dims))
        for name in self.plan.lifted_tensors:  # onnxruntime infers the new shapes
            self.edit.forget_shape(name)
        for name, extent in sorted(self.declared.items()):
            self.edit.declare(name, extent.dims())

    def _lifted_node(self, position: int, node: Node, nodes: NewNodes) -> None:
        """The node at rank 4, after the Unsqueezes its inputs need and before its Squeeze."""
        inputs = [self._input_at_rank_4(node, index, nodes) for index in range(len(node.inputs))]
        while inputs and not inputs[-1]:  # an optional input written as "": onnxruntime's
            inputs.pop()  # PadFusion takes it for a padding value it cannot read
        output = node.outputs[0]
        target = self.renamed[output]
        if position in self.plan.blocked_before:
            inputs[0] = self._identity(inputs[0], self.plan.extents[node.inputs[0]], nodes)
        tail = self.plan.tail
        entering_tail = tail is not None and position == tail.entry
        if position in self.plan.blocked_after or entering_tail:
            target = self.edit.fresh(f"{output}/unblocked")
        nodes.add(
            node.op_type,
            inputs,
            *(self._attribute(a) for a in node.attributes),
            outputs=[target],
            name=node.name,
            domain=node.domain,
            other=node.other,
        )
        if entering_tail:
            target = self._pair_halves(target, nodes)
            self.declared[target] = self.plan.extents[output]
        if position in self.plan.blocked_after:
            self._identity(target, self.plan.extents[output], nodes, self.renamed[output])
        elif target != self.renamed[output]:  # the pair itself stands for the output
            self.declared.pop(self.renamed[output], None)
            self.renamed[output] = target
        if self._needed_at_rank_3(output):
            lifted = self.renamed[output]
            if tail is not None and output == tail.output:
                lifted = self._unpair_halves(lifted, nodes)
            self._axes_node("Squeeze", lifted, output, _LIFTED_AXIS, nodes)

    # The halves of the narrow tail (_Tail), by arithmetic on the entry's length T in the graph
    # itself, so that any length works: half = ceil(T / 2), first = [0, min(T, half + halo)),
    # second = as long, ending at T. Both are the whole sequence when T is short.
    def _pair_halves(self, whole: str, nodes: NewNodes) -> str:
        assert self.plan.tail is not None
        ints = self.edit.ints
        shape = nodes.add("Shape", [whole])
        n = nodes.add("Gather", [shape, ints([0])], outputs=[self.edit.new_name("n")])
        length = nodes.add("Gather", [shape, ints([_TIME_AXIS])], outputs=[self.edit.new_name("t")])
        rounded_up = nodes.add("Add", [length, ints([1])])
        half = nodes.add("Div", [rounded_up, ints([2])], outputs=[self.edit.new_name("half")])
        wanted = nodes.add("Add", [half, ints([self.plan.tail.halo])])
        end = nodes.add("Min", [length, wanted], outputs=[self.edit.new_name("end")])
        start = nodes.add("Sub", [length, end], outputs=[self.edit.new_name("start")])
        first = nodes.add("Slice", [whole, ints([0]), end, ints([_TIME_AXIS])])
        second = nodes.add("Slice", [whole, start, ints([_LAST]), ints([_TIME_AXIS])])
        self.halves = _Halves(n, half, start)
        pair = self.edit.fresh(f"{whole}/pair")
        return nodes.add("Concat", [first, second], wire.int_attribute("axis", 0), outputs=[pair])

    def _unpair_halves(self, pair: str, nodes: NewNodes) -> str:
        """The kept samples of both halves end to end: [0, half) and [half, T), times rate."""
        assert self.plan.tail is not None and self.halves is not None
        ints, halves = self.edit.ints, self.halves
        rate = ints([self.plan.tail.rate])
        first_end = nodes.add("Mul", [halves.half, rate])
        skipped = nodes.add("Sub", [halves.half, halves.start])
        second_start = nodes.add("Mul", [skipped, rate])
        end, time = ints([_LAST]), ints([_TIME_AXIS])
        first = nodes.add("Slice", [pair, ints([0]), halves.n, ints([0])])
        second = nodes.add("Slice", [pair, halves.n, end, ints([0])])
        kept_first = nodes.add("Slice", [first, ints([0]), first_end, time])
        kept_second = nodes.add("Slice", [second, second_start, end, time])
        whole = self.edit.fresh(f"{pair}/whole")
        axis = wire.int_attribute("axis", _TIME_AXIS)
        return nodes.add("Concat", [kept_first, kept_second], axis, outputs=[whole])

    def _input_at_rank_4(self, node: Node, index: int, nodes: NewNodes) -> str:
        name = node.inputs[index]
        if not name or (node.op_type in CONVOLUTIONS and index == 2):  # absent, or a bias
            return name
        if node.op_type == "Pad" and index > 0:  # the pads, then the scalar padding value
            return self._pads_at_rank_4(name, nodes) if index == 1 else name
        if node.op_type in CONVOLUTIONS and index == 1:
            if name in self.plan.retyped_weights:
                return name
            return self._unsqueeze(name, _LIFTED_AXIS, nodes)  # folded at load time
        if name in self.renamed:
            return self.renamed[name]
        # A convolution's data input has the rank of its weight: 3; so has a Pad's before one.
        reads_rank_3 = node.op_type in CONVOLUTIONS or node.op_type == "Pad"
        rank = 3 if reads_rank_3 else self.graph.ranks[name]
        if rank <= 1:  # scalars and per-time-step vectors broadcast the same way at rank 4
            return name
        # A rank-r operand gains its unit axis just before its last one, as [N, C, T] does.
        return self._unsqueeze(name, rank - 1, nodes)

    def _pads_at_rank_4(self, pads: str, nodes: NewNodes) -> str:
        """Pads of [N, C, T] ([n0, c0, t0, n1, c1, t1]) as those of [N, C, 1, T]: none on the
        unit axis. Computed in the graph from the graph's own pads tensor (an exporter computes
        it from constants; onnxruntime folds both)."""
        if pads not in self.widened_pads:
            ints = self.edit.ints
            with_zero = self.edit.fresh(f"{pads}/with_zero")
            axis = wire.int_attribute("axis", 0)
            nodes.add("Concat", [pads, ints([0])], axis, outputs=[with_zero])
            order = ints([0, 1, 6, 2, 3, 4, 6, 5])  # [n0, c0, 0, t0, n1, c1, 0, t1] of pads + [0]
            widened = self.edit.fresh(f"{pads}/4d")
            self.widened_pads[pads] = nodes.add("Gather", [with_zero, order], outputs=[widened])
        return self.widened_pads[pads]

    def _identity(self, source: str, extent: _Extent, nodes: NewNodes, target: str = "") -> str:
        """``target`` = ``source`` through a 1x1 depthwise convolution with weights 1."""
        channels = extent.channels or 0
        weight = self.edit.floats([1.0] * channels, [channels, 1, 1, 1], f"ones_{channels}")
        target = target or self.edit.fresh(f"{source}/blocked")
        self.declared[target] = extent
        attributes = (
            wire.int_attribute("group", channels),
            wire.ints_attribute("kernel_shape", [1, 1]),
        )
        name = self.edit.new_name("Identity")
        return nodes.add("Conv", [source, weight], *attributes, outputs=[target], name=name)

    def _unsqueeze(self, name: str, axis: int, nodes: NewNodes) -> str:
        key = (name, axis)
        if key not in self.unsqueezed:
            self.unsqueezed[key] = self.edit.fresh(f"{name}/unsqueezed")
            self._axes_node("Unsqueeze", name, self.unsqueezed[key], axis, nodes)
        return self.unsqueezed[key]

    def _axes_node(
        self, op_type: str, source: str, target: str, axis: int, nodes: NewNodes
    ) -> None:
        if self.axes_as_input:
            nodes.add(op_type, [source, self.edit.ints([axis])], outputs=[target])
        else:
            nodes.add(op_type, [source], wire.ints_attribute("axes", [axis]), outputs=[target])

    def _attribute(self, attribute: wire.Attribute) -> bytes | memoryview:
        widen = _SPATIAL_ATTRIBUTES.get(attribute.name)
        if widen is None or not attribute.ints:
            return attribute.raw
        return wire.ints_attribute(attribute.name, widen(attribute.ints))

    def _needed_at_rank_3(self, name: str) -> bool:
        if name in self.graph.outputs or name in self.graph.in_subgraphs:
            return True
        return any(c not in self.plan.lifted for c in self.edit.consumers.get(name, []))


@dataclass(frozen=True)
class _Halves:
    """Names of the one-element int64 tensors that describe the cut."""

    n: str  # batch size before pairing
    half: str  # ceil(T / 2)
    start: str  # where the second half starts in the whole


def _with_unit_axis(dims: list[int]) -> list[int]:
    return [*dims[:_LIFTED_AXIS], 1, *dims[_LIFTED_AXIS:]]
