"""The flow's frame mask left out where it is all ones (engine/onnx/passes/vits_flow_mask.py):
the same samples on every dialect's graph, and a run that cannot be the same fails instead."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.passes.vits_flow_mask import (
    FLOW_SCOPE,
    leave_out_flow_mask,
)

from ..onnx_build import ModelBuilder, conv_attributes, float_attribute
from ..sample_graphs import (
    CHANNELS,
    FRONTS,
    assert_front_keeps_the_samples,
    dialect_front,
    nodes_of,
    residual_model,
    run,
)


def _without_mask(model: bytes) -> bytes:
    chunks = leave_out_flow_mask(memoryview(model))
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


@pytest.mark.parametrize("dialect", sorted(FRONTS))
def test_each_dialects_flow_runs_without_its_mask(tiny_bundle: Path, dialect: str) -> None:
    whole = dialect_front(tiny_bundle, dialect)
    rewritten = _without_mask(whole.front)
    flow = [node for node in nodes_of(rewritten) if FLOW_SCOPE in node.name]
    masked = [node for node in nodes_of(whole.front) if FLOW_SCOPE in node.name]
    # Every attention's masked scores are gone, and the mask's products with them.
    assert sum(node.op_type == "Where" for node in masked) > 0
    assert not any(node.op_type == "Where" for node in flow)
    assert sum(n.op_type == "Mul" for n in flow) < sum(n.op_type == "Mul" for n in masked)
    assert_front_keeps_the_samples(whole, rewritten)


def masked_flow(weights: bool = False) -> bytes:
    """A flow-like graph: a mask made outside the flow (``Cast(keep > 0.5)``; ``weights``: the
    int64 ``keep`` itself cast, any number), multiplied in before and after a convolution inside
    it; its output is the graph's."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.input("x", [1, CHANNELS, "T"])
    keep = b.input("keep", [1, 1, "T"], wire.TENSOR_INT64 if weights else 1)
    half = b.weight("half", np.array(0.5, dtype=np.float32))
    weight = (rng.standard_normal((CHANNELS, CHANNELS, 3)) * 0.3).astype(np.float32)
    w = b.weight("w", weight)
    kept = (
        ("Identity", [keep], "kept", "/Identity", [])
        if weights
        else ("Greater", [keep, half], "kept", "/Greater", [])
    )
    for op_type, inputs, output, name, attributes in (
        kept,
        ("Cast", ["kept"], "mask", "/Cast", [wire.int_attribute("to", 1)]),
        ("Mul", [x, "mask"], "h", "/flow/Mul", []),
        ("Conv", ["h", w], "c", "/flow/conv/Conv", conv_attributes(3)),
        ("LeakyRelu", ["c"], "a", "/flow/LeakyRelu", [float_attribute("alpha", 0.1)]),
        ("Mul", ["mask", "a"], "m", "/flow/Mul_1", []),
        ("Add", ["m", x], "y", "/flow/Add", []),
    ):
        b.nodes.append(wire.node_field(op_type, inputs, [output], name, attributes=attributes))
    b.output("y", [1, CHANNELS, "T"])
    return b.encode()


def _feeds(frames: int, keep: NDArray[np.float32] | None = None) -> dict[str, NDArray[np.float32]]:
    rng = np.random.default_rng(frames)
    return {
        "x": rng.standard_normal((1, CHANNELS, frames)).astype(np.float32),
        "keep": np.ones((1, 1, frames), dtype=np.float32) if keep is None else keep,
    }


def test_an_all_ones_mask_gives_the_same_numbers() -> None:
    original = masked_flow()
    rewritten = _without_mask(original)
    assert sum(node.op_type == "Mul" for node in nodes_of(rewritten)) == 1  # the check's own
    for frames in (1, 7, 64):
        feeds = _feeds(frames)
        np.testing.assert_array_equal(run(rewritten, feeds)[0], run(original, feeds)[0])


def test_a_mask_that_is_not_all_ones_fails_the_run_instead_of_changing_it() -> None:
    original = masked_flow()
    rewritten = _without_mask(original)
    keep = np.ones((1, 1, 9), dtype=np.float32)
    keep[..., 6:] = 0  # a batch's shorter sentence: its padding frames are masked
    feeds = _feeds(9, keep)
    assert run(original, feeds)[0].shape == (1, CHANNELS, 9)
    with pytest.raises(Exception, match="Reshape"):  # onnxruntime's own exception types
        run(rewritten, feeds)
    # The session that refused one input still runs the next.
    session = ort.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="Reshape"):
        session.run(None, feeds)
    assert session.run(None, _feeds(9))[0].shape == (1, CHANNELS, 9)


def test_a_mask_of_other_numbers_fails_the_run_too() -> None:
    original = masked_flow(weights=True)
    rewritten = _without_mask(original)
    for keep in ([1, 1, 1, 1], [1, 2, 1, 1]):
        feeds = {**_feeds(4), "keep": np.array(keep, dtype=np.int64).reshape(1, 1, 4)}
        expected = run(original, feeds)[0]
        if max(keep) == 1:
            np.testing.assert_array_equal(run(rewritten, feeds)[0], expected)
        else:  # a product by 2 left out would change the numbers: the run fails instead
            with pytest.raises(Exception, match="Reshape"):
                run(rewritten, feeds)


def test_a_graph_without_a_flow_is_left_alone(tiny_bundle: Path) -> None:
    assert leave_out_flow_mask(memoryview(residual_model())) is None
    durations = next((tiny_bundle / "onnx" / "speakers").iterdir()) / "duration_predictor.onnx"
    assert leave_out_flow_mask(wire.mapped(durations)) is None
