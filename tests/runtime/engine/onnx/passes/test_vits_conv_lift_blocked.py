"""The lift's ways of keeping work in onnxruntime's blocked kernels (engine/onnx/passes/
vits_conv_lift.py):
identity depthwise convolutions with declared shapes, the narrow tail run as two halves, and a
zero Pad lifted with the convolution it feeds, so that onnxruntime folds it into that one."""

from __future__ import annotations

import dataclasses
import platform
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx import machine, sessions, wire
from custom_components.yomiage.engine.onnx.passes import vits_conv_lift
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.passes.vits_conv_lift import lift_convolutions
from custom_components.yomiage.engine.onnx.sessions import SessionFactory

from ..onnx_build import ModelBuilder, conv_attributes, float_attribute
from ..sample_graphs import (
    CHANNELS,
    IDENTITY,
    TOLERANCE,
    nodes_of,
    residual_feeds,
    residual_model,
    run,
    synthesizer_feeds,
)
from .test_vits_conv_lift import lifted, write_lifted


def optimised_ops(model: bytes, tmp_path: Path) -> Counter[str]:
    """Op types of onnxruntime's optimised form of ``model`` (2 threads, as the engine runs)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.log_severity_level = 3
    saved = tmp_path / "optimised.onnx"
    options.optimized_model_filepath = str(saved)
    ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return Counter(node.op_type for node in nodes_of(saved.read_bytes()))


def test_identity_convolutions_keep_the_residual_stream_blocked(tmp_path: Path) -> None:
    original = residual_model()
    rewritten = lifted(original)
    identities = [node for node in nodes_of(rewritten) if node.name.startswith(IDENTITY)]
    # One after the ConvTranspose, one in front of the LeakyRelu that reads it.
    assert len(identities) == 2
    for node in identities:
        group = node.attribute("group")
        assert group is not None and group.i == 16
    ops = optimised_ops(rewritten, tmp_path)
    # The residual Add is fused into the blocked convolution before it; without the rewrite's
    # identities and shapes onnxruntime keeps it (and reorders around it).
    assert ops["Add"] == 0 and optimised_ops(original, tmp_path)["Add"] == 1
    for frames in (1, 5, 64):
        feeds = residual_feeds(frames)
        for before, after in zip(run(original, feeds), run(rewritten, feeds), strict=True):
            np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


def test_lifted_tensors_have_declared_shapes_with_shared_lengths() -> None:
    rewritten = lifted(residual_model())
    graph = next(f for f in wire.fields(memoryview(rewritten)) if f.number == wire.MODEL_GRAPH)
    declared = [
        wire.value_info_rank(item)
        for item in wire.fields(wire.as_message(graph.value))
        if item.number == wire.GRAPH_VALUE_INFO
    ]
    names = {name for name, rank in declared if rank == 4}
    # The ConvTranspose's blocked copy, the residual sum and the dilated Conv's output.
    assert {"up/4d", "s/4d", "c1/4d"} <= names


# -- the narrow tail in two halves ----------------------------------------------------------
@pytest.fixture
def tiny_synthesizer(tiny_bundle: Path) -> Path:
    return next((tiny_bundle / "onnx" / "speakers").iterdir()) / "synthesizer.onnx"


def synthesize(session: ort.InferenceSession, phones: int) -> np.ndarray:
    (audio,) = session.run(None, synthesizer_feeds(session, phones))
    return np.asarray(audio)


def test_narrow_tail_runs_as_two_halves_with_the_same_audio(
    tiny_synthesizer: Path, tmp_path: Path
) -> None:
    rewritten = tmp_path / "synthesizer.onnx"
    # Default width: the tiny decoder (16 channels at most) is all narrow tail.
    assert write_lifted(tiny_synthesizer, rewritten)
    ops = Counter(node.op_type for node in nodes_of(rewritten.read_bytes()))
    assert ops["Concat"] >= 2 and ops["Slice"] >= 6  # cut into halves, and back
    plain = SessionFactory(threads=2, use_cache=False)
    before, after = (
        plain.create(tiny_synthesizer, GraphKind.SYNTHESIZER),
        plain.create(rewritten, GraphKind.SYNTHESIZER),
    )
    for phones in (1, 5, 33, 80):  # from a handful of frames (both halves whole) up
        expected, got = synthesize(before, phones), synthesize(after, phones)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_halves_need_their_halo(
    tiny_synthesizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without enough overlap the samples next to the cut change: the halo is what makes the
    halves exact (and this test can tell)."""
    narrow_tail = vits_conv_lift._narrow_tail

    def without_halo(*args: object) -> object:
        tail = narrow_tail(*args)  # type: ignore[arg-type]
        assert tail is not None and tail.halo > 8
        return dataclasses.replace(tail, halo=1)

    monkeypatch.setattr(vits_conv_lift, "_narrow_tail", without_halo)
    rewritten = tmp_path / "synthesizer.onnx"
    assert write_lifted(tiny_synthesizer, rewritten)
    plain = SessionFactory(threads=1, use_cache=False)
    expected = synthesize(plain.create(tiny_synthesizer, GraphKind.SYNTHESIZER), 80)
    got = synthesize(plain.create(rewritten, GraphKind.SYNTHESIZER), 80)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() > 100 * TOLERANCE


