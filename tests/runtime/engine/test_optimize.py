"""Load-time rewrite of 1-D convolutions to 2-D ones (engine/optimize.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine import onnx_wire as wire
from custom_components.yomiage.engine.optimize import lift_convolutions, write_lifted

from .onnx_build import ModelBuilder, conv_attributes, float_attribute, int_attribute

CHANNELS = 16
TOLERANCE = 1e-5  # the contract: rewritten graphs agree with the original to float rounding


def residual_model(opset: int = 17, weight_also_output: bool = False) -> bytes:
    """A decoder-like block: LeakyRelu -> Conv -> residual Add -> Div -> mask -> ConvTranspose.

    ``s`` (the residual sum) is also read by a ReduceMean that is not lifted, so it must leave
    the rank-4 region through a Squeeze; ``mask`` is a rank-3 input that must be unsqueezed.
    """
    rng = np.random.default_rng(0)
    b = ModelBuilder(opset)
    x = b.input("x", [1, CHANNELS, "T"])
    mask = b.input("mask", [1, 1, "T"])
    w1 = b.weight("w1", rng.standard_normal((CHANNELS, CHANNELS, 3)).astype(np.float32) * 0.2)
    bias = b.weight("b1", rng.standard_normal(CHANNELS).astype(np.float32))
    a = b.node("LeakyRelu", [x], "a", float_attribute("alpha", 0.1))
    c1 = b.node("Conv", [a, w1, bias], "c1", *conv_attributes(3, dilation=2))
    s = b.node("Add", [x, c1], "s")
    d = b.node("Div", [s, b.weight("two", np.array(2.0, dtype=np.float32))], "d")
    m = b.node("Mul", [d, mask], "m")
    wt = b.weight("wt", rng.standard_normal((CHANNELS, CHANNELS // 2, 4)).astype(np.float32) * 0.2)
    up = b.node("ConvTranspose", [m, wt], "up", *conv_attributes(4, stride=2, pad=1))
    b.node("Tanh", [up], "y")
    b.node(
        "ReduceMean", [s], "mean", wire.ints_attribute("axes", [1]), int_attribute("keepdims", 1)
    )
    b.output("y", [1, CHANNELS // 2, "T2"])
    b.output("mean", [1, 1, "T"])
    if weight_also_output:
        b.node("Identity", [w1], "w1_copy")
        b.output("w1_copy", [CHANNELS, CHANNELS, 3])
    return b.encode()


def run(model: bytes | Path, feeds: dict[str, NDArray[np.float32]]) -> list[NDArray[np.float32]]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return [np.asarray(out) for out in session.run(None, feeds)]


def residual_feeds(frames: int) -> dict[str, NDArray[np.float32]]:
    rng = np.random.default_rng(frames)
    mask = np.ones((1, 1, frames), dtype=np.float32)
    mask[..., frames // 2 :] = 0
    return {"x": rng.standard_normal((1, CHANNELS, frames)).astype(np.float32), "mask": mask}


def lifted(model: bytes, min_channels: int = 0) -> bytes:
    chunks = lift_convolutions(memoryview(model), min_channels)
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def nodes_of(model: bytes) -> list[wire.Node]:
    graph = next(f for f in wire.fields(memoryview(model)) if f.number == wire.MODEL_GRAPH)
    return [
        wire.parse_node(item)
        for item in wire.fields(wire.as_message(graph.value))
        if item.number == wire.GRAPH_NODE
    ]


def kernel_ranks(model: bytes) -> list[int]:
    ranks = []
    for node in nodes_of(model):
        if node.op_type in ("Conv", "ConvTranspose"):
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


def test_convolutions_become_2d_and_region_edges_get_one_reshape_each() -> None:
    rewritten = lifted(residual_model())
    assert kernel_ranks(rewritten) == [2, 2]
    ops = [node.op_type for node in nodes_of(rewritten)]
    # x enters once although LeakyRelu and Add both read it; mask enters for the Mul.
    assert ops.count("Unsqueeze") == 2
    # y leaves as a graph output, s for the ReduceMean that stays at rank 3.
    assert ops.count("Squeeze") == 2
    assert ops.count("ReduceMean") == 1


def test_narrow_convolutions_stay_1d_below_min_channels() -> None:
    assert lift_convolutions(memoryview(residual_model()), min_channels=CHANNELS + 1) is None
    # ConvTranspose here has 8 output channels: with a threshold of 16 only the Conv lifts.
    assert kernel_ranks(lifted(residual_model(), min_channels=CHANNELS)) == [2, 1]


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
    assert lift_convolutions(memoryview(b.encode())) is None


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff garbage"])
def test_write_lifted_rejects_what_is_not_a_model(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(wire.WireError):
        write_lifted(path, tmp_path / "out.onnx")


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
    names = {i.name for i in session.get_inputs()}
    return {name: value for name, value in feeds.items() if name in names}


@pytest.mark.parametrize("graph", ["synthesizer.onnx", "duration_predictor.onnx"])
def test_tiny_bundle_graphs_agree_after_the_rewrite(
    tiny_bundle: Path, tmp_path: Path, graph: str
) -> None:
    source = next((tiny_bundle / "onnx" / "speakers").iterdir()) / graph
    rewritten = tmp_path / graph
    assert write_lifted(source, rewritten)
    assert 2 in kernel_ranks(rewritten.read_bytes())
    options = ort.SessionOptions()
    options.log_severity_level = 3
    before = ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    after = ort.InferenceSession(str(rewritten), options, providers=["CPUExecutionProvider"])
    for phones in (5, 33, 80):
        feeds = synthesizer_feeds(before, phones)
        (expected,) = before.run(None, feeds)
        (got,) = after.run(None, feeds)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)
