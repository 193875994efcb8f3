"""The flow's frame mask left out where it is all ones, checked once at the flow's end (a
load-time rewrite of a synthesizer's front).

Style-Bert-VITS2's flow (and so every graph its lineage exports) multiplies by the frame mask
around each feed-forward convolution and in each coupling layer, and masks each attention's
scores where the mask's outer product is 0. For one sentence, as this engine runs every graph,
the mask is all ones and as long as the flow's frames: every one of those products and masked
scores gives back its other operand. They are not free: the product between a feed-forward
layer's two convolutions takes its 768 channels out of onnxruntime's blocked layout and back,
and the attention makes one more pass over its [T, T] scores; without them the front runs
4.4-5.3 % faster (docs/PERFORMANCE.md).

``leave_out_flow_mask`` finds the mask (the one float Cast made outside the flow that the flow's
products read), reads those products as their other operand and those masked scores as the
scores, and checks the condition at the flow's end: its output is reshaped to [N, C, the mask's
length, or 0 unless every element of it is 1], the same tensor where the mask is all ones and as
long as the flow's frames, and an error for any other input (onnxruntime names the Reshape),
never other numbers. Inside the flow the mask only multiplies tensors as long as the flow's
frames (its input and what convolutions and attention make of it: Style-Bert-VITS2's code), so
the check at its end covers every product left out.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from . import wire
from .wire import Chunks, Graph, Node

REWRITE_VERSION = 2  # bump when the rewrite changes: cached graphs are then rebuilt
FLOW_SCOPE = "/flow/"  # node names of the flow, under any wrapper module (hayakoe's ``/net_g``)
_MIN_OPSET = 14  # Reshape's allowzero: a checked length of 0 must not mean "keep the length"
_FLOAT, _BOOL, _INT64 = 1, 9, 7  # TensorProto data types


@dataclass(frozen=True)
class _Plan:
    mask: str
    replaced: dict[str, str]  # a left-out node's output -> what it gave back
    output: str  # the flow's one output, checked
    producer: int  # position of the node that makes it


def leave_out_flow_mask(model: memoryview) -> Chunks | None:
    """The encoded ModelProto without the flow's mask products and masked scores, its output
    checked; None where the graph has no such flow."""
    model_fields, graph_field = wire.model_graph(model)
    if wire.default_opset(model_fields) < _MIN_OPSET:
        return None
    graph = Graph.parse(wire.as_message(graph_field.value))
    plan = _plan(graph)
    if plan is None:
        return None
    return wire.with_graph(model_fields, graph_field, _encode(graph, plan))


def _plan(graph: Graph) -> _Plan | None:
    producers = {out: at for at, node in graph.nodes.items() for out in node.outputs}
    flow = {at for at, node in graph.nodes.items() if FLOW_SCOPE in node.name}
    masks = {
        name
        for at in flow
        if graph.nodes[at].op_type == "Mul"
        for name in graph.nodes[at].inputs
        if name in producers
        and producers[name] not in flow
        and _casts_to(graph.nodes[producers[name]], _FLOAT)
    }
    if len(masks) != 1:
        return None
    (mask,) = masks
    replaced: dict[str, str] = {}
    for at in sorted(flow):
        node = graph.nodes[at]
        if node.op_type == "Mul" and len(node.inputs) == 2 and node.inputs.count(mask) == 1:
            replaced[node.outputs[0]] = next(name for name in node.inputs if name != mask)
        elif node.op_type == "Where" and _false_where_mask_is_ones(graph, producers, node, mask):
            replaced[node.outputs[0]] = node.inputs[2]
    outputs = _flow_outputs(graph, flow, set(replaced))
    if not outputs:
        return None
    # The flow's own output is made last; what else leaves it (the relative attention's
    # products, where an exporter names some of its nodes without the flow's scope) feeds it.
    output = max(outputs, key=producers.__getitem__)
    if output in replaced:  # the flow would end in a product left out
        return None
    return _Plan(mask, replaced, output, producers[output])


def _casts_to(node: Node, data_type: int) -> bool:
    to = node.attribute("to")
    return node.op_type == "Cast" and to is not None and to.i == data_type


def _false_where_mask_is_ones(
    graph: Graph, producers: dict[str, int], where: Node, mask: str
) -> bool:
    """Whether the Where's condition is Style-Bert-VITS2's ``attn_mask == 0``: the mask's outer
    product (two Unsqueezes of it, multiplied) compared with a zero, false where the mask is
    all ones."""
    if len(where.inputs) != 3:
        return False

    def made_by(name: str) -> Node | None:
        return graph.nodes[producers[name]] if name in producers else None

    condition = made_by(where.inputs[0])
    if condition is not None and _casts_to(condition, _BOOL):
        condition = made_by(condition.inputs[0])
    if condition is None or condition.op_type != "Equal" or len(condition.inputs) != 2:
        return False
    outer, zero = condition.inputs
    outer_node = made_by(outer)
    if (
        outer_node is None
        or outer_node.op_type != "Mul"
        or not _is_float_zero(graph, zero, made_by(zero))
    ):
        return False
    unsqueezed = [made_by(name) for name in outer_node.inputs]
    return len(unsqueezed) == 2 and all(
        node is not None and node.op_type == "Unsqueeze" and node.inputs[0] == mask
        for node in unsqueezed
    )


def _is_float_zero(graph: Graph, name: str, producer: Node | None) -> bool:
    """Whether ``name`` is a one-element float 0: an initializer, or the value of its producer,
    a Constant node."""
    tensor = graph.initializers.get(name)
    if tensor is None and producer is not None and producer.op_type == "Constant":
        value = producer.attribute("value")
        tensor = value.tensor if value is not None else None
    data = wire.raw_data(tensor, _FLOAT) if tensor is not None else None
    return data is not None and len(data) == 4 and struct.unpack("<f", data)[0] == 0.0


def _flow_outputs(graph: Graph, flow: set[int], left_out: set[str]) -> set[str]:
    """What the flow computes from the products left out that something outside it reads (or
    the graph returns); not the shape arithmetic an exporter shares with the rest of the graph
    (what a Shape or Size reads from a tensor is not its numbers)."""
    made = set(left_out)
    for at in sorted(flow):  # a graph's nodes are in order
        node = graph.nodes[at]
        if node.op_type not in ("Shape", "Size") and made.intersection(node.inputs):
            made.update(node.outputs)
    read_outside = {
        name for at, node in graph.nodes.items() if at not in flow for name in wire.node_reads(node)
    }
    return made & (read_outside | set(graph.outputs))


def _encode(graph: Graph, plan: _Plan) -> Chunks:
    names = graph.names_in_use()

    def resolved(name: str) -> str:
        while name in plan.replaced:
            name = plan.replaced[name]
        return name

    def fresh(wanted: str) -> str:
        return wire.fresh_name(names, f"yomiage/flow_mask/{wanted}")

    unchecked = fresh("unchecked")
    left_out = set(plan.replaced)
    constants: list[bytes] = []
    out = Chunks()
    for position, item in enumerate(graph.items):
        node = graph.nodes.get(position)
        if node is None:
            out.add(item.raw)
            continue
        if left_out.intersection(node.outputs):
            continue
        inputs = [resolved(name) for name in node.inputs]
        if position != plan.producer:
            out.add(wire.with_inputs(node, inputs))
            continue
        outputs = [unchecked if name == plan.output else name for name in node.outputs]
        attributes = [attribute.raw for attribute in node.attributes]
        out.add(
            wire.node_field(
                node.op_type, inputs, outputs, node.name, node.domain, attributes, node.other
            )
        )
        for field in _check(plan, unchecked, fresh, constants):
            out.add(field)
    for field in constants:
        out.add(field)
    return out


def _check(
    plan: _Plan, unchecked: str, fresh: Callable[[str], str], constants: list[bytes]
) -> list[bytes]:
    """Nodes that give ``plan.output`` as ``unchecked`` reshaped to [N, C, the mask's length, or 0
    unless every element of it is 1]: itself where the mask is all ones and as long, an error
    otherwise (their initializers added to ``constants``)."""
    nodes: list[bytes] = []

    def op(op_type: str, inputs: list[str], *attributes: bytes, output: str = "") -> str:
        made = output or fresh(op_type.lower())
        nodes.append(
            wire.node_field(op_type, inputs, [made], fresh(op_type), attributes=attributes)
        )
        return made

    def ints(*values: int) -> str:
        name = fresh("int")
        constants.append(wire.int64_tensor(name, values))
        return name

    shape = op("Shape", [unchecked])
    batch_and_channels = op("Slice", [shape, ints(0), ints(2)])
    length = op("Unsqueeze", [op("Size", [plan.mask]), ints(0)])
    one = fresh("one")
    constants.append(wire.float_tensor(one, [], [1.0]))
    is_one = op("Cast", [op("Equal", [plan.mask, one])], wire.int_attribute("to", _INT64))
    all_ones = op("ReduceMin", [is_one], wire.int_attribute("keepdims", 0))
    frames = op("Mul", [length, all_ones])
    target = op("Concat", [batch_and_channels, frames], wire.int_attribute("axis", 0))
    op("Reshape", [unchecked, target], wire.int_attribute("allowzero", 1), output=plan.output)
    return nodes
