"""Every load-time pass, in the order the passes run, one line each.

A line names the pass, the function that rewrites an encoded ModelProto (None: nothing to do
in it), its version (bump it when the pass changes what it writes: graphs it prepared are then
made again), the kinds of graph it applies to, and what its result depends on besides the graph
(handed to the function as keyword arguments of those names, and written into the cache key of
each graph it applies to, so a graph is prepared again only when something its own passes
depend on changes). A lever for one family of CPUs says so in its comment. Adding a pass: its
module in this folder and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ..machine import Dependency, Machine
from ..wire import Chunks
from . import (
    bert_position_buckets,
    vits_attention_band,
    vits_conv_lift,
    vits_decoder_span,
    vits_flow_mask,
    vits_minimal_filtering,
)


class GraphKind(StrEnum):
    """What a prepared graph is: each is prepared with its own passes and its own cache key."""

    LANGUAGE_MODEL = "language model"  # BERT
    SYNTHESIZER = "synthesizer"  # a voice's synthesizer run whole (no clean cut before its decoder)
    FRONT = "front"  # the synthesizer up to its decoder (decoder_graph.py)
    DECODER = "decoder"  # the synthesizer's decoder (decoder_graph.py)
    DURATIONS = "durations"  # a duration graph, or the synthesizer's part that computes them


_VOICE = frozenset({GraphKind.SYNTHESIZER, GraphKind.FRONT, GraphKind.DECODER, GraphKind.DURATIONS})
_ENCODERS = frozenset({GraphKind.SYNTHESIZER, GraphKind.FRONT, GraphKind.DURATIONS})
_FLOW = frozenset({GraphKind.SYNTHESIZER, GraphKind.FRONT})


@dataclass(frozen=True)
class Pass:
    name: str
    rewrite: Callable[..., Chunks | None]
    version: int
    kinds: frozenset[GraphKind]
    depends_on: tuple[Dependency, ...] = ()

    def run(self, model: memoryview, machine: Machine) -> Chunks | None:
        """The rewritten model, or None where the pass leaves it as it is."""
        return self.rewrite(model, **{d.value: machine.value(d) for d in self.depends_on})

    def key(self, machine: Machine) -> str:
        """What a graph this pass prepared depends on through it."""
        depends = (f" {d.value} {machine.value(d)}" for d in self.depends_on)
        return f"{self.name} {self.version}{''.join(depends)}"


PASSES: tuple[Pass, ...] = (
    # First: it tells the flow by the exporter's node names, which later passes' nodes lack.
    Pass("flow mask", vits_flow_mask.leave_out_flow_mask, 2, _FLOW),
    Pass("attention band", vits_attention_band.band_relative_attention, 2, _ENCODERS),
    # Only where onnxruntime has no NCHWc kernels (aarch64: a Raspberry Pi). Before the lift,
    # which reads the decoder as published.
    Pass(
        "decoder span",
        vits_decoder_span.cut_to_span,
        1,
        frozenset({GraphKind.DECODER}),
        (Dependency.BLOCK,),
    ),
    # Every CPU; its blocked-layout parts (identities, halved tail, frame-rate lift) only where
    # onnxruntime has NCHWc kernels (x86's wheels; not the aarch64 wheel a Raspberry Pi runs).
    Pass("conv lift", vits_conv_lift.lift_for_cpu, 8, _VOICE, (Dependency.BLOCK,)),
    # Only where onnxruntime has no blocked kernels (aarch64: a Raspberry Pi); after the lift,
    # whose rank-4 convolutions it takes as they are.
    Pass(
        "minimal filtering",
        vits_minimal_filtering.minimal_filtering_for_cpu,
        8,
        frozenset({GraphKind.SYNTHESIZER, GraphKind.FRONT, GraphKind.DECODER}),
        (Dependency.BLOCK,),
    ),
    Pass(
        "position buckets",
        bert_position_buckets.slice_relative_positions,
        1,
        frozenset({GraphKind.LANGUAGE_MODEL}),
    ),
)


def passes_for(kind: GraphKind) -> tuple[Pass, ...]:
    """The passes a graph of ``kind`` is prepared with, in order."""
    return tuple(step for step in PASSES if kind in step.kinds)


def prepared_in_memory(model: bytes, kind: GraphKind, machine: Machine) -> bytes:
    """``model`` after the passes of ``kind`` as ``machine`` calls for them, held in memory: for
    the tools and checks that read a prepared graph whole (the engine's own preparation goes
    file to file, sessions.py, so that a large graph is never held twice)."""
    for step in passes_for(kind):
        rewritten = step.run(memoryview(model), machine)
        if rewritten is not None:
            model = b"".join(bytes(part) for part in rewritten.parts)
    return model
