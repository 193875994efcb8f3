"""Load-time rewrite of 1-D convolutions to 2-D ones (engine/onnx/rewrite.py) and its disk cache."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.errors import BundleError
from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.decoder_graph import DecoderSplit, read_split
from custom_components.yomiage.engine.onnx.rewrite import (
    AVX2_BLOCK,
    frame_rate_lift_pays,
    lift_convolutions,
    write_lifted,
)
from custom_components.yomiage.engine.onnx.sessions import GRAPH_FILE, WEIGHTS_FILE, SessionFactory
from custom_components.yomiage.engine.synthesis.engine import Engine

from ...voice_files import DIALECTS, SBV2_SPEAKER, SPEAKER_DIR
from ..common import QUIET, THREE_SENTENCES
from .onnx_build import ModelBuilder, conv_attributes, float_attribute, int_attribute

CHANNELS = 16
# Style-Bert-VITS2's converter names three of the synthesizer's inputs its own way.
CONVERTER_NAMES = {"x": "x_tst", "x_lengths": "x_tst_lengths", "tone": "tones"}
TOLERANCE = 1e-5  # the contract: rewritten graphs agree with the original to float rounding


def residual_model(opset: int = 17, weight_also_output: bool = False) -> bytes:
    """A decoder-like graph: Conv at frame rate -> ConvTranspose (x2) -> LeakyRelu -> Conv ->
    residual Add -> Div -> mask -> Conv (to half the channels) -> Tanh.

    ``s`` (the residual sum) is also read by a ReduceMean that is not lifted, so it must leave
    the rank-4 region through a Squeeze; ``mask`` is a rank-3 input that must be unsqueezed.
    """
    rng = np.random.default_rng(0)

    def weight(*shape: int) -> NDArray[np.float32]:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    b = ModelBuilder(opset)
    x = b.input("x", [1, CHANNELS, "T"])
    mask = b.input("mask", [1, 1, "T2"])
    pre = b.node(
        "Conv", [x, b.weight("w0", weight(CHANNELS, CHANNELS, 3))], "pre", *conv_attributes(3)
    )
    wt = b.weight("wt", weight(CHANNELS, CHANNELS, 4))
    up = b.node("ConvTranspose", [pre, wt], "up", *conv_attributes(4, stride=2, pad=1))
    a = b.node("LeakyRelu", [up], "a", float_attribute("alpha", 0.1))
    w1 = b.weight("w1", weight(CHANNELS, CHANNELS, 3))
    bias = b.weight("b1", weight(CHANNELS))
    c1 = b.node("Conv", [a, w1, bias], "c1", *conv_attributes(3, dilation=2))
    s = b.node("Add", [up, c1], "s")
    d = b.node("Div", [s, b.weight("two", np.array(2.0, dtype=np.float32))], "d")
    m = b.node("Mul", [d, mask], "m")
    w2 = b.weight("w2", weight(CHANNELS // 2, CHANNELS, 3))
    post = b.node("Conv", [m, w2], "post", *conv_attributes(3))
    b.node("Tanh", [post], "y")
    keepdims = int_attribute("keepdims", 1)
    b.node("ReduceMean", [s], "mean", wire.ints_attribute("axes", [1]), keepdims)
    b.output("y", [1, CHANNELS // 2, "T2"])
    b.output("mean", [1, 1, "T2"])
    if weight_also_output:
        b.node("Identity", [w1], "w1_copy")
        b.output("w1_copy", [CHANNELS, CHANNELS, 3])
    return b.encode()


def run(model: bytes | Path, feeds: dict[str, NDArray[np.generic]]) -> list[NDArray[np.generic]]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return [np.asarray(out) for out in session.run(None, feeds)]


def residual_feeds(frames: int) -> dict[str, NDArray[np.float32]]:
    rng = np.random.default_rng(frames)
    mask = np.ones((1, 1, 2 * frames), dtype=np.float32)
    mask[..., frames:] = 0
    return {"x": rng.standard_normal((1, CHANNELS, frames)).astype(np.float32), "mask": mask}


def lifted(
    model: bytes, min_channels: int = 0, audio_rate_only: bool = True, block: int = AVX2_BLOCK
) -> bytes:
    chunks = lift_convolutions(memoryview(model), min_channels, audio_rate_only, block)
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def nodes_of(model: bytes) -> list[wire.Node]:
    graph = next(f for f in wire.fields(memoryview(model)) if f.number == wire.MODEL_GRAPH)
    return [
        wire.parse_node(item)
        for item in wire.fields(wire.as_message(graph.value))
        if item.number == wire.GRAPH_NODE
    ]


IDENTITY = "yomiage/Identity/"  # names of the identity convolutions that keep layouts blocked


def kernel_ranks(model: bytes) -> list[int]:
    """Ranks of the graph's own convolutions (not the identities the rewrite adds)."""
    ranks = []
    for node in nodes_of(model):
        if node.op_type in ("Conv", "ConvTranspose") and not node.name.startswith(IDENTITY):
            kernel = node.attribute("kernel_shape")
            assert kernel is not None
            ranks.append(len(kernel.ints))
    return ranks


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


