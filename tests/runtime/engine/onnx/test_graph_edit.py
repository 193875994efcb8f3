"""The toolkit every pass and cut edits graphs with (engine/onnx/graph_edit.py): what the edited
graph holds, checked by onnxruntime running it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.graph_edit import GraphEdit, is_zero_pad

from .onnx_build import ModelBuilder, tensor
from .sample_graphs import graph_of


def edit_of(builder: ModelBuilder) -> tuple[GraphEdit, list[wire.Field], wire.Field]:
    model_fields, graph_field = wire.model_graph(memoryview(builder.encode()))
    return GraphEdit(wire.Graph.parse(wire.as_message(graph_field.value)), "test"), *(
        model_fields,
        graph_field,
    )


def encoded(edit: GraphEdit, model_fields: list[wire.Field], graph_field: wire.Field) -> bytes:
    return b"".join(wire.with_graph(model_fields, graph_field, edit.encode()).parts)


def run(model: bytes, **feeds: np.ndarray) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def doubled_plus_one() -> ModelBuilder:
    """y = x * 2 + 1, with an initializer nothing reads."""
    builder = ModelBuilder()
    x = builder.input("x", [3])
    two = builder.weight("two", np.array([2.0], np.float32))
    one = builder.weight("one", np.array([1.0], np.float32))
    builder.weight("unused", np.zeros(4, np.float32))
    doubled = builder.node("Mul", [x, two], "doubled")
    builder.node("Add", [doubled, one], "y")
    builder.output("y", [3])
    return builder


def test_an_edit_that_changes_nothing_keeps_the_graph_but_what_nothing_reads() -> None:
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    model = encoded(edit, model_fields, graph_field)
    graph = graph_of(model)
    assert [node.op_type for node in graph.nodes.values()] == ["Mul", "Add"]
    assert set(graph.initializers) == {"two", "one"}  # "unused" pruned
    (y,) = run(model, x=np.array([1, 2, 3], np.float32))
    assert y.tolist() == [3.0, 5.0, 7.0]


def test_new_nodes_are_named_under_the_scope_and_constants_pooled() -> None:
    """The Add replaced by y = doubled + float([1, 2, 3]) + float([1, 2, 3]) + one."""
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    nodes = edit.nodes()
    to_float = wire.int_attribute("to", wire.TENSOR_FLOAT)
    first = nodes.add("Cast", [edit.ints([1, 2, 3])], to_float)
    second = nodes.add("Cast", [edit.ints([1, 2, 3])], to_float)
    summed = nodes.add("Add", [nodes.add("Add", ["doubled", first]), second])
    nodes.add("Add", [summed, "one"], outputs=["y"])
    edit.replace(1, nodes)
    assert edit.ints([1, 2, 3]) == "yomiage/test/int_1_2_3"
    assert (first, second) == ("yomiage/test/cast", "yomiage/test/cast_2")
    assert edit.ints([1, 2, 3], dims=[3, 1]) == "yomiage/test/int_1_2_3_2"  # another shape
    model = encoded(edit, model_fields, graph_field)
    graph = graph_of(model)
    assert "yomiage/test/int_1_2_3" in graph.initializers
    assert "yomiage/test/int_1_2_3_2" not in graph.initializers  # made, but nothing reads it
    assert {node.name for node in graph.nodes.values()} >= {"yomiage/test/Cast"}
    made = [node for node in graph.nodes.values() if node.name.startswith("yomiage/test/")]
    assert made and all(node.op_type in ("Cast", "Add") for node in made)
    (y,) = run(model, x=np.array([1, 2, 3], np.float32))
    assert y.tolist() == [5.0, 9.0, 13.0]


def test_nodes_are_written_in_dependency_order() -> None:
    """A node placed before the node that makes its input is written after it."""
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    nodes = edit.nodes()
    nodes.add("Neg", ["y"], outputs=["negated"])
    edit.insert_before(0, nodes)  # before the Mul, though it reads the Add's output
    edit.rename("doubled", "doubled")  # a no-op rename changes nothing
    graph = graph_of(encoded(edit, model_fields, graph_field))
    assert [node.op_type for node in graph.nodes.values()] == ["Mul", "Add", "Neg"]


def test_renamed_inputs_dropped_and_replaced_nodes() -> None:
    """x * 2 + 1 becomes (x + 1) with the Mul dropped, then the Add replaced by a Sub."""
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    edit.drop(0)
    edit.rename("doubled", "x")
    assert edit.renamed("doubled") == "x"
    model = encoded(edit, model_fields, graph_field)
    assert set(graph_of(model).initializers) == {"one"}  # "two" no longer read
    (y,) = run(model, x=np.array([1, 2, 3], np.float32))
    assert y.tolist() == [2.0, 3.0, 4.0]
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    nodes = edit.nodes()
    nodes.add("Sub", ["doubled", "one"], outputs=["y"])
    edit.replace(1, nodes)
    (y,) = run(encoded(edit, model_fields, graph_field), x=np.array([1, 2, 3], np.float32))
    assert y.tolist() == [1.0, 3.0, 5.0]


def test_a_cut_keeps_what_its_nodes_read_and_declares_its_new_ends() -> None:
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    edit.keep_only({0}, outputs=["doubled"])
    model = encoded(edit, model_fields, graph_field)
    graph = graph_of(model)
    assert set(graph.initializers) == {"two"} and set(graph.outputs) == {"doubled"}
    (doubled,) = run(model, x=np.array([1, 2, 3], np.float32))
    assert doubled.tolist() == [2.0, 4.0, 6.0]
    edit, model_fields, graph_field = edit_of(doubled_plus_one())
    edit.keep_only({1}, inputs=["doubled"])
    model = encoded(edit, model_fields, graph_field)
    assert set(graph_of(model).inputs) == {"doubled"}
    (y,) = run(model, doubled=np.array([1, 2, 3], np.float32))
    assert y.tolist() == [2.0, 3.0, 4.0]


def test_dependency_cycles_are_refused() -> None:
    edit, _, _ = edit_of(doubled_plus_one())
    nodes = edit.nodes()
    nodes.add("Neg", ["y"], outputs=["looped"])
    edit.insert_before(0, nodes)
    edit.rename("x", "looped")  # the Mul now reads what the Add's reader makes
    with pytest.raises(wire.WireError, match="cycle"):
        edit.encode()


def pad_model(*, mode: bytes | None, value: str | None, value_array: float = 0.0) -> ModelBuilder:
    builder = ModelBuilder()
    x = builder.input("x", [1, 2, 3])
    pads = builder.weight("pads", np.array([0, 0, 1, 0, 0, 1], np.int64))
    inputs = [x, pads]
    if value == "initializer":
        inputs.append(builder.weight("value", np.array(value_array, np.float32)))
    elif value == "constant":
        attribute = wire.bytes_field(
            wire.NODE_ATTRIBUTE,
            wire.text_field(wire.ATTR_NAME, "value")
            + wire.bytes_field(wire.ATTR_T, tensor("v", np.array(value_array, np.float32)))
            + wire.varint_field(wire.ATTR_TYPE, 4),
        )
        inputs.append(builder.node("Constant", [], "value", attribute))
    elif value == "empty":
        inputs.append("")
    attributes = []
    if mode is not None:
        body = wire.text_field(wire.ATTR_NAME, "mode") + wire.bytes_field(wire.ATTR_S, mode)
        attributes.append(wire.bytes_field(wire.NODE_ATTRIBUTE, body + wire.varint_field(20, 3)))
    builder.node("Pad", inputs, "y", *attributes)
    builder.output("y", [1, 2, 5])
    return builder


@pytest.mark.parametrize(
    ("mode", "value", "value_array", "zero"),
    [
        (None, None, 0.0, True),
        (b"constant", None, 0.0, True),
        (b"", "empty", 0.0, True),
        (b"constant", "initializer", 0.0, True),
        (None, "constant", 0.0, True),
        (None, "initializer", 0.5, False),
        (None, "constant", -1.0, False),
        (b"reflect", None, 0.0, False),
        (b"edge", "empty", 0.0, False),
    ],
)
def test_one_zero_pad_test(
    mode: bytes | None, value: str | None, value_array: float, zero: bool
) -> None:
    """Constant mode (named, empty or by default) and a padding value absent or 0; onnxruntime
    agrees: the padded ends are zeros exactly where the test says so."""
    builder = pad_model(mode=mode, value=value, value_array=value_array)
    edit, _, _ = edit_of(builder)
    pad = next(node for node in edit.graph.nodes.values() if node.op_type == "Pad")
    assert is_zero_pad(pad, edit.graph, edit.producers) is zero
    if mode != b"":  # onnxruntime refuses an empty mode; the test takes it for the default
        (y,) = run(builder.encode(), x=np.ones((1, 2, 3), np.float32))
        assert (not y[..., 0].any()) is zero
