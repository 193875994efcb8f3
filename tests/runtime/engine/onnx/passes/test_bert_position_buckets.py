"""BERT's relative-position terms cut to the buckets a run reads
(engine/onnx/passes/bert_position_buckets.py): the same output to float rounding, from one
bucket-major initializer per term."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.passes.bert_position_buckets import (
    slice_relative_positions,
)

from ..onnx_build import ModelBuilder
from ..sample_graphs import run

HEADS, SPAN, SIZE, LAYERS = 2, 8, 4, 2  # buckets: 2 x SPAN
# The products read are the same; a narrower product may be summed by another kernel in another
# order (a one-bucket product is a dot product), so they agree to float rounding.
TOLERANCE = 1e-5


def attention_terms(
    indices_also_output: bool = False, repeats: tuple[int, ...] = (1, 1, 1)
) -> bytes:
    """Two layers' position terms as DeBERTa's export writes them: per layer the queries times
    the tiled, transposed projection of every bucket, then the bucket of each pair picked by
    indices clipped from the pairs' distances (one index tensor for both layers)."""
    rng = np.random.default_rng(0)
    b = ModelBuilder(17)
    distance = b.input("distance", ["L", "L"], wire.TENSOR_INT64)
    shifted = b.node("Add", [distance, b.weight("span", np.array(SPAN, np.int64))], "shifted")
    low = b.weight("low", np.array(0, np.int64))
    high = b.weight("high", np.array(2 * SPAN - 1, np.int64))
    indices = b.node("Clip", [shifted, low, high], "indices")
    unsqueezed = b.node("Unsqueeze", [indices, b.weight("axis0", np.array([0], np.int64))], "u")
    size = b.node("Shape", [distance], "size")
    heads = b.weight("heads", np.array([HEADS], np.int64))
    shape = b.node("Concat", [heads, size], "shape", wire.int_attribute("axis", 0))
    picked = b.node("Expand", [unsqueezed, shape], "picked")
    reps = b.weight("reps", np.array(repeats, np.int64))
    for layer in range(LAYERS):
        query = b.input(f"q{layer}", [HEADS, "L", SIZE])
        projection = rng.standard_normal((HEADS, 2 * SPAN, SIZE)).astype(np.float32)
        tiled = b.node("Tile", [b.weight(f"pos{layer}", projection), reps], f"tiled{layer}")
        perm = wire.ints_attribute("perm", [0, 2, 1])
        turned = b.node("Transpose", [tiled], f"turned{layer}", perm)
        scores = b.node("MatMul", [query, turned], f"scores{layer}")
        b.node("GatherElements", [scores, picked], f"y{layer}", wire.int_attribute("axis", -1))
        b.output(f"y{layer}", [HEADS, "L", "L"])
    if indices_also_output:
        b.output("indices", ["L", "L"])
    return b.encode()


def feeds(length: int, offset: int) -> dict[str, NDArray[np.generic]]:
    positions = np.arange(length)
    rng = np.random.default_rng(length)
    found: dict[str, NDArray[np.generic]] = {
        "distance": (positions[:, None] - positions[None, :] + offset).astype(np.int64)
    }
    for layer in range(LAYERS):
        found[f"q{layer}"] = rng.standard_normal((HEADS, length, SIZE)).astype(np.float32)
    return found


def sliced(model: bytes) -> bytes:
    chunks = slice_relative_positions(memoryview(model))
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def initializer_dims(model: bytes) -> list[list[int]]:
    return [tensor.dims for tensor in wire.read_graph(memoryview(model)).initializers.values()]


@pytest.mark.parametrize(
    ("length", "offset"),
    [(1, 0), (3, 0), (5, 2), (SPAN, 0), (2 * SPAN, 0), (3, -SPAN - 2), (4, SPAN + 3)],
)
def test_sliced_terms_give_the_same_scores(length: int, offset: int) -> None:
    """Short runs read a few buckets, long ones all; offsets push the distances past the clip at
    either end (every index the same bucket)."""
    original = attention_terms()
    inputs = feeds(length, offset)
    for before, after in zip(run(original, inputs), run(sliced(original), inputs), strict=True):
        assert after.shape == before.shape == (HEADS, length, length)
        np.testing.assert_allclose(after, before, atol=TOLERANCE, rtol=0)


def test_projections_become_one_bucket_major_initializer_per_term() -> None:
    dims = initializer_dims(sliced(attention_terms()))
    assert [HEADS, 2 * SPAN, SIZE] not in dims
    assert dims.count([2 * SPAN, LAYERS, HEADS, SIZE]) == 1


def test_indices_read_elsewhere_leave_the_graph_alone() -> None:
    """Shifting them would change what the other reader sees."""
    assert slice_relative_positions(memoryview(attention_terms(indices_also_output=True))) is None


def test_projections_tiled_along_the_buckets_leave_the_graph_alone() -> None:
    """The rows cut would no longer be the buckets the indices name."""
    assert slice_relative_positions(memoryview(attention_terms(repeats=(1, 2, 1)))) is None


def test_a_graph_without_position_terms_is_left_alone(tiny_bundle: Path, tmp_path: Path) -> None:
    synthesizer = next((tiny_bundle / "onnx" / "speakers").iterdir()) / "synthesizer.onnx"
    target = tmp_path / "synthesizer.onnx"
    assert not wire.rewrite_file(synthesizer, target, slice_relative_positions)
    assert not target.exists()


def test_tiny_bert_agrees_after_the_rewrite(tiny_bundle: Path, tmp_path: Path) -> None:
    source = tiny_bundle / "onnx" / "bert" / "q8" / "bert_q8.onnx"
    rewritten = tmp_path / "bert.onnx"
    assert wire.rewrite_file(source, rewritten, slice_relative_positions)
    rng = np.random.default_rng(1)
    for batch, length in ((1, 1), (1, 12), (2, 30), (1, 300)):
        ids = rng.integers(5, 200, (batch, length), dtype=np.int64)
        mask = np.ones((batch, length), dtype=np.int64)
        mask[1:, length // 2 :] = 0  # a shorter second sentence, padded
        inputs = {"input_ids": ids, "attention_mask": mask}
        (expected,) = run(source, inputs)
        (got,) = run(rewritten, inputs)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)
