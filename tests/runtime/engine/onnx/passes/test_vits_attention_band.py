"""The relative attention of Style-Bert-VITS2's lineage cut to its window
(engine/onnx/passes/vits_attention_band.py), on the graphs of the tiny voice as each exporter
writes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.passes.vits_attention_band import band_relative_attention
from custom_components.yomiage.engine.onnx.sessions import SessionFactory

from ....voice_files import DIALECTS, SBV2_SPEAKER, SPEAKER_DIR
from ..sample_graphs import TOLERANCE, graph_of, synthesizer_feeds

HAYAKOE = DIALECTS / "hayakoe" / SPEAKER_DIR
# The graphs Style-Bert-VITS2's lineage writes: every attention layer's relative terms padded.
PADDED = {
    "hayakoe synthesizer": HAYAKOE / "synthesizer.onnx",
    "hayakoe durations": HAYAKOE / "duration_predictor.onnx",
    "converter": SBV2_SPEAKER / "synthesizer.onnx",
    "aivmx": DIALECTS / "tiny-a.aivmx",
}


def banded(source: Path) -> bytes:
    chunks = band_relative_attention(wire.mapped(source))
    assert chunks is not None
    return b"".join(bytes(part) for part in chunks.parts)


def relative_tables(graph: wire.Graph) -> list[str]:
    """The attention layers' key and value embeddings [1, 2w + 1, d]."""
    return [name for name in graph.initializers if name.rsplit(".", 1)[-1].startswith("emb_rel")]


def padded_tables(graph: wire.Graph) -> int:
    """How many relative embedding tables a Pad reads (zero rows for the far offsets)."""
    tables = set(relative_tables(graph))
    return sum(1 for n in graph.nodes.values() if n.op_type == "Pad" and n.inputs[0] in tables)


@pytest.mark.parametrize("dialect", sorted(PADDED))
def test_every_padded_term_keeps_its_window_and_the_outputs_agree(dialect: str) -> None:
    """Each layer's key and value terms are cut to their 2w + 1 offsets (no table padded to the
    sequence's length any more), and the graph computes what it did, from one phone (shorter
    than the window) to a long sentence."""
    source = PADDED[dialect]
    published = graph_of(wire.mapped(source))
    tables = relative_tables(published)
    assert tables and padded_tables(published) == len(tables)
    rewritten = banded(source)
    after = graph_of(rewritten)
    assert padded_tables(after) == 0
    assert set(relative_tables(after)) == set(tables)  # the embeddings themselves are kept
    assert len(after.nodes) < len(published.nodes)  # the shape arithmetic went with the moves
    plain = SessionFactory(threads=1, use_cache=False)
    before = plain.create(source, GraphKind.SYNTHESIZER)
    now = plain._open(rewritten, plain.options())
    assert [o.name for o in now.get_outputs()] == [o.name for o in before.get_outputs()]
    for phones in (1, 3, 9, 40, 120):
        feeds = synthesizer_feeds(before, phones)
        for expected, got in zip(before.run(None, feeds), now.run(None, feeds), strict=True):
            assert got.shape == expected.shape
            if np.issubdtype(expected.dtype, np.floating):
                np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)
            else:
                np.testing.assert_array_equal(got, expected)


def test_a_graph_whose_attention_reads_only_its_window_is_left_as_it_is(
    tiny_bundle: Path,
) -> None:
    """Yomiage's own export multiplies the 2w + 1 embeddings only: nothing to cut."""
    for graph in next((tiny_bundle / "onnx" / "speakers").iterdir()).glob("*.onnx"):
        assert relative_tables(graph_of(wire.mapped(graph)))
        assert band_relative_attention(wire.mapped(graph)) is None


def test_a_move_whose_result_is_also_read_elsewhere_stays(tmp_path: Path) -> None:
    """A padded term that the graph hands out besides adding it (here: as an extra output) is
    not one the band can stand for: that layer keeps its padded terms, the others are cut."""
    source = HAYAKOE / "synthesizer.onnx"
    model_fields, graph_field = wire.model_graph(wire.mapped(source))
    graph = graph_of(wire.mapped(source))
    made_by = {name: node for node in graph.nodes.values() for name in node.outputs}
    exposed = next(  # the first flow layer's key term, as it goes into the scores
        node.inputs[1]
        for node in graph.nodes.values()
        if node.op_type == "Add"
        and "flow" in node.name
        and "attn_layers.0/" in node.name
        and made_by[node.inputs[1]].op_type == "Slice"
    )
    declared = wire.bytes_field(
        wire.GRAPH_OUTPUT, wire.value_info(exposed, wire.TENSOR_FLOAT, None)
    )
    body = wire.Chunks()
    for item in graph.items:
        body.add(item.raw)
    body.add(declared)
    extended = tmp_path / "extended.onnx"
    wire.write_model(wire.with_graph(model_fields, graph_field, body), extended)
    after = graph_of(banded(extended))
    assert padded_tables(after) == 1  # the exposed layer's key table only
    assert exposed in {name for node in after.nodes.values() for name in node.outputs}


def test_the_queries_scaling_folds_into_the_products(tmp_path: Path) -> None:
    """The keys' term reads T off its own product, not off the scaled queries: these then feed
    products only, and onnxruntime folds their scaling (a Div per layer) into them."""
    optimised = tmp_path / "optimised.onnx"
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(optimised)
    ort.InferenceSession(banded(HAYAKOE / "synthesizer.onnx"), options, ["CPUExecutionProvider"])
    published = graph_of(wire.mapped(HAYAKOE / "synthesizer.onnx")).nodes.values()
    assert any(n.op_type == "Div" and "attn_layers" in n.name for n in published)
    left = graph_of(wire.mapped(optimised)).nodes.values()
    assert not any(n.op_type == "Div" and "attn_layers" in n.name for n in left)
