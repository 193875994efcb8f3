"""Blocked convolutions that would leave a thread idle run as grouped partial sums
(engine/onnx/reduction_split.py)."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.onnx import reduction_split, sessions, wire
from custom_components.yomiage.engine.onnx.reduction_split import groups_for, split_reductions
from custom_components.yomiage.engine.onnx.rewrite import lift_convolutions
from custom_components.yomiage.engine.onnx.sessions import SessionFactory

from .onnx_build import ModelBuilder, conv_attributes
from .test_rewrite import (
    FRONTS,
    TOLERANCE,
    assert_front_keeps_the_samples,
    dialect_front,
    entries,
    nodes_of,
    run,
)

HIDDEN, FILTER, KERNEL = 192, 768, 5  # the flow's feed-forward layers at full size
AVX512, AVX2 = 16, 8  # floats per block of onnxruntime's blocked kernels


def feed_forward(opset: int = 17, bias: bool = True) -> bytes:
    """A front's feed-forward layer as exporters write it: [1, 192, T] -> 768 (ReLU) -> 192."""
    rng = np.random.default_rng(0)
    graph = ModelBuilder(opset=opset)
    x = graph.input("x", [1, HIDDEN, "T"])
    widen = [graph.weight("w1", floats(rng, (FILTER, HIDDEN, KERNEL), 0.05))]
    widen.append(graph.weight("b1", floats(rng, (FILTER,), 0.1)))
    narrow = [graph.weight("w2", floats(rng, (HIDDEN, FILTER, KERNEL), 0.02))]
    if bias:
        narrow.append(graph.weight("b2", floats(rng, (HIDDEN,), 0.1)))
    hidden = graph.node("Conv", [x, *widen], "h", *conv_attributes(KERNEL))
    relu = graph.node("Relu", [hidden], "r")
    graph.node("Conv", [relu, *narrow], "y", *conv_attributes(KERNEL))
    graph.output("y", [1, HIDDEN, "T"])
    return graph.encode()


