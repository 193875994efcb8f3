"""Cuts of a synthesizer graph: in front of its decoder (decoding in overlapping chunks), and at
the durations it computes (the pause pass of a voice that comes without a duration graph).

SBV2's synthesizer ends with a HiFi-GAN decoder (``/dec/...`` nodes) fed with the latent frames
``z`` [1, C, frames] and the speaker vector ``g`` [1, gin, 1]. Everything before it (text encoder,
durations, flow) must see the whole sentence; the decoder need not: an output sample depends only
on the latent frames within its receptive field. Cut there, the synthesizer becomes two graphs,
and the decoder can run over the first frames of a sentence first, so that its audio starts
playing while the rest is decoded (engine streaming), with the same samples as one whole run.

A voice that comes as one synthesizer graph (Style-Bert-VITS2's ONNX, AivisHub's AIVMX) has no
duration-predictor graph, but the synthesizer computes the frames of each phone (its one Ceil,
before the prior is expanded along them): the nodes that tensor depends on are exactly a
duration predictor, so cut there it gives the pauses the voice's own predictor decides.

Written with the graph toolkit (graph_edit.py): the weights are never decoded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from . import wire
from .graph_edit import GraphEdit
from .wire import Chunks, Node, Tensor

CUT_VERSION = 1  # bump when a cut changes: the graphs prepared from cuts are then made again
# Node-name scope of the decoder in graphs exported from PyTorch, under any wrapper module
# (``/dec/...`` in ours, ``/net_g/dec/...`` in hayakoe's).
DECODER_SCOPE = "/dec/"
# Ops that keep the time axis aligned (element-wise); anything else in the decoder stops the split.
_ALIGNED = frozenset({"Add", "Sub", "Mul", "Div", "LeakyRelu", "Relu", "Tanh", "Sigmoid"})


@dataclass(frozen=True)
class DecoderShape:
    """What chunked decoding needs to know about a decoder graph."""

    hop: int  # audio samples per latent frame
    context: int  # latent frames on each side that can reach an output sample


@dataclass(frozen=True)
class DecoderSplit:
    front: Chunks  # the synthesizer's inputs -> ``boundary`` tensors
    decoder: Chunks  # ``boundary`` tensors -> the synthesizer's audio
    boundary: tuple[str, ...]  # what front outputs and decoder reads (latent frames, speaker)
    shape: DecoderShape


def split_decoder(model: memoryview, audio: str, scope: str = DECODER_SCOPE) -> DecoderSplit | None:
    """The two halves of a synthesizer whose output ``audio`` the decoder makes, or None when
    its decoder cannot be cut out cleanly. Other outputs (hayakoe's phone durations) are the
    front's and are dropped: the engine reads only the audio."""
    model_fields, graph_field = wire.model_graph(model)
    graph = wire.Graph.parse(wire.as_message(graph_field.value))
    decoder = {p for p, node in graph.nodes.items() if scope in node.name}
    boundary = _boundary(graph, decoder, audio)
    if boundary is None:
        return None
    reach = forward_reach(graph, decoder, boundary)
    if reach is None or audio not in reach:
        return None
    hop, frames = reach[audio]
    shape = DecoderShape(hop=hop, context=math.ceil(frames) + 1)
    front = _encode(graph, _ancestors(graph, boundary), outputs=boundary)
    back = _encode(graph, decoder, inputs=boundary)
    return DecoderSplit(
        front=wire.with_graph(model_fields, graph_field, front),
        decoder=wire.with_graph(model_fields, graph_field, back),
        boundary=boundary,
        shape=shape,
    )


def read_split(source: Path, audio: str) -> DecoderSplit | None:
    """``split_decoder`` of a graph file (mapped: the halves are written out right after)."""
    return split_decoder(wire.mapped(source), audio)


def cut_durations(model: memoryview, output: str | None) -> Chunks | None:
    """The part of a synthesizer that computes the frames of each phone: up to its output
    ``output`` where it gives them (hayakoe's ``durations``), else up to its one Ceil (its
    inputs: the synthesizer's that the part reads); None where it has none or several."""
    model_fields, graph_field = wire.model_graph(model)
    graph = wire.Graph.parse(wire.as_message(graph_field.value))
    if output is None:
        ceils = [node.outputs[0] for node in graph.nodes.values() if node.op_type == "Ceil"]
        if len(ceils) != 1:
            return None
        output = ceils[0]
    keep = _ancestors(graph, (output,))
    return wire.with_graph(model_fields, graph_field, _encode(graph, keep, outputs=(output,)))


def _ancestors(graph: wire.Graph, names: tuple[str, ...]) -> set[int]:
    """The positions of the nodes that ``names`` depend on (their makers included)."""
    maker = graph.producers()
    found: set[int] = set()
    wanted = list(names)
    while wanted:
        position = maker.get(wanted.pop())
        if position is None or position in found:
            continue
        found.add(position)
        wanted.extend(wire.node_reads(graph.nodes[position]))
    return found


def forward_reach(
    graph: wire.Graph, decoder: set[int], boundary: tuple[str, ...]
) -> dict[str, tuple[int, float]] | None:
    """Each time-aligned tensor of the decoder with (samples per frame, reach in frames from its
    inputs), None where the decoder holds an op this walk does not know.

    A convolution adds half its dilated kernel, an upsampling ConvTranspose its whole kernel
    (rounded up). The speaker vector walks along harmlessly: its convolutions have kernel 1.
    """
    reach: dict[str, tuple[int, float]] = {name: (1, 0.0) for name in boundary}
    for position in sorted(decoder):
        node = graph.nodes[position]
        timed = [reach[name] for name in node.inputs if name in reach]
        if not timed:
            continue
        scale, frames = max(timed, key=lambda item: item[1])
        step = reach_step(node, graph.initializers, scale)
        if step is None:
            return None
        new_scale, extra = step
        for output in node.outputs:
            reach[output] = (new_scale, frames + extra)
    return reach


def reach_left(
    graph: wire.Graph, decoder: set[int], reach: dict[str, tuple[int, float]], audio: str
) -> dict[str, float]:
    """For each time-aligned tensor on the way to ``audio``: the frames on either side of an
    audio sample through which that tensor can still reach it."""
    left: dict[str, float] = {audio: 0.0}
    for position in sorted(decoder, reverse=True):
        node = graph.nodes[position]
        after = [left[name] for name in node.outputs if name in left]
        timed = [name for name in node.inputs if name in reach]
        if not after or not timed:
            continue
        scale = max((reach[name] for name in timed), key=lambda item: item[1])[0]
        step = reach_step(node, graph.initializers, scale)
        assert step is not None  # the forward walk knew every op
        for name in timed:
            left[name] = max(left.get(name, 0.0), max(after) + step[1])
    return left


def reach_step(node: Node, initializers: dict[str, Tensor], scale: int) -> tuple[int, float] | None:
    """(samples per frame after ``node``, frames of reach it adds), None for an unknown op."""
    if node.op_type in _ALIGNED:
        return scale, 0.0
    if node.op_type not in ("Conv", "ConvTranspose"):
        return None
    weight = initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if weight is None or len(weight.dims) != 3:
        return None
    kernel = weight.dims[2]
    dilation = node.first_int("dilations", 1)
    stride = node.first_int("strides", 1)
    if node.op_type == "Conv":
        if stride != 1:
            return None
        return scale, (kernel - 1) * dilation / 2 / scale
    return scale * stride, math.ceil(kernel / stride) / scale


def is_upsampling(node: Node) -> bool:
    """A strided ConvTranspose (1-D, or lifted to [1, s]): in a published decoder, an
    upsampling."""
    strides = node.attribute("strides")
    return node.op_type == "ConvTranspose" and strides is not None and max(strides.ints) > 1


def _boundary(graph: wire.Graph, decoder: set[int], audio: str) -> tuple[str, ...] | None:
    """The tensors the decoder reads from the rest of the graph (latent, speaker).

    None unless the decoder is a clean tail: it makes the audio output and no other, nothing
    outside reads its tensors, it holds no subgraph, and the latent frames come in with at most
    one other tensor (the speaker vector; a single-speaker VITS has none).
    """
    if not decoder:
        return None
    made = {out for p in decoder for out in graph.nodes[p].outputs}
    if audio not in made or len(made.intersection(graph.outputs)) != 1:
        return None
    for position, node in graph.nodes.items():
        if position in decoder and any(a.graphs for a in node.attributes):
            return None
        if position not in decoder and made.intersection(wire.node_reads(node)):
            return None
    entering = [
        name
        for p in sorted(decoder)
        for name in graph.nodes[p].inputs
        if name and name not in made and name not in graph.initializers
    ]
    unique = list(dict.fromkeys(entering))
    if not 1 <= len(unique) <= 2 or any(name in graph.inputs for name in unique):
        return None
    return tuple(unique)


def _encode(
    graph: wire.Graph, keep: set[int], outputs: tuple[str, ...] = (), inputs: tuple[str, ...] = ()
) -> Chunks:
    """The graph with only the ``keep`` nodes, and the initializers, inputs and outputs they
    read or make; ``outputs`` replace its outputs, ``inputs`` its inputs (both declared as
    float tensors)."""
    edit = GraphEdit(graph, "cut")
    edit.keep_only(keep, inputs, outputs)
    return edit.encode()
