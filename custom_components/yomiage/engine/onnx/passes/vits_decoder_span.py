"""The decoder cut to the span it is asked for, layer by layer (where onnxruntime has no blocked
kernels: aarch64, a Raspberry Pi).

A streamed sentence is decoded in pieces (synthesis/pieces.py): each run reads a window of latent
frames with ``context`` frames on either side of its span, the decoder's whole receptive field,
so that the span's samples come out as in one run over the sentence. Only the frame-rate layers
need all of that overlap: after each upsampling the rest of the decoder reaches fewer frames
(the stage-1 residual blocks hold most of the receptive field). This pass gives the decoder an
int64 input ``SPAN_INPUT``, the span's first and end frame within the window, and in front of
each upsampling ConvTranspose that all of the audio passes through cuts the activations to the
span and the frames the rest of the decoder still reaches from there (walked back from the audio,
``decoder_graph.reach_left``); the audio comes out cut to the span. The kept samples are the
same sums over the same values: a piece's audio-rate layers decode little more than its span.

Each cut shifts the time axis after it by what it drops, which the next cut and the audio's take
off. Not where onnxruntime has blocked kernels (x86): there vits_conv_lift keeps the audio-rate
layers in the blocked layout and runs the narrow end as two halves, which a cut would stop.
"""

from __future__ import annotations

import math

from .. import wire
from ..decoder_graph import forward_reach, is_upsampling, reach_left
from ..graph_edit import GraphEdit, NewNodes, edit_model
from ..wire import Chunks

SCOPE = "decoder_span"
# The decoder's int64 input [2]: the first and the end frame, within the window of latent frames
# it reads, of the span whose samples it gives.
SPAN_INPUT = "yomiage/span"
_MIN_OPSET = 12  # Max takes int64 from opset 12 on


def cut_to_span(model: memoryview, block: int) -> Chunks | None:
    """The decoder ``model`` cut to the span it is fed, where onnxruntime's blocked kernels hold
    ``block`` floats (0: none); None where they exist, or where the graph is not a decoder of
    one audio output whose time-aligned ops the receptive-field walk knows."""
    if block:
        return None
    edited = edit_model(model, SCOPE, wire.Graph.parse)
    graph = edited.graph
    if edited.opset < _MIN_OPSET or len(graph.outputs) != 1 or SPAN_INPUT in graph.inputs:
        return None
    (audio,) = graph.outputs
    inputs = tuple(graph.inputs)
    reach = forward_reach(graph, set(graph.nodes), inputs)
    if reach is None or audio not in reach:
        return None
    cropped = _cut(edited.edit, reach, audio)
    spanned = (*inputs, SPAN_INPUT)
    edited.edit.keep_only(set(graph.nodes), spanned, (cropped,), {SPAN_INPUT: wire.TENSOR_INT64})
    return edited.encode()


def _cut(edit: GraphEdit, reach: dict[str, tuple[int, float]], audio: str) -> str:
    """The cuts written into ``edit``; the name of the audio cut to the span."""
    graph = edit.graph
    left = reach_left(graph, set(graph.nodes), reach, audio)
    nodes = edit.nodes()
    first = nodes.add("Slice", [SPAN_INPUT, edit.ints([0]), edit.ints([1])])
    end = nodes.add("Slice", [SPAN_INPUT, edit.ints([1]), edit.ints([2])])
    axis = edit.ints([-1])
    dropped, dropped_scale = edit.ints([0]), 1  # samples cut off the front so far, at that scale
    for position in _upsamplings(graph, reach, audio):
        source = graph.nodes[position].inputs[0]
        scale = reach[source][0]
        margin = edit.ints([math.ceil(left[source] * scale)])
        origin = nodes.add("Mul", [dropped, edit.ints([scale // dropped_scale])])
        reached = nodes.add("Sub", [_at(nodes, first, scale), margin])
        low = nodes.add("Max", [reached, edit.ints([0])])
        high = nodes.add("Add", [_at(nodes, end, scale), margin])
        start, stop = nodes.add("Sub", [low, origin]), nodes.add("Sub", [high, origin])
        edit.rename(source, nodes.add("Slice", [source, start, stop, axis]))
        dropped, dropped_scale = low, scale
    hop = reach[audio][0]
    origin = nodes.add("Mul", [dropped, edit.ints([hop // dropped_scale])])
    start = nodes.add("Sub", [_at(nodes, first, hop), origin])
    stop = nodes.add("Sub", [_at(nodes, end, hop), origin])
    cropped = nodes.add("Slice", [audio, start, stop, axis])
    edit.insert_after(edit.producers[audio], nodes)
    return cropped


def _at(nodes: NewNodes, frame: str, scale: int) -> str:
    """The sample index, at ``scale`` samples per frame, of the frame index ``frame``."""
    return nodes.add("Mul", [frame, nodes.edit.ints([scale])])


def _upsamplings(graph: wire.Graph, reach: dict[str, tuple[int, float]], audio: str) -> list[int]:
    """The upsampling ConvTransposes that every path from the inputs to ``audio`` passes
    through (a cut in front of one shifts all that follows) and that alone read their input, in
    the order they run."""
    readers = graph.consumers()
    found: list[int] = []
    for position in sorted(graph.nodes):
        node = graph.nodes[position]
        if not is_upsampling(node):
            continue
        source = node.inputs[0]
        alone = source in reach and len(readers[source]) == 1
        if alone and audio not in _reached(graph, set(graph.nodes) - {position}, reach):
            found.append(position)
    return found


def _reached(graph: wire.Graph, nodes: set[int], reach: dict[str, tuple[int, float]]) -> set[str]:
    """The tensors the graph's inputs reach through ``nodes``."""
    made = {name for name in graph.inputs if name in reach}
    for position in sorted(nodes):
        node = graph.nodes[position]
        if any(name in made for name in node.inputs):
            made.update(node.outputs)
    return made
