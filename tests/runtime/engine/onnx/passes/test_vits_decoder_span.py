"""The decoder cut to the span it is fed (engine/onnx/passes/vits_decoder_span.py), as graphs are
prepared where onnxruntime has no blocked kernels (aarch64): pieces of each exporter's tiny
decoder give the samples of its whole synthesizer as published (Piper's trained decoder:
test_trained_decoder.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.passes.vits_decoder_span import cut_to_span
from custom_components.yomiage.engine.onnx.sessions import SessionFactory
from custom_components.yomiage.engine.synthesis.pieces import decode_spans

from ..sample_graphs import (
    FRONTS,
    decode_cut_to_spans,
    dialect_front,
    nodes_of,
    pcm,
    prepared_without_blocked_kernels,
    synthesizer_feeds,
)


def _joined(chunks: wire.Chunks) -> bytes:
    return b"".join(bytes(part) for part in chunks.parts)


@pytest.mark.parametrize("dialect", sorted(FRONTS))
@pytest.mark.parametrize("first_frames", [3, 24])
def test_pieces_cut_to_their_span_give_the_published_samples(
    tiny_bundle: Path, dialect: str, first_frames: int
) -> None:
    """A first piece shorter than the overlap and one longer, then pieces whose windows reach
    past both ends of the sentence or neither: the published synthesizer's samples, 1 LSB."""
    whole = dialect_front(tiny_bundle, dialect)
    plain = SessionFactory(threads=1, use_cache=False)
    published = plain.create(whole.source, GraphKind.SYNTHESIZER)
    front = plain._open(whole.front, plain.options())
    decoder = plain._open(prepared_without_blocked_kernels(whole.split.decoder), plain.options())
    feeds = synthesizer_feeds(published, 80)
    expected = np.asarray(published.run([whole.audio], feeds)[0]).reshape(-1)
    boundary = dict(
        zip(whole.split.boundary, front.run(list(whole.split.boundary), feeds), strict=True)
    )
    frames = max(value.shape[-1] for value in boundary.values())
    context = whole.split.shape.context
    spans = decode_spans(frames, first_frames, context, max_frames=frames // 4)
    assert len(spans) >= 4 and frames > 2 * context + frames // 4  # middle pieces cut both sides
    joined = decode_cut_to_spans(decoder, boundary, spans, context)
    assert joined.shape == expected.shape
    assert np.abs(pcm(joined) - pcm(expected)).max() <= 1


def test_every_upsampling_reads_its_input_cut_to_the_span(tiny_bundle: Path) -> None:
    whole = dialect_front(tiny_bundle, "hayakoe")
    cut = cut_to_span(memoryview(_joined(whole.split.decoder)), block=0)
    assert cut is not None
    nodes = nodes_of(_joined(cut))
    made_by = {output: node for node in nodes for output in node.outputs}
    upsamplings = [
        n for n in nodes if n.op_type == "ConvTranspose" and n.first_int("strides", 1) > 1
    ]
    assert len(upsamplings) >= 2
    assert all(made_by[n.inputs[0]].op_type == "Slice" for n in upsamplings)


def test_left_alone_where_onnxruntime_has_blocked_kernels_or_the_cut_is_made(
    tiny_bundle: Path,
) -> None:
    """x86: the lift's blocked residual stream and halved tail would stop at each cut."""
    decoder = _joined(dialect_front(tiny_bundle, "hayakoe").split.decoder)
    assert cut_to_span(memoryview(decoder), block=8) is None
    assert cut_to_span(memoryview(decoder), block=16) is None
    cut = cut_to_span(memoryview(decoder), block=0)
    assert cut is not None
    assert cut_to_span(memoryview(_joined(cut)), block=0) is None  # it takes SPAN_INPUT already