def test_tail_is_left_whole_when_something_else_reads_it() -> None:
    # residual_model's sum is also read by a ReduceMean (a second output): no clean tail, so
    # with every convolution narrow nothing is lifted at all.
    assert lift_convolutions(memoryview(residual_model()), min_channels=1000) is None


def test_old_opsets_get_no_halves(tiny_synthesizer: Path) -> None:
    model = memoryview(tiny_synthesizer.read_bytes())
    graph = next(f for f in wire.fields(model) if f.number == wire.MODEL_GRAPH)
    parsed = vits_conv_lift._Graph.parse(wire.as_message(graph.value))
    plan = vits_conv_lift._Plan.make(parsed, 64, audio_rate_only=True, pairs=False)
    assert plan.tail is None
    assert vits_conv_lift._Plan.make(parsed, 64, audio_rate_only=True).tail is not None


def narrow_decoder(channels: int) -> bytes:
    """x -> ConvTranspose (x2, to ``channels``) -> LeakyRelu -> dilated Conv -> residual Add ->
    Conv to one channel -> Tanh: a decoder end that is all narrow tail."""
    rng = np.random.default_rng(channels)
    scale = 0.3 * np.sqrt(16 / channels)  # outputs of one size whatever the width
    b = ModelBuilder()
    x = b.input("x", [1, 16, "T"])
    up_weight = b.weight("wt", (rng.standard_normal((16, channels, 4)) * 0.3).astype(np.float32))
    up = b.node("ConvTranspose", [x, up_weight], "up", *conv_attributes(4, stride=2, pad=1))
    a = b.node("LeakyRelu", [up], "a", float_attribute("alpha", 0.1))
    w1 = b.weight("w1", (rng.standard_normal((channels, channels, 3)) * scale).astype(np.float32))
    c1 = b.node("Conv", [a, w1], "c1", *conv_attributes(3, dilation=3))
    s = b.node("Add", [up, c1], "s")
    w2 = b.weight("w2", (rng.standard_normal((1, channels, 7)) * scale).astype(np.float32))
    post = b.node("Conv", [s, w2], "post", *conv_attributes(7))
    b.node("Tanh", [post], "y")
    b.output("y", [1, 1, "T2"])
    return b.encode()


@pytest.mark.parametrize(
    ("channels", "block", "halved"),
    [
        (8, 8, True),  # without the blocked identities
        (16, 8, True),  # with them
        # onnxruntime shares a blocked convolution between threads by four blocks of output
        # channels: 64 channels are two pieces of work in blocks of 8 (AVX2), one in blocks of
        # 16 (AVX-512), where the tail takes them in
        (64, 8, False),
        (64, 16, True),
    ],
)
def test_narrow_tail_of_any_width_keeps_the_samples(
    channels: int, block: int, halved: bool
) -> None:
    original = narrow_decoder(channels)
    rewritten = lifted(original, min_channels=64, block=block)
    ops = Counter(node.op_type for node in nodes_of(rewritten))
    assert ops["Concat"] == (2 if halved else 0)
    rng = np.random.default_rng(7)
    for frames in (1, 2, 5, 19, 64, 301):  # short ones: both halves are the whole sequence
        feeds = {"x": rng.standard_normal((1, 16, frames)).astype(np.float32)}
        (before,), (after,) = run(original, feeds), run(rewritten, feeds)
        assert after.shape == before.shape == (1, 1, 2 * frames)
        np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


# -- only where onnxruntime has blocked kernels ---------------------------------------------
def test_without_blocked_kernels_only_the_lift_remains(tiny_synthesizer: Path) -> None:
    model = tiny_synthesizer.read_bytes()
    rewritten = nodes_of(lifted(model, min_channels=0, block=0))
    ops = Counter(node.op_type for node in rewritten)
    assert ops["Concat"] == Counter(node.op_type for node in nodes_of(model))["Concat"]
    assert not any(node.name.startswith(IDENTITY) for node in rewritten)


