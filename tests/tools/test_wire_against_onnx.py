"""The engine's protobuf codec (engine/onnx/wire.py) against the ``onnx`` package, which only this
venv has: every graph of the tiny voice as each exporter writes it, and each of its prepared forms
(every pass's output, the cuts, onnxruntime's saved graph), read by both and compared; then
written again by wire (each node, and the whole graph through an edit that changes nothing) and
read back by ``onnx``: the same messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from yomiage_engine.onnx import wire
from yomiage_engine.onnx.decoder_graph import cut_durations, split_decoder
from yomiage_engine.onnx.graph_edit import GraphEdit
from yomiage_engine.onnx.machine import Dependency, Machine
from yomiage_engine.onnx.passes.registry import GraphKind, passes_for
from yomiage_engine.onnx.sessions import GRAPH_FILE, SessionFactory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TINY_BUNDLE = FIXTURES / "bundle-tiny"
DIALECTS = FIXTURES / "dialects-tiny"
SPEAKER = Path("onnx") / "speakers" / "tiny-a"
# Each exporter's graphs of the tiny voice: (name, file, kind, the synthesizer's audio output).
PUBLISHED = [
    ("bert", TINY_BUNDLE / "onnx" / "bert" / "q8" / "bert_q8.onnx", GraphKind.LANGUAGE_MODEL, ""),
    ("ours", TINY_BUNDLE / SPEAKER / "synthesizer.onnx", GraphKind.SYNTHESIZER, "audio"),
    (
        "ours duration graph",
        TINY_BUNDLE / SPEAKER / "duration_predictor.onnx",
        GraphKind.DURATIONS,
        "",
    ),
    (
        "hayakoe",
        DIALECTS / "hayakoe" / SPEAKER / "synthesizer.onnx",
        GraphKind.SYNTHESIZER,
        "audio",
    ),
    ("sbv2", DIALECTS / "sbv2" / SPEAKER / "synthesizer.onnx", GraphKind.SYNTHESIZER, "output"),
    ("aivmx", DIALECTS / "tiny-a.aivmx", GraphKind.SYNTHESIZER, "output"),
]


def forms(tmp: Path) -> Iterator[tuple[str, bytes]]:
    """Every published graph, and what preparation makes of it, by name."""
    here = Machine(threads=2)
    for name, path, kind, audio in PUBLISHED:
        model = path.read_bytes()
        yield name, model
        graphs = [(kind, name, model)]
        if kind is GraphKind.SYNTHESIZER:
            split = split_decoder(memoryview(model), audio)
            assert split is not None
            graphs.append((GraphKind.FRONT, f"{name} front", _joined(split.front)))
            graphs.append((GraphKind.DECODER, f"{name} decoder", _joined(split.decoder)))
            durations = cut_durations(memoryview(model), None)
            if durations is not None:
                graphs.append((GraphKind.DURATIONS, f"{name} durations", _joined(durations)))
        for _, label, graph in graphs[1:]:
            yield label, graph
        for graph_kind, label, published in graphs:
            # A decoder is prepared otherwise where onnxruntime has no blocked kernels.
            machines = [(label, here)]
            if graph_kind is GraphKind.DECODER:
                machines.append((f"{label} on aarch64", _Aarch64(threads=2)))
            for prepared_label, machine in machines:
                graph = published
                for step in passes_for(graph_kind):
                    rewritten = step.run(memoryview(graph), machine)
                    if rewritten is not None:
                        graph = _joined(rewritten)
                        yield f"{prepared_label}, {step.name}", graph
                source = tmp / f"{prepared_label}.onnx"
                source.write_bytes(graph)
                saved = tmp / f"{prepared_label} saved"
                SessionFactory(threads=2, use_cache=False).prepare_here(source, saved, graph_kind)
                yield f"{prepared_label}, saved by onnxruntime", (saved / GRAPH_FILE).read_bytes()


class _Aarch64(Machine):
    """This machine as an aarch64 onnxruntime would be: no blocked kernels."""

    def value(self, dependency: Dependency) -> int:
        return 0 if dependency is Dependency.BLOCK else super().value(dependency)


def _joined(chunks: wire.Chunks) -> bytes:
    return b"".join(bytes(part) for part in chunks.parts)


@pytest.fixture(scope="module")
def every_form(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return dict(forms(tmp_path_factory.mktemp("forms")))


def test_every_form_is_there(every_form: dict[str, bytes]) -> None:
    """Not vacuous: each pass rewrote some graph, and every form onnxruntime saved is here."""
    names = list(every_form)
    for step in ("flow mask", "attention band", "decoder span", "conv lift", "position buckets"):
        assert any(name.endswith(f", {step}") for name in names), step
    assert sum(name.endswith("saved by onnxruntime") for name in names) >= 15


def test_wire_reads_what_onnx_reads(every_form: dict[str, bytes]) -> None:
    for name, model in every_form.items():
        proto = onnx.load_from_string(model)
        model_fields, graph_field = wire.model_graph(memoryview(model))
        graph = wire.Graph.parse(wire.as_message(graph_field.value))
        assert wire.default_opset(model_fields) == _default_opset(proto), name
        nodes = list(graph.nodes.values())
        assert len(nodes) == len(proto.graph.node), name
        for node, expected in zip(nodes, proto.graph.node, strict=True):
            _assert_same_node(node, expected, name)
        assert set(graph.initializers) == {t.name for t in proto.graph.initializer}, name
        for tensor in proto.graph.initializer:
            _assert_same_tensor(graph.initializers[tensor.name], tensor, name)
        for declared, expected in (
            (graph.inputs, proto.graph.input),
            (graph.outputs, proto.graph.output),
            (graph.value_infos, proto.graph.value_info),
        ):
            assert declared == {v.name: _rank(v) for v in expected}, name


def test_wire_writes_what_onnx_reads_back(every_form: dict[str, bytes]) -> None:
    for name, model in every_form.items():
        proto = onnx.load_from_string(model)
        model_fields, graph_field = wire.model_graph(memoryview(model))
        graph = wire.Graph.parse(wire.as_message(graph_field.value))
        for node, expected in zip(graph.nodes.values(), proto.graph.node, strict=True):
            attributes = [attribute.raw for attribute in node.attributes]
            written = wire.node_field(
                node.op_type,
                node.inputs,
                node.outputs,
                node.name,
                node.domain,
                attributes,
                node.other,
            )
            assert onnx.NodeProto.FromString(_payload(written)) == expected, name
        edited = GraphEdit(graph, "unchanged")
        again = onnx.load_from_string(
            _joined(wire.with_graph(model_fields, graph_field, edited.encode()))
        )
        assert list(again.graph.node) == list(proto.graph.node), name
        read = {name for node in proto.graph.node for name in node.input}
        kept = [t for t in proto.graph.initializer if t.name in read or t.name in graph.inputs]
        assert list(again.graph.initializer) == kept, name
        for part in ("input", "output", "value_info"):
            assert list(getattr(again.graph, part)) == list(getattr(proto.graph, part)), name
        assert list(again.opset_import) == list(proto.opset_import), name
        assert list(again.metadata_props) == list(proto.metadata_props), name


def test_wire_builds_what_onnx_builds() -> None:
    ints = onnx.TensorProto.FromString(_payload(wire.int64_tensor("i", [3, -1, 1 << 40], [3, 1])))
    assert ints.name == "i" and list(ints.dims) == [3, 1]
    assert numpy_helper.to_array(ints).tolist() == [[3], [-1], [1 << 40]]
    scalar = onnx.TensorProto.FromString(_payload(wire.int64_tensor("s", [7], ())))
    assert numpy_helper.to_array(scalar).shape == () and int(numpy_helper.to_array(scalar)) == 7
    values = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    floats = onnx.TensorProto.FromString(_payload(wire.float_tensor("f", [2, 3], values.ravel())))
    np.testing.assert_array_equal(numpy_helper.to_array(floats), values)
    pieces = [memoryview(values[0].tobytes()), memoryview(values[1].tobytes())]
    raw = onnx.TensorProto.FromString(
        _payload(_joined(wire.raw_float_tensor("r", [2, 3], *pieces)))
    )
    np.testing.assert_array_equal(numpy_helper.to_array(raw), values)
    info = onnx.ValueInfoProto.FromString(wire.value_info("v", wire.TENSOR_FLOAT, [1, "T", 3]))
    assert info == onnx.helper.make_tensor_value_info("v", onnx.TensorProto.FLOAT, [1, "T", 3])
    node = onnx.NodeProto.FromString(
        _payload(
            wire.node_field(
                "Conv",
                ["x", "w"],
                ["y"],
                "conv",
                attributes=[wire.int_attribute("group", 4), wire.ints_attribute("pads", [0, -1])],
            )
        )
    )
    assert node == onnx.helper.make_node("Conv", ["x", "w"], ["y"], "conv", group=4, pads=[0, -1])


def _payload(field: bytes) -> bytes:
    """The payload of one encoded length-delimited field (its tag and length cut off)."""
    (item,) = wire.fields(memoryview(field))
    return bytes(wire.as_message(item.value))


def _default_opset(proto: onnx.ModelProto) -> int:
    return next(op.version for op in proto.opset_import if op.domain in ("", "ai.onnx"))


def _rank(info: onnx.ValueInfoProto) -> int | None:
    tensor = info.type.tensor_type
    return len(tensor.shape.dim) if tensor.HasField("shape") else None


def _assert_same_node(node: wire.Node, expected: onnx.NodeProto, name: str) -> None:
    where = f"{name}: {expected.name or expected.op_type}"
    assert (node.op_type, node.domain, node.name) == (
        expected.op_type,
        expected.domain,
        expected.name,
    ), where
    assert (node.inputs, node.outputs) == (list(expected.input), list(expected.output)), where
    assert [a.name for a in node.attributes] == [a.name for a in expected.attribute], where
    for attribute, proto in zip(node.attributes, expected.attribute, strict=True):
        if proto.type == onnx.AttributeProto.INT:
            assert attribute.i == proto.i, where
        elif proto.type == onnx.AttributeProto.INTS:
            assert attribute.ints == list(proto.ints), where
        elif proto.type == onnx.AttributeProto.STRING:
            assert attribute.s == proto.s, where
        elif proto.type == onnx.AttributeProto.TENSOR:
            assert attribute.tensor is not None, where
            _assert_same_tensor(attribute.tensor, proto.t, where)
        elif proto.type == onnx.AttributeProto.GRAPH:
            assert len(attribute.graphs) == 1, where


def _assert_same_tensor(tensor: wire.Tensor, expected: onnx.TensorProto, where: str) -> None:
    assert tensor.name == expected.name and tensor.dims == list(expected.dims), where
    external = expected.data_location == onnx.TensorProto.EXTERNAL
    assert tensor.external is external, where
    if expected.data_type == onnx.TensorProto.FLOAT and expected.HasField("raw_data"):
        data = wire.raw_data(tensor, wire.TENSOR_FLOAT)
        assert data is not None and bytes(data) == expected.raw_data, where
