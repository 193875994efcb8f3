"""Graphs the onnx tests share: a small decoder-like graph written by hand, feeds for it and for
the tiny voice's synthesizers, and each exporter's front of the tiny voice with the check that a
rewritten front keeps the samples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.decoder_graph import DecoderSplit, read_split
from custom_components.yomiage.engine.onnx.machine import Dependency, Machine
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind, prepared_in_memory
from custom_components.yomiage.engine.onnx.passes.vits_decoder_span import SPAN_INPUT
from custom_components.yomiage.engine.onnx.sessions import SessionFactory
from custom_components.yomiage.engine.synthesis.graphs import decode_window

from ...voice_files import DIALECTS, SBV2_SPEAKER, SPEAKER_DIR
from .onnx_build import ModelBuilder, conv_attributes, float_attribute

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
    keepdims = wire.int_attribute("keepdims", 1)
    b.node("ReduceMean", [s], "mean", wire.ints_attribute("axes", [1]), keepdims)
    b.output("y", [1, CHANNELS // 2, "T2"])
    b.output("mean", [1, 1, "T2"])
    if weight_also_output:
        b.node("Identity", [w1], "w1_copy")
        b.output("w1_copy", [CHANNELS, CHANNELS, 3])
    return b.encode()


def upsampling_stack(
    convolutions: list[tuple[int, int, int, bool]], rank: int = 3, frame_rate_first: bool = True
) -> bytes:
    """A decoder's stage: x -> [a kernel-3 Conv at frame rate] -> ConvTranspose (x2) -> each
    (channels, kernel, dilation, bias) Conv in turn, with a LeakyRelu between; [N, C, T] or
    [N, C, 1, T] (as the lift leaves it)."""
    rng = np.random.default_rng(7)
    b = ModelBuilder()
    channels = convolutions[0][0]
    unit = [1] if rank == 4 else []

    def lifted(attributes: list[bytes], kernel: int, dilation: int) -> list[bytes]:
        if rank == 3:
            return attributes
        pad = dilation * (kernel - 1) // 2
        return [
            wire.ints_attribute("kernel_shape", [1, kernel]),
            wire.ints_attribute("dilations", [1, dilation]),
            wire.ints_attribute("pads", [0, pad, 0, pad]),
        ]

    x = b.input("x", [1, channels, *unit, "T"])
    if frame_rate_first:
        w = rng.standard_normal((channels, channels, *unit, 3)).astype(np.float32) / 30
        x = b.node("Conv", [x, b.weight("frame", w)], "framed", *lifted(conv_attributes(3), 3, 1))
    up = rng.standard_normal((channels, channels, *unit, 2)).astype(np.float32) / 20
    up_attributes = [
        wire.ints_attribute("kernel_shape", [*unit, 2]),
        wire.ints_attribute("strides", [*unit, 2]),
    ]
    x = b.node("ConvTranspose", [x, b.weight("up_w", up)], "up", *up_attributes)
    for index, (width, kernel, dilation, bias) in enumerate(convolutions):
        w = rng.standard_normal((width, channels, *unit, kernel)) / np.sqrt(channels * kernel)
        inputs = [x, b.weight(f"w{index}", w.astype(np.float32))]
        if bias:
            inputs.append(
                b.weight(f"b{index}", (rng.standard_normal(width) / 10).astype(np.float32))
            )
        attributes = lifted(conv_attributes(kernel, dilation), kernel, dilation)
        x = b.node("Conv", inputs, f"conv{index}", *attributes)
        x = b.node("LeakyRelu", [x], f"act{index}")
        channels = width
    b.output(x, [1, channels, *unit, "T2"])
    return b.encode()


def upsampling_feeds(model: bytes, frames: int) -> dict[str, NDArray[np.float32]]:
    graph = graph_of(model)
    first = next(iter(graph.nodes.values()))
    channels = graph.initializers[first.inputs[1]].dims[1]
    rank = len(graph.initializers[first.inputs[1]].dims)
    shape = (1, channels, 1, frames) if rank == 4 else (1, channels, frames)
    return {"x": np.random.default_rng(frames).standard_normal(shape).astype(np.float32)}


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


def graph_of(model: bytes | memoryview) -> wire.Graph:
    return wire.read_graph(memoryview(model))


def nodes_of(model: bytes) -> list[wire.Node]:
    graph = next(f for f in wire.fields(memoryview(model)) if f.number == wire.MODEL_GRAPH)
    return [
        wire.parse_node(item)
        for item in wire.fields(wire.as_message(graph.value))
        if item.number == wire.GRAPH_NODE
    ]


IDENTITY = (
    "yomiage/conv_lift/Identity"  # names of the identity convolutions that keep layouts blocked
)


def kernel_ranks(model: bytes) -> list[int]:
    """Ranks of the graph's own convolutions (not the identities the rewrite adds)."""
    ranks = []
    for node in nodes_of(model):
        if node.op_type in ("Conv", "ConvTranspose") and not node.name.startswith(IDENTITY):
            kernel = node.attribute("kernel_shape")
            assert kernel is not None
            ranks.append(len(kernel.ints))
    return ranks


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
    published = plain.create(whole.source, GraphKind.SYNTHESIZER)
    rewritten = plain._open(front, plain.options())
    decoder = plain._open(b"".join(bytes(p) for p in whole.split.decoder.parts), plain.options())
    for phones in (5, 33, 80):
        feeds = synthesizer_feeds(published, phones)
        expected = published.run([whole.audio], feeds)[0]
        boundary = rewritten.run(list(whole.split.boundary), feeds)
        (got,) = decoder.run(None, dict(zip(whole.split.boundary, boundary, strict=True)))
        assert got.shape == expected.shape
        assert np.abs(pcm(got) - pcm(expected)).max() <= 1


class WithoutBlockedKernels(Machine):
    """This machine as an aarch64 onnxruntime (a Raspberry Pi's) would be: no blocked kernels."""

    def value(self, dependency: Dependency) -> int:
        return 0 if dependency is Dependency.BLOCK else super().value(dependency)


def prepared_without_blocked_kernels(decoder: wire.Chunks) -> bytes:
    """A cut decoder as the registry's passes prepare it where onnxruntime has no blocked
    kernels (aarch64): cut to the span it is fed, lifted, its wide convolutions in minimal
    filtering form."""
    published = b"".join(bytes(part) for part in decoder.parts)
    return prepared_in_memory(published, GraphKind.DECODER, WithoutBlockedKernels(threads=2))


def decode_cut_to_spans(
    decoder: ort.InferenceSession,
    boundary: dict[str, NDArray[np.float32]],
    spans: list[tuple[int, int]],
    context: int,
) -> NDArray[np.float32]:
    """The samples of ``spans`` (in order) from a decoder cut to the span it is fed, each
    decoded from its window as the engine decodes a piece."""
    frames = max(value.shape[-1] for value in boundary.values())
    pieces = []
    for start, stop in spans:
        low, high = decode_window((start, stop), frames, context)
        feeds = {
            name: value[..., low:high] if value.shape[-1] == frames else value
            for name, value in boundary.items()
        }
        feeds[SPAN_INPUT] = np.array([start - low, stop - low], dtype=np.int64)
        (audio,) = decoder.run(None, feeds)
        pieces.append(np.asarray(audio, dtype=np.float32).reshape(-1))
    return np.concatenate(pieces)
