"""The convolution lift (engine/onnx/passes/vits_conv_lift.py): 1-D convolutions as 2-D ones,
on graphs written by hand and on the tiny voice's graphs as each exporter writes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.passes.vits_conv_lift import (
    AVX2_BLOCK,
    DEFAULT_MIN_CHANNELS,
    frame_rate_lift_pays,
    lift_convolutions,
    lift_for_cpu,
)
from custom_components.yomiage.engine.onnx.sessions import SessionFactory

from ..onnx_build import ModelBuilder, conv_attributes
from ..sample_graphs import (
    CHANNELS,
    FRONTS,
    TOLERANCE,
    assert_front_keeps_the_samples,
    dialect_front,
    kernel_ranks,
    nodes_of,
    residual_feeds,
    residual_model,
    run,
    synthesizer_feeds,
)


def write_lifted(
    source: Path,
    target: Path,
    min_channels: int = DEFAULT_MIN_CHANNELS,
    audio_rate_only: bool = True,
) -> bool:
    """``source`` lifted (``lift_convolutions`` with these settings) into ``target``."""
    return wire.rewrite_file(
        source, target, lambda model: lift_convolutions(model, min_channels, audio_rate_only)
    )


def lifted(
    model: bytes, min_channels: int = 0, audio_rate_only: bool = True, block: int = AVX2_BLOCK
) -> bytes:
    chunks = lift_convolutions(memoryview(model), min_channels, audio_rate_only, block)
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


@pytest.mark.parametrize("opset", [11, 17])
@pytest.mark.parametrize("frames", [1, 7, 64])
def test_lifted_graph_gives_the_same_outputs(opset: int, frames: int) -> None:
    original = residual_model(opset)
    rewritten = lifted(original)
    feeds = residual_feeds(frames)
    for before, after in zip(run(original, feeds), run(rewritten, feeds), strict=True):
        assert before.shape == after.shape
        np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


def test_audio_rate_convolutions_become_2d_with_one_reshape_per_region_edge() -> None:
    rewritten = lifted(residual_model())
    # The frame-rate Conv before the upsampling stays 1-D; everything from the ConvTranspose on
    # is lifted.
    assert kernel_ranks(rewritten) == [1, 2, 2, 2]
    ops = [node.op_type for node in nodes_of(rewritten)]
    # pre enters once although the ConvTranspose is its only reader; mask enters for the Mul.
    assert ops.count("Unsqueeze") == 2
    # y leaves as a graph output, s for the ReduceMean that stays at rank 3.
    assert ops.count("Squeeze") == 2
    assert ops.count("ReduceMean") == 1


def test_every_convolution_lifts_when_not_limited_to_audio_rate() -> None:
    original = residual_model()
    rewritten = lifted(original, audio_rate_only=False)
    assert kernel_ranks(rewritten) == [2, 2, 2, 2]
    feeds = residual_feeds(11)
    for before, after in zip(run(original, feeds), run(rewritten, feeds), strict=True):
        np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


def test_narrow_convolutions_stay_1d_below_min_channels() -> None:
    assert lift_convolutions(memoryview(residual_model()), min_channels=CHANNELS + 1) is None
    # The last Conv has 8 output channels: with a threshold of 16 it stays 1-D.
    assert kernel_ranks(lifted(residual_model(), min_channels=CHANNELS)) == [1, 2, 2, 1]


def test_graph_without_upsampling_is_left_alone() -> None:
    b = ModelBuilder()
    x = b.input("x", [1, CHANNELS, "T"])
    weight = np.ones((CHANNELS, CHANNELS, 3), dtype=np.float32)
    b.node("Conv", [x, b.weight("w", weight)], "y", *conv_attributes(3))
    b.output("y", [1, CHANNELS, "T"])
    assert lift_convolutions(memoryview(b.encode()), min_channels=0) is None
    assert lift_convolutions(memoryview(b.encode()), 0, audio_rate_only=False) is not None


def test_frame_rate_convolutions_lift_only_in_a_graph_without_upsampling() -> None:
    b = ModelBuilder()
    x = b.input("x", [1, CHANNELS, "T"])
    mask = b.input("mask", [1, 1, "T"])
    weight = (np.random.default_rng(3).standard_normal((CHANNELS, CHANNELS, 5)) * 0.2).astype(
        np.float32
    )
    masked = b.node("Mul", [x, mask], "masked")
    c = b.node("Conv", [masked, b.weight("w", weight)], "c", *conv_attributes(5))
    r = b.node("Relu", [c], "r")
    b.node("Mul", [r, mask], "y")
    b.output("y", [1, CHANNELS, "T"])
    front = b.encode()
    chunks = lift_convolutions(memoryview(front), min_channels=0, frame_rate=True)
    assert chunks is not None
    rewritten = b"".join(bytes(part) for part in chunks.parts)
    assert kernel_ranks(rewritten) == [2]
    rng = np.random.default_rng(4)
    feeds = {
        "x": rng.standard_normal((1, CHANNELS, 23)).astype(np.float32),
        "mask": np.concatenate([np.ones(20), np.zeros(3)]).reshape(1, 1, 23).astype(np.float32),
    }
    np.testing.assert_allclose(run(rewritten, feeds)[0], run(front, feeds)[0], atol=TOLERANCE)
    # Where a graph has an audio-rate part (a decoder), its frame-rate part stays 1-D.
    decoder = lift_convolutions(memoryview(residual_model()), min_channels=0, frame_rate=True)
    assert decoder is not None
    assert kernel_ranks(b"".join(bytes(p) for p in decoder.parts)) == kernel_ranks(
        lifted(residual_model())
    )


def test_frame_rate_convolutions_lift_wherever_there_are_blocked_kernels() -> None:
    assert frame_rate_lift_pays(AVX2_BLOCK)
    assert frame_rate_lift_pays(16)  # AVX-512
    assert not frame_rate_lift_pays(0)  # the 1-D kernels are all there is


def test_weight_read_elsewhere_keeps_its_shape_and_is_unsqueezed() -> None:
    original = residual_model(weight_also_output=True)
    rewritten = lifted(original)
    feeds = residual_feeds(9)
    outputs = run(rewritten, feeds)
    assert outputs[2].shape == (CHANNELS, CHANNELS, 3)
    for before, after in zip(run(original, feeds), outputs, strict=True):
        np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


def test_graph_with_external_weights_is_left_alone() -> None:
    b = ModelBuilder()
    x = b.input("x", [1, CHANNELS, "T"])
    weight = np.zeros((CHANNELS, CHANNELS, 3), dtype=np.float32)
    b.node("Conv", [x, b.weight("w", weight, external="weights.bin")], "y", *conv_attributes(3))
    b.output("y", [1, CHANNELS, "T"])
    assert lift_convolutions(memoryview(b.encode()), 0, audio_rate_only=False) is None


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff garbage"])
def test_what_is_not_a_model_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(wire.WireError):
        wire.rewrite_file(path, tmp_path / "out.onnx", lambda model: lift_for_cpu(model, 0))


@pytest.mark.parametrize(
    ("graph", "audio_rate_only"),
    [("synthesizer.onnx", True), ("duration_predictor.onnx", False)],
)
def test_tiny_bundle_graphs_agree_after_the_rewrite(
    tiny_bundle: Path, tmp_path: Path, graph: str, audio_rate_only: bool
) -> None:
    source = next((tiny_bundle / "onnx" / "speakers").iterdir()) / graph
    rewritten = tmp_path / graph
    # The tiny decoder is 16 channels wide at most: lift everything to test the rewrite.
    assert write_lifted(source, rewritten, min_channels=0, audio_rate_only=audio_rate_only)
    assert 2 in kernel_ranks(rewritten.read_bytes())
    plain = SessionFactory(threads=1, use_cache=False)
    before = plain.create(source, GraphKind.SYNTHESIZER)
    after = plain.create(rewritten, GraphKind.SYNTHESIZER)
    for phones in (5, 33, 80):
        feeds = synthesizer_feeds(before, phones)
        (expected,) = before.run(None, feeds)
        (got,) = after.run(None, feeds)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("dialect", sorted(FRONTS))
def test_each_dialects_front_lifted_at_frame_rate_gives_its_samples(
    tiny_bundle: Path, dialect: str
) -> None:
    """The synthesizer's front (text encoder, durations, flow) with every convolution lifted,
    then its decoder as published: the samples of the whole graph as exported, within 1 LSB."""
    whole = dialect_front(tiny_bundle, dialect)
    chunks = lift_convolutions(memoryview(whole.front), min_channels=0, frame_rate=True)
    assert chunks is not None
    rewritten = b"".join(bytes(part) for part in chunks.parts)
    assert 2 in kernel_ranks(rewritten)
    assert_front_keeps_the_samples(whole, rewritten)


def test_duration_predictor_has_no_audio_rate_part(tiny_bundle: Path, tmp_path: Path) -> None:
    source = next((tiny_bundle / "onnx" / "speakers").iterdir()) / "duration_predictor.onnx"
    assert not write_lifted(source, tmp_path / "lifted.onnx", min_channels=0)