# -- the session cache (onnx/sessions.py) ---------------------------------------------------------
@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "bundle" / "synthesizer.onnx"
    path.parent.mkdir()
    path.write_bytes(residual_model())
    return path


def cached_factory(cache: Path) -> SessionFactory:
    return SessionFactory(threads=1, cache_dir=cache, use_cache=True)


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "sessions").glob("*"))


def outputs(session: ort.InferenceSession, frames: int = 6) -> list[NDArray[np.float32]]:
    return [np.asarray(out) for out in session.run(None, residual_feeds(frames))]


def test_session_cache_prepares_once_then_maps_the_saved_graph(
    graph_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = cached_factory(cache).create(graph_file)
    (entry,) = entries(cache)
    assert sorted(path.name for path in entry.iterdir()) == [GRAPH_FILE, WEIGHTS_FILE]
    stamp = (entry / GRAPH_FILE).stat().st_mtime_ns
    second = cached_factory(cache).create(graph_file)
    assert entries(cache) == [entry] and (entry / GRAPH_FILE).stat().st_mtime_ns == stamp
    plain = SessionFactory(threads=1, use_cache=False).create(graph_file)
    for session in (first, second):
        for got, expected in zip(outputs(session), outputs(plain), strict=True):
            np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_changed_source_gets_a_new_entry_and_the_old_one_goes(
    graph_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cached_factory(cache).create(graph_file)
    (first,) = entries(cache)
    graph_file.write_bytes(residual_model(opset=11))
    os.utime(graph_file, ns=(1, 1))
    cached_factory(cache).create(graph_file)
    (second,) = entries(cache)
    assert second != first


def test_unwritable_cache_loads_the_published_graph_with_a_warning(
    graph_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder would go")
    with caplog.at_level(logging.WARNING):
        session = cached_factory(blocked).create(graph_file)
    assert "Graph cache unusable" in caplog.text and str(graph_file) in caplog.text
    assert outputs(session)[0].shape == (1, CHANNELS // 2, 12)


def test_damaged_cache_entry_is_dropped_and_the_source_used(
    graph_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "cache"
    cached_factory(cache).create(graph_file)
    (entry,) = entries(cache)
    (entry / GRAPH_FILE).write_bytes(b"not a graph")
    with caplog.at_level(logging.WARNING):
        session = cached_factory(cache).create(graph_file)
    assert "Discarding cached graph" in caplog.text
    assert not entry.exists()
    assert outputs(session)[0].shape == (1, CHANNELS // 2, 12)


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff garbage", b"\x0a\x05short"])
def test_broken_graph_error_names_the_bundle_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(BundleError) as caught:
        cached_factory(tmp_path / "cache").create(path)
    assert caught.value.path == str(path)
    assert entries(tmp_path / "cache") == []


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff garbage"])
def test_write_lifted_rejects_what_is_not_a_model(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(wire.WireError):
        write_lifted(path, tmp_path / "out.onnx")


def test_cache_can_be_switched_off_by_environment(
    monkeypatch: pytest.MonkeyPatch, graph_file: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", "0")
    monkeypatch.setenv("YOMIAGE_CACHE_DIR", str(tmp_path / "cache"))
    factory = SessionFactory(threads=1)
    assert not factory.use_cache
    factory.create(graph_file)
    assert not (tmp_path / "cache").exists()


def test_cache_dir_comes_from_environment(
    monkeypatch: pytest.MonkeyPatch, graph_file: Path, tmp_path: Path
) -> None:
    monkeypatch.delenv("YOMIAGE_GRAPH_CACHE", raising=False)
    monkeypatch.setenv("YOMIAGE_CACHE_DIR", str(tmp_path / "from-env"))
    SessionFactory(threads=1).create(graph_file)
    assert len(entries(tmp_path / "from-env")) == 1


# -- the real graphs of the tiny bundle ------------------------------------------------------------
def synthesizer_feeds(session: ort.InferenceSession, phones: int) -> dict[str, NDArray[np.generic]]:
    rng = np.random.default_rng(phones)
    hidden = next(i.shape[1] for i in session.get_inputs() if i.name == "bert")
    x = rng.integers(1, 100, (1, phones), dtype=np.int64)
    x[:, ::2] = 0
    feeds: dict[str, NDArray[np.generic]] = {
        "x": x,
        "x_lengths": np.array([phones], dtype=np.int64),
        "sid": np.array([0], dtype=np.int64),
        "tone": rng.integers(6, 8, (1, phones), dtype=np.int64),
        "language": np.ones((1, phones), dtype=np.int64),
        "bert": rng.standard_normal((1, hidden, phones)).astype(np.float32),
        "style_vec": rng.standard_normal((1, 256)).astype(np.float32),
        "length_scale": np.array([1.0], dtype=np.float32),
        "noise_scale_w": np.array([0.0], dtype=np.float32),  # noise off: deterministic
        "sdp_ratio": np.array([0.2], dtype=np.float32),
        "noise_scale": np.array([0.0], dtype=np.float32),
    }
    # The graph's own names and ranks (Style-Bert-VITS2's converter: its names, 0-d scalars).
    ranks = {i.name: len(i.shape) for i in session.get_inputs()}
    named = {CONVERTER_NAMES.get(n, n) if n not in ranks else n: v for n, v in feeds.items()}
    return {n: v.reshape(()) if ranks[n] == 0 else v for n, v in named.items() if n in ranks}


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
    before, after = plain.create(source), plain.create(rewritten)
    for phones in (5, 33, 80):
        feeds = synthesizer_feeds(before, phones)
        (expected,) = before.run(None, feeds)
        (got,) = after.run(None, feeds)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


# Each exporter's synthesizer of the tiny voice, and the name of its audio output.
FRONTS = {
    "ours": (None, "audio"),
    "hayakoe": (DIALECTS / "hayakoe" / SPEAKER_DIR / "synthesizer.onnx", "audio"),
    "sbv2-converter": (SBV2_SPEAKER / "synthesizer.onnx", "output"),
}


def pcm(audio: NDArray[np.generic]) -> NDArray[np.int64]:
    return np.clip(np.round(np.asarray(audio, dtype=np.float64) * 32767), -32768, 32767).astype(
        np.int64
    )


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


@dataclass(frozen=True)
class DialectFront:
    """A dialect's whole synthesizer (ours: the tiny bundle's), where it is cut at its decoder,
    and its front's bytes."""

    source: Path
    audio: str
    split: DecoderSplit
    front: bytes


def dialect_front(tiny_bundle: Path, dialect: str) -> DialectFront:
    path, audio = FRONTS[dialect]
    source = path or next((tiny_bundle / "onnx" / "speakers").iterdir()) / "synthesizer.onnx"
    split = read_split(source, audio)
    assert split is not None
    return DialectFront(source, audio, split, b"".join(bytes(part) for part in split.front.parts))


def assert_front_keeps_the_samples(whole: DialectFront, front: bytes, threads: int = 1) -> None:
    """``front`` (a rewritten form of ``whole``'s front) then the decoder as published give the
    samples of the whole synthesizer as exported, within 1 LSB."""
    plain = SessionFactory(threads=threads, use_cache=False)
    published = plain.create(whole.source)
    rewritten = plain._open(front, plain.options())
    decoder = plain._open(b"".join(bytes(p) for p in whole.split.decoder.parts), plain.options())
    for phones in (5, 33, 80):
        feeds = synthesizer_feeds(published, phones)
        expected = published.run([whole.audio], feeds)[0]
        boundary = rewritten.run(list(whole.split.boundary), feeds)
        (got,) = decoder.run(None, dict(zip(whole.split.boundary, boundary, strict=True)))
        assert got.shape == expected.shape
        assert np.abs(pcm(got) - pcm(expected)).max() <= 1


def test_duration_predictor_has_no_audio_rate_part(tiny_bundle: Path, tmp_path: Path) -> None:
    source = next((tiny_bundle / "onnx" / "speakers").iterdir()) / "duration_predictor.onnx"
    assert not write_lifted(source, tmp_path / "lifted.onnx", min_channels=0)


def test_engine_speaks_the_same_with_and_without_the_cache(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YOMIAGE_CACHE_DIR", str(tmp_path))
    audio = {}
    for cache in ("1", "0"):
        monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", cache)
        engine = Engine(tiny_bundle, device="cpu", threads=1)
        try:
            audio[cache] = engine.synthesize(THREE_SENTENCES, QUIET).audio
        finally:
            engine.close()
    # BERT, the synthesizer's two parts, durations
    assert len(list((tmp_path / "sessions").glob(f"*/{GRAPH_FILE}"))) >= 3
    assert audio["1"].shape == audio["0"].shape
    # int16 samples: float outputs within 1e-5 round to within one step.
    assert np.abs(audio["1"].astype(np.int32) - audio["0"]).max() <= 1