@pytest.mark.parametrize("block", [16, 8, 0])
def test_the_preparation_asks_onnxruntime_for_blocked_kernels(
    tiny_synthesizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(machine, "blocked_kernel_block", lambda: block)
    written: list[int] = []
    real_lift = vits_conv_lift.lift_convolutions

    def spy(model: memoryview, **options: int) -> wire.Chunks | None:
        written.append(options["block"])
        return real_lift(model, **options)

    monkeypatch.setattr(vits_conv_lift, "lift_convolutions", spy)
    factory = SessionFactory(threads=1, use_cache=False)
    # What the graph cache's child process runs, run here where the spies see it.
    factory.prepare_here(tiny_synthesizer, tmp_path / "saved", GraphKind.SYNTHESIZER)
    assert written == [block]
    graph = tmp_path / "saved" / sessions.GRAPH_FILE
    session = ort.InferenceSession(
        str(graph), factory.mapped_options(), providers=factory.providers
    )
    expected = synthesize(
        SessionFactory(threads=1, use_cache=False).create(tiny_synthesizer, GraphKind.SYNTHESIZER),
        9,
    )
    np.testing.assert_allclose(synthesize(session, 9), expected, atol=TOLERANCE, rtol=0)


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="NCHWc kernels vary off x86"
)
def test_the_probe_finds_the_x86_blocked_kernels_and_their_width() -> None:
    """onnxruntime's x86 kernels work in blocks of 16 floats where the CPU has AVX-512, else 8."""
    with open("/proc/cpuinfo", encoding="ascii") as cpuinfo:
        flags = next(line for line in cpuinfo if line.startswith("flags")).split()
    machine.blocked_kernel_block.cache_clear()
    assert machine.blocked_kernel_block() == (16 if "avx512f" in flags else 8)


def padded_feed_forward(pad_also_read: bool = False) -> bytes:
    """Style-Bert-VITS2's feed-forward layer as its exporters write it: the masked input, a Pad
    whose pads are computed from constants and whose padding value is written as "", then a
    convolution that pads nothing itself. ``pad_also_read``: the padded tensor is an output too."""
    rng = np.random.default_rng(1)
    b = ModelBuilder()
    x = b.input("x", [1, CHANNELS, "T"])
    mask = b.input("mask", [1, 1, "T"])
    masked = b.node("Mul", [x, mask], "masked")
    begin = b.weight("begin", np.array([0, 0, 2], dtype=np.int64))
    end = b.weight("end", np.array([0, 0, 2], dtype=np.int64))
    pads = b.node("Concat", [begin, end], "pads", wire.int_attribute("axis", 0))
    padded = b.node("Pad", [masked, pads, ""], "padded")
    weight = b.weight("w", (rng.standard_normal((CHANNELS, CHANNELS, 5)) * 0.2).astype(np.float32))
    b.node("Conv", [padded, weight], "y", *conv_attributes(5, pad=0))
    b.output("y", [1, CHANNELS, "T"])
    if pad_also_read:
        b.output("padded", [1, CHANNELS, "T4"])
    return b.encode()


def test_a_pad_before_a_convolution_is_folded_into_it(tmp_path: Path) -> None:
    original = padded_feed_forward()
    rewritten = lifted(original, audio_rate_only=False)
    (pad,) = (node for node in nodes_of(rewritten) if node.op_type == "Pad")
    (conv,) = (node for node in nodes_of(rewritten) if node.op_type == "Conv")
    assert conv.inputs[0] == pad.outputs[0]  # the Pad lifted with its convolution
    # onnxruntime's form of it pads inside the convolution; the graph as exported copies.
    assert optimised_ops(rewritten, tmp_path)["Pad"] == 0
    assert optimised_ops(original, tmp_path)["Pad"] == 1
    rng = np.random.default_rng(2)
    for frames in (1, 4, 37):
        feeds = {
            "x": rng.standard_normal((1, CHANNELS, frames)).astype(np.float32),
            "mask": (rng.random((1, 1, frames)) > 0.3).astype(np.float32),
        }
        (before,), (after,) = run(original, feeds), run(rewritten, feeds)
        assert after.shape == before.shape == (1, CHANNELS, frames)
        np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


def test_a_pad_read_elsewhere_stays_as_exported() -> None:
    rewritten = lifted(padded_feed_forward(pad_also_read=True), audio_rate_only=False)
    (pad,) = (node for node in nodes_of(rewritten) if node.op_type == "Pad")
    assert pad.inputs == ["masked", "pads", ""]
    assert pad.outputs == ["padded"]
