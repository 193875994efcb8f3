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

from dataclasses import dataclass

from .. import wire
from ..graph_edit import GraphEdit, NewNodes, edit_model, float_scalar
from ..wire import Chunks, Graph, Node

SCOPE = "flow_mask"
FLOW_SCOPE = "/flow/"  # node names of the flow, under any wrapper module (hayakoe's ``/net_g``)
_MIN_OPSET = 14  # Reshape's allowzero: a checked length of 0 must not mean "keep the length"


@dataclass(frozen=True)
class _Plan:
    mask: str
    replaced: dict[str, str]  # a left-out node's output -> what it gave back
    output: str  # the flow's one output, checked
    producer: int  # position of the node that makes it


def leave_out_flow_mask(model: memoryview) -> Chunks | None:
    """The encoded ModelProto without the flow's mask products and masked scores, its output
    checked; None where the graph has no such flow."""
    edited = edit_model(model, SCOPE, Graph.parse)
    if edited.opset < _MIN_OPSET:
        return None
    plan = _plan(edited.edit)
    if plan is None:
        return None
    _leave_out(edited.edit, plan)
    return edited.encode()


def _plan(edit: GraphEdit) -> _Plan | None:
    graph, producers = edit.graph, edit.producers
    flow = {at for at, node in graph.nodes.items() if FLOW_SCOPE in node.name}
    masks = {
        name
        for at in flow
        if graph.nodes[at].op_type == "Mul"
        for name in graph.nodes[at].inputs
        if name in producers
        and producers[name] not in flow
        and _casts_to(graph.nodes[producers[name]], wire.TENSOR_FLOAT)
    }
    if len(masks) != 1:
        return None
    (mask,) = masks
    replaced: dict[str, str] = {}
    for at in sorted(flow):
        node = graph.nodes[at]
        if node.op_type == "Mul" and len(node.inputs) == 2 and node.inputs.count(mask) == 1:
            replaced[node.outputs[0]] = next(name for name in node.inputs if name != mask)
        elif node.op_type == "Where" and _false_where_mask_is_ones(edit, node, mask):
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


def _false_where_mask_is_ones(edit: GraphEdit, where: Node, mask: str) -> bool:
    """Whether the Where's condition is Style-Bert-VITS2's ``attn_mask == 0``: the mask's outer
    product (two Unsqueezes of it, multiplied) compared with a zero, false where the mask is
    all ones."""
    if len(where.inputs) != 3:
        return False
    condition = edit.producer(where.inputs[0])
    if condition is not None and _casts_to(condition, wire.TENSOR_BOOL):
        condition = edit.producer(condition.inputs[0])
    if condition is None or condition.op_type != "Equal" or len(condition.inputs) != 2:
        return False
    outer, zero = condition.inputs
    outer_node = edit.producer(outer)
    if (
        outer_node is None
        or outer_node.op_type != "Mul"
        or float_scalar(zero, edit.graph, edit.producers) != 0.0
    ):
        return False
    unsqueezed = [edit.producer(name) for name in outer_node.inputs]
    return len(unsqueezed) == 2 and all(
        node is not None and node.op_type == "Unsqueeze" and node.inputs[0] == mask
        for node in unsqueezed
    )


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


def _leave_out(edit: GraphEdit, plan: _Plan) -> None:
    """Drop the left-out nodes (their readers read what they gave back), and have the flow's
    last node make ``plan.output`` unchecked, followed by its check."""
    for position, node in edit.graph.nodes.items():
        if plan.replaced.keys() & set(node.outputs):
            edit.drop(position)
    for name, kept in plan.replaced.items():
        edit.rename(name, kept)
    node = edit.graph.nodes[plan.producer]
    unchecked = edit.new_name("unchecked")
    nodes = edit.nodes()
    nodes.add(
        node.op_type,
        [edit.renamed(name) for name in node.inputs],
        *(attribute.raw for attribute in node.attributes),
        outputs=[unchecked if name == plan.output else name for name in node.outputs],
        name=node.name,
        domain=node.domain,
        other=node.other,
    )
    _check(edit, nodes, plan, unchecked)
    edit.replace(plan.producer, nodes)


def _check(edit: GraphEdit, nodes: NewNodes, plan: _Plan, unchecked: str) -> None:
    """Nodes that give ``plan.output`` as ``unchecked`` reshaped to [N, C, the mask's length, or 0
    unless every element of it is 1]: itself where the mask is all ones and as long, an error
    otherwise."""
    shape = nodes.add("Shape", [unchecked])
    batch_and_channels = nodes.add("Slice", [shape, edit.ints([0]), edit.ints([2])])
    length = nodes.add("Unsqueeze", [nodes.add("Size", [plan.mask]), edit.ints([0])])
    one = edit.floats([1.0], [], "one")
    equal = nodes.add("Equal", [plan.mask, one])
    is_one = nodes.add("Cast", [equal], wire.int_attribute("to", wire.TENSOR_INT64))
    all_ones = nodes.add("ReduceMin", [is_one], wire.int_attribute("keepdims", 0))
    frames = nodes.add("Mul", [length, all_ones])
    target = nodes.add("Concat", [batch_and_channels, frames], wire.int_attribute("axis", 0))
    allow_zero = wire.int_attribute("allowzero", 1)
    nodes.add("Reshape", [unchecked, target], allow_zero, outputs=[plan.output])
