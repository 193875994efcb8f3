"""Convolutions that read one tensor alike run as one convolution and a Split
(engine/onnx/merged_convs.py): the same numbers bit for bit, on every dialect's graph."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.onnx import sessions
from custom_components.yomiage.engine.onnx.merged_convs import merge_sibling_convolutions
from custom_components.yomiage.engine.onnx.sessions import SessionFactory

from .onnx_build import ModelBuilder, conv_attributes
from .test_reduction_split import AVX512, floats
from .test_rewrite import (
    CHANNELS,
    FRONTS,
    assert_front_keeps_the_samples,
    dialect_front,
    nodes_of,
    run,
    synthesizer_feeds,
)


def merged(model: bytes, block: int = AVX512) -> bytes:
    chunks = merge_sibling_convolutions(memoryview(model), block)
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def convolutions_per_input(model: bytes) -> Counter[str]:
    return Counter(node.inputs[0] for node in nodes_of(model) if node.op_type == "Conv")


@pytest.mark.parametrize("dialect", sorted(FRONTS))
def test_each_dialects_queries_keys_and_values_come_from_one_convolution(
    tiny_bundle: Path, dialect: str
) -> None:
    whole = dialect_front(tiny_bundle, dialect)
    front = whole.front
    rewritten = merged(front)
    attention = [n for n in nodes_of(front) if "attn_layers" in n.name and n.op_type == "Conv"]
    projections = [n for n in attention if n.name.rsplit("/", 2)[-2] in {"conv_q", "conv_k"}]
    assert projections  # the text encoder's and the flow's attention layers
    # Queries, keys and values: one convolution per input, where there were three.
    assert max(convolutions_per_input(rewritten).values()) == 1
    assert len(nodes_of(rewritten)) < len(nodes_of(front))
    plain = ort.SessionOptions()
    plain.log_severity_level = 3
    before = ort.InferenceSession(front, plain, providers=["CPUExecutionProvider"])
    after = ort.InferenceSession(rewritten, plain, providers=["CPUExecutionProvider"])
    for phones in (5, 40):
        feeds = synthesizer_feeds(before, phones)
        boundary = list(whole.split.boundary)
        for old, new in zip(before.run(boundary, feeds), after.run(boundary, feeds), strict=True):
            assert np.array_equal(old, new)
    assert_front_keeps_the_samples(whole, rewritten)


def projections(opset: int = 17) -> bytes:
    """Three 1x1 convolutions of ``x`` with biases (merged), and beside them what stays: a
    kernel-3 one, a 1x1 one without bias, and a 1x1 one whose output is the graph's own."""
    rng = np.random.default_rng(5)
    graph = ModelBuilder(opset=opset)
    x = graph.input("x", [1, CHANNELS, "T"])
    outputs = []
    for name, kernel, bias in (
        ("q", 1, True),
        ("k", 1, True),
        ("v", 1, True),
        ("wide", 3, True),
        ("nobias", 1, False),
    ):
        inputs = [x, graph.weight(f"{name}.w", floats(rng, (CHANNELS, CHANNELS, kernel), 0.3))]
        if bias:
            inputs.append(graph.weight(f"{name}.b", floats(rng, (CHANNELS,), 0.1)))
        outputs.append(graph.node("Conv", inputs, name, *conv_attributes(kernel)))
    total = graph.node("Sum", outputs, "total")
    graph.node("Relu", [total], "y")
    own = [x, graph.weight("own.w", floats(rng, (CHANNELS, CHANNELS, 1), 0.3))]
    graph.node("Conv", [*own, graph.weight("own.b", floats(rng, (CHANNELS,), 0.1))], "own")
    graph.output("y", [1, CHANNELS, "T"])
    graph.output("own", [1, CHANNELS, "T"])
    return graph.encode()


@pytest.mark.parametrize("opset", [11, 17])
def test_sibling_convolutions_give_bit_for_bit_the_same_outputs(opset: int) -> None:
    source = projections(opset)
    rewritten = merged(source)
    nodes = nodes_of(rewritten)
    (split,) = [node for node in nodes if node.op_type == "Split"]
    assert split.outputs == ["q", "k", "v"]
    assert sum(node.op_type == "Conv" for node in nodes) == 4  # merged, wide, nobias, own
    for frames in (1, 7, 64):
        feeds: dict[str, NDArray[np.generic]] = {
            "x": np.random.default_rng(frames).standard_normal((1, CHANNELS, frames), np.float32)
        }
        for old, new in zip(run(source, feeds), run(rewritten, feeds), strict=True):
            assert np.array_equal(old, new)


def test_separate_weights_are_dropped() -> None:
    rewritten = merged(projections())
    assert b"q.w" not in rewritten.replace(b"q.w/merged", b"")
    assert b"own.w" in rewritten


def test_left_as_exported_without_blocked_kernels_or_siblings() -> None:
    assert merge_sibling_convolutions(memoryview(projections()), block=0) is None
    graph = ModelBuilder()
    x = graph.input("x", [1, CHANNELS, "T"])
    weight = graph.weight("w", floats(np.random.default_rng(0), (CHANNELS, CHANNELS, 1), 0.3))
    graph.node("Conv", [x, weight], "y", *conv_attributes(1))
    graph.output("y", [1, CHANNELS, "T"])
    assert merge_sibling_convolutions(memoryview(graph.encode()), AVX512) is None


@pytest.mark.parametrize("block", [0, AVX512])
def test_the_preparation_merges_where_there_are_blocked_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """The graph cache prepares the merged convolution where onnxruntime has blocked kernels
    (and leaves the graph as exported elsewhere); the saved graph computes what the published
    one does, bit for bit."""
    monkeypatch.setattr(sessions, "blocked_kernel_block", lambda: block)
    source = tmp_path / "front.onnx"
    source.write_bytes(projections())
    saved = tmp_path / "saved"
    SessionFactory(threads=2, use_cache=False).prepare_here(source, saved)
    prepared = (saved / sessions.GRAPH_FILE).read_bytes()
    splits = [node for node in nodes_of(prepared) if node.op_type == "Split"]
    assert len(splits) == (1 if block else 0)
    for frames in (1, 9, 150):
        feeds = {
            "x": np.random.default_rng(frames).standard_normal((1, CHANNELS, frames), np.float32)
        }
        for old, new in zip(
            run(source, feeds), run(saved / sessions.GRAPH_FILE, feeds), strict=True
        ):
            assert np.array_equal(old, new)