def floats(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> NDArray[np.float32]:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def lifted_front(model: bytes, block: int = AVX512) -> bytes:
    chunks = lift_convolutions(memoryview(model), audio_rate_only=False, block=block)
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def split(model: bytes, block: int = AVX512, threads: int = 2) -> bytes:
    chunks = split_reductions(memoryview(model), block, threads)
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def group_of(node: wire.Node) -> int:
    group = node.attribute("group")
    return group.i if group is not None and group.i else 1


def feeds(frames: int) -> dict[str, NDArray[np.float32]]:
    rng = np.random.default_rng(frames)
    return {"x": rng.standard_normal((1, HIDDEN, frames)).astype(np.float32)}


@pytest.mark.parametrize("bias", [True, False])
def test_the_narrowing_convolution_becomes_two_partial_sums_with_the_same_outputs(
    bias: bool,
) -> None:
    published = feed_forward(bias=bias)
    lifted = lifted_front(published)
    rewritten = split(lifted)
    nodes = nodes_of(rewritten)
    # 768 -> 192 as two groups of 384 inputs into all 192 outputs; 192 -> 768 stays whole.
    assert [group_of(node) for node in nodes if node.op_type == "Conv"] == [1, 2]
    grouped = next(at for at, node in enumerate(nodes) if group_of(node) == 2)
    assert [node.op_type for node in nodes[grouped + 1 : grouped + 3]] == ["Reshape", "ReduceSum"]
    narrowing = [node for node in nodes_of(lifted) if node.op_type == "Conv"][-1]
    assert nodes[grouped + 2].outputs == narrowing.outputs  # the sum stands for the convolution
    for frames in (1, 5, 150):
        (expected,) = run(published, feeds(frames))
        (got,) = run(rewritten, feeds(frames))
        assert got.shape == expected.shape == (1, HIDDEN, frames)
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize(
    ("channels", "block", "threads", "groups"),
    [
        # 192 outputs in blocks of 16 are three sets of work: 2 + 1 on two threads, 3 + 3 split.
        ((HIDDEN, FILTER, 5), AVX512, 2, 2),
        ((HIDDEN, FILTER, 3), AVX512, 2, 2),
        # In blocks of 8 they are six sets: even on two threads, not on four.
        ((HIDDEN, FILTER, 5), AVX2, 2, 1),
        ((HIDDEN, FILTER, 5), AVX2, 4, 2),
        # One thread has nothing to even out; no blocked kernels, nothing to split.
        ((HIDDEN, FILTER, 5), AVX512, 1, 1),
        ((HIDDEN, FILTER, 5), 0, 2, 1),
        # Short reductions lose more to the summing pass than the threads gain.
        ((HIDDEN, HIDDEN, 1), AVX512, 2, 1),
        ((HIDDEN, HIDDEN, 3), AVX512, 2, 1),
        # Four sets (256 outputs) are even on two threads.
        ((256, FILTER, 5), AVX512, 2, 1),
    ],
)
def test_a_convolution_is_split_where_it_would_leave_a_thread_idle(
    channels: tuple[int, int, int], block: int, threads: int, groups: int
) -> None:
    assert groups_for(*channels, block, threads) == groups


@pytest.mark.parametrize("dialect", sorted(FRONTS))
def test_each_dialects_front_split_gives_its_samples(
    tiny_bundle: Path, dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each exporter's front lifted and split (the tiny voice's reductions are short, so the
    minimum is lifted for the test: its 32 -> 16 convolutions become two groups), then its
    decoder as published: the samples of the whole graph as exported, within 1 LSB."""
    monkeypatch.setattr(reduction_split, "MIN_PRODUCTS_PER_GROUP", 0)
    whole = dialect_front(tiny_bundle, dialect)
    lift = lift_convolutions(memoryview(whole.front), min_channels=0, frame_rate=True, block=AVX512)
    assert lift is not None
    rewritten = split(b"".join(bytes(part) for part in lift.parts))
    assert 2 in [group_of(node) for node in nodes_of(rewritten) if node.op_type == "Conv"]
    assert_front_keeps_the_samples(whole, rewritten, threads=2)


def test_nothing_is_split_where_the_threads_are_even_or_the_graph_is_not_lifted() -> None:
    published = feed_forward()
    assert split_reductions(memoryview(lifted_front(published, AVX2)), AVX2, 2) is None
    assert split_reductions(memoryview(published), AVX512, 2) is None  # 1-D convolutions
    old = lifted_front(feed_forward(opset=12))
    assert split_reductions(memoryview(old), AVX512, 2) is None  # ReduceSum's axes as attribute


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="NCHWc kernels vary off x86"
)
def test_the_preparation_splits_for_its_threads_and_onnxruntime_runs_the_groups_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph cache prepares the split where the box's blocks and the session's threads call
    for it (here: AVX-512's blocks, two threads), onnxruntime runs the grouped convolution in
    its blocked kernels, and the saved graph computes what the published one does."""
    monkeypatch.setattr(sessions, "blocked_kernel_block", lambda: AVX512)
    source = tmp_path / "front.onnx"
    source.write_bytes(feed_forward())
    saved = {}
    for threads in (1, 2):
        saved[threads] = tmp_path / f"saved-{threads}"
        SessionFactory(threads=threads, use_cache=False).prepare_here(source, saved[threads])
    blocked = {
        threads: [
            group_of(node)
            for node in nodes_of((folder / sessions.GRAPH_FILE).read_bytes())
            if node.op_type == "Conv" and node.domain == "com.microsoft.nchwc"
        ]
        for threads, folder in saved.items()
    }
    assert blocked == {1: [1, 1], 2: [1, 2]}
    factory = SessionFactory(threads=2, use_cache=False)
    graph = str(saved[2] / sessions.GRAPH_FILE)
    prepared = ort.InferenceSession(graph, factory.mapped_options(), providers=factory.providers)
    for frames in (1, 9, 150):
        (expected,) = run(source, feeds(frames))
        (got,) = prepared.run(None, feeds(frames))
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_a_graph_prepared_for_other_threads_is_prepared_again(tmp_path: Path) -> None:
    """Which convolutions are split depends on the threads that share them."""
    source = tmp_path / "bundle" / "front.onnx"
    source.parent.mkdir()
    source.write_bytes(feed_forward())
    cache = tmp_path / "cache"
    made = []
    for threads in (1, 2):
        SessionFactory(threads=threads, cache_dir=cache, use_cache=True).create(source)
        made.append(entries(cache))
    assert len(made[0]) == len(made[1]) == 1 and made[0] != made[1]
