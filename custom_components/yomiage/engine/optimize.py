"""Load-time graph rewrites, cached on disk.

The decoder of an SBV2 synthesizer is a stack of 1-D convolutions over [N, C, T], which is where
almost all of the synthesis time goes. onnxruntime's CPU provider runs convolutions over 4-D
tensors in its blocked NCHWc layout with direct kernels, but 1-D ones through im2col + GEMM, so
the same convolution written over [N, C, 1, T] is up to 1.5x faster (docs/PERFORMANCE.md).

``lift_convolutions`` rewrites a published graph that way: each convolution of the decoder's
audio-rate part (from the first upsampling ConvTranspose on), and the element-wise glue between
them (LeakyRelu, Add, Div, ...), moves to rank 4 with an Unsqueeze where a tensor enters the
region and a Squeeze where one leaves it, so that whole residual blocks stay in the blocked
layout. Frame-rate convolutions (text encoder, flow) are left alone: along a few hundred frames
the 1-D kernels are as fast or faster. Same arithmetic, same weights (only their declared shape
changes): outputs agree with the original to float rounding (~1e-6).

runtime.py builds a session from the rewritten graph once, saves onnxruntime's own optimised form
of it (ORT format) under ``cache_entry``, and memory-maps that file on every later load.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import onnx_wire as wire
from .onnx_wire import Chunks, Node, Tensor

_LOGGER = logging.getLogger(__name__)

REWRITE_VERSION = 3  # bump when the rewrite changes: cached graphs are then rebuilt
# Convolutions with fewer input or output channels stay 1-D: the blocked kernels split a
# [C, 1, T] convolution between threads by blocks of channels, so a 16- or 32-channel one runs on
# one thread, while the 1-D GEMM splits along time (docs/PERFORMANCE.md).
DEFAULT_MIN_CHANNELS = 64
CONVOLUTIONS = frozenset({"Conv", "ConvTranspose"})
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "LeakyRelu", "Relu", "Tanh", "Sigmoid"})
_SQUEEZE_AXES_AS_INPUT = 13  # from opset 13 on, Squeeze/Unsqueeze take axes as an input
_LIFTED_AXIS = 2  # [N, C, T] -> [N, C, 1, T]


def default_cache_dir() -> Path:
    """$YOMIAGE_CACHE_DIR, else $XDG_CACHE_HOME/yomiage, else ~/.cache/yomiage."""
    explicit = os.environ.get("YOMIAGE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "yomiage"


def lift_convolutions(
    model: memoryview, min_channels: int = DEFAULT_MIN_CHANNELS, audio_rate_only: bool = True
) -> Chunks | None:
    """The encoded ModelProto with its 1-D convolutions lifted, or None if nothing is lifted.

    ``audio_rate_only``: only convolutions from the first upsampling ConvTranspose on.
    """
    model_fields = list(wire.fields(model))
    graph_field = next((f for f in model_fields if f.number == wire.MODEL_GRAPH), None)
    if graph_field is None:
        raise wire.WireError("no graph in the model")
    graph = _Graph.parse(wire.as_message(graph_field.value))
    if any(tensor.external for tensor in graph.initializers.values()):
        return None  # a copy elsewhere would lose the relative paths of its weight files
    plan = _Plan.make(graph, min_channels, audio_rate_only)
    if not plan.lifted:
        return None
    new_graph = _Emitter(graph, plan, _default_opset(model_fields)).encode()
    out = Chunks()
    for item in model_fields:
        if item is graph_field:
            out.extend(new_graph.as_field(wire.MODEL_GRAPH))
        else:
            out.add(item.raw)
    return out


def write_lifted(
    source: Path,
    target: Path,
    min_channels: int = DEFAULT_MIN_CHANNELS,
    audio_rate_only: bool = True,
) -> bool:
    """Write ``source`` with its convolutions lifted to ``target``; False if nothing to lift.

    Raises ``WireError`` when ``source`` is not an ONNX model this module can read.
    """
    with source.open("rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            raise wire.WireError("empty file")
        # Not closed by hand: views into it live until the rewrite is garbage; unmapped then.
        data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    rewritten = lift_convolutions(memoryview(data), min_channels, audio_rate_only)
    if rewritten is None:
        return False
    with target.open("wb") as out:
        for part in rewritten.parts:
            out.write(part)
    return True


# -- cache entries -------------------------------------------------------------------------------
def cache_entry(source: Path, folder: Path, settings: str, suffix: str, label: str = "") -> Path:
    """Where a prepared form of ``source`` lives: named after the source's path (and ``label``,
    for several files made from one source), versioned by its size, mtime and ``settings``
    (everything else the prepared file depends on)."""
    resolved = source.resolve()
    stat = resolved.stat()
    identity = f"{stat.st_size}|{stat.st_mtime_ns}|{settings}"
    place = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
    version = hashlib.sha256(identity.encode()).hexdigest()[:10]
    name = f"{resolved.stem}.{label}" if label else resolved.stem
    return folder / f"{name}-{place}-{version}{suffix}"


def install_entry(built: Path, entry: Path) -> None:
    """Move a finished file into place atomically; drop older versions of the same source."""
    os.replace(built, entry)
    place = entry.name[: entry.name.rindex("-")]
    for old in entry.parent.glob(f"{place}-*"):
        if old.name != entry.name:
            old.unlink(missing_ok=True)


def _default_opset(model_fields: list[wire.Field]) -> int:
    for item in model_fields:
        if item.number != wire.MODEL_OPSET_IMPORT:
            continue
        domain, version = "", 0
        for part in wire.fields(wire.as_message(item.value)):
            if part.number == wire.OPSET_DOMAIN:
                domain = wire.as_text(part.value)
            elif part.number == wire.OPSET_VERSION and isinstance(part.value, int):
                version = part.value
        if domain in ("", "ai.onnx"):
            return version
    raise wire.WireError("the model imports no default-domain opset")


# -- what the graph holds ------------------------------------------------------------------------
@dataclass
class _Graph:
    items: list[wire.Field]  # every GraphProto field, in order
    nodes: dict[int, Node]  # by position in ``items``
    initializers: dict[str, Tensor]
    ranks: dict[str, int]  # tensor name -> rank, where it can be told
    outputs: set[str]
    names: set[str]  # every tensor name in use
    in_subgraphs: set[str] = field(default_factory=set)  # names that subgraphs read

    @classmethod
    def parse(cls, payload: memoryview) -> _Graph:
        graph = cls(list(wire.fields(payload)), {}, {}, {}, set(), set())
        for position, item in enumerate(graph.items):
            graph._read(position, item)
        for node in graph.nodes.values():
            graph.names.update(node.inputs + node.outputs)
            graph._infer_rank(node)
            for attribute in node.attributes:
                for subgraph in attribute.graphs:
                    graph.in_subgraphs.update(_names_read_by(subgraph))
        return graph

    def _read(self, position: int, item: wire.Field) -> None:
        if item.number == wire.GRAPH_NODE:
            self.nodes[position] = wire.parse_node(item)
        elif item.number == wire.GRAPH_INITIALIZER:
            tensor = wire.parse_tensor(item)
            self.initializers[tensor.name] = tensor
            self.ranks[tensor.name] = len(tensor.dims)
            self.names.add(tensor.name)
        elif item.number in (wire.GRAPH_INPUT, wire.GRAPH_OUTPUT, wire.GRAPH_VALUE_INFO):
            name, rank = wire.value_info_rank(item)
            self.names.add(name)
            if rank is not None:
                self.ranks.setdefault(name, rank)
            if item.number == wire.GRAPH_OUTPUT:
                self.outputs.add(name)

    def _infer_rank(self, node: Node) -> None:
        """Ranks through the ops the rewrite cares about (nodes come in topological order)."""
        rank: int | None = None
        if node.op_type == "Constant":
            value = node.attribute("value")
            rank = len(value.tensor.dims) if value and value.tensor else None
        elif node.op_type in CONVOLUTIONS and len(node.inputs) > 1:
            rank = self.ranks.get(node.inputs[1])
        elif node.op_type in ELEMENTWISE:
            known = [self.ranks.get(name) for name in node.inputs if name]
            rank = max(known) if known and None not in known else None  # type: ignore[type-var]
        if rank is not None and node.outputs:
            self.ranks.setdefault(node.outputs[0], rank)

    def consumers(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for position, node in self.nodes.items():
            for name in node.inputs:
                found.setdefault(name, []).append(position)
        return found


def _names_read_by(graph: memoryview) -> Iterator[str]:
    """Every tensor name the nodes of a subgraph (and its own subgraphs) read."""
    for item in wire.fields(graph):
        if item.number != wire.GRAPH_NODE:
            continue
        node = wire.parse_node(item)
        yield from node.inputs
        for attribute in node.attributes:
            for subgraph in attribute.graphs:
                yield from _names_read_by(subgraph)


# -- which nodes move to rank 4 --------------------------------------------------------------
@dataclass
class _Plan:
    lifted: set[int]  # node positions
    lifted_tensors: set[str]
    retyped_weights: set[str]  # Conv weights whose declared shape simply gains the unit axis

    @classmethod
    def make(cls, graph: _Graph, min_channels: int, audio_rate_only: bool) -> _Plan:
        plan = cls(set(), set(), set())
        in_scope = _upsampled_nodes(graph) if audio_rate_only else set(graph.nodes)
        for position, node in graph.nodes.items():
            if _liftable(node, graph, plan.lifted_tensors, min_channels, position in in_scope):
                plan._lift(position, node)
        # Backwards: glue that only feeds the region (a LeakyRelu before the first convolution)
        # joins it, so that its input enters the region once instead of twice.
        consumers = graph.consumers()
        for position in sorted(graph.nodes, reverse=True):
            node = graph.nodes[position]
            if position not in plan.lifted and plan._only_feeds_region(node, graph, consumers):
                plan._lift(position, node)
        plan.retyped_weights = _weights_only_lifted_convs_use(graph, plan.lifted)
        return plan

    def _lift(self, position: int, node: Node) -> None:
        self.lifted.add(position)
        self.lifted_tensors.update(node.outputs)

    def _only_feeds_region(
        self, node: Node, graph: _Graph, consumers: dict[str, list[int]]
    ) -> bool:
        if node.op_type not in ELEMENTWISE or node.domain not in ("", "ai.onnx"):
            return False
        if len(node.outputs) != 1:
            return False
        output = node.outputs[0]
        readers = consumers.get(output, [])
        if not readers or output in graph.outputs or output in graph.in_subgraphs:
            return False
        if any(r not in self.lifted or _reads_as_weight(graph.nodes[r], output) for r in readers):
            return False
        inputs = [name for name in node.inputs if name]
        if graph.ranks.get(output) != 3 or any(name not in graph.ranks for name in inputs):
            return False
        entering = [n for n in inputs if n not in self.lifted_tensors and graph.ranks[n] >= 2]
        return len(entering) <= 1  # never more reshapes than before


def _upsampled_nodes(graph: _Graph) -> set[int]:
    """Positions of the upsampling ConvTransposes and of every node downstream of one: the
    decoder's audio-rate part. Frame-rate convolutions (text encoder, flow) are short along
    time; there the 1-D kernels are as fast or faster (docs/PERFORMANCE.md)."""
    found: set[int] = set()
    upsampled: set[str] = set()
    for position, node in graph.nodes.items():
        if _is_upsampling(node) or any(name in upsampled for name in node.inputs):
            found.add(position)
            upsampled.update(node.outputs)
    return found


def _is_upsampling(node: Node) -> bool:
    strides = node.attribute("strides")
    return node.op_type == "ConvTranspose" and strides is not None and max(strides.ints) > 1


def _liftable(
    node: Node, graph: _Graph, lifted: set[str], min_channels: int, in_scope: bool
) -> bool:
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return False
    if node.op_type in CONVOLUTIONS:
        return in_scope and _is_wide_1d_convolution(node, graph, min_channels)
    if node.op_type not in ELEMENTWISE or graph.ranks.get(node.outputs[0]) != 3:
        return False
    inputs = [name for name in node.inputs if name]
    return any(name in lifted for name in inputs) and all(
        name in lifted or name in graph.ranks for name in inputs
    )


def _is_wide_1d_convolution(node: Node, graph: _Graph, min_channels: int) -> bool:
    weight = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if weight is None or len(weight.dims) != 3:
        return False
    group = node.attribute("group")
    groups = group.i if group is not None and group.i else 1
    # Conv weights are [out, in / groups, k]; ConvTranspose ones [in, out / groups, k].
    channels = (weight.dims[0], weight.dims[1] * groups)
    return min(channels) >= min_channels


def _reads_as_weight(node: Node, name: str) -> bool:
    return node.op_type in CONVOLUTIONS and name in node.inputs[1:]


def _weights_only_lifted_convs_use(graph: _Graph, lifted: set[int]) -> set[str]:
    weights = {
        graph.nodes[position].inputs[1]
        for position in lifted
        if graph.nodes[position].op_type in CONVOLUTIONS
    }
    for position, node in graph.nodes.items():
        for index, name in enumerate(node.inputs):
            used_as_lifted_weight = (
                position in lifted and index == 1 and node.op_type in CONVOLUTIONS
            )
            if name in weights and not used_as_lifted_weight:
                weights.discard(name)
    return weights - graph.in_subgraphs


# -- writing the new graph -------------------------------------------------------------------
_SPATIAL_ATTRIBUTES = {  # how a 1-D convolution attribute reads in 2-D with a unit height
    "kernel_shape": lambda v: [1, *v],
    "strides": lambda v: [1, *v],
    "dilations": lambda v: [1, *v],
    "output_padding": lambda v: [0, *v],
    "output_shape": lambda v: [1, *v],
    "pads": lambda v: [0, v[0], 0, v[1]],
}


class _Emitter:
    """Writes the GraphProto: lifted nodes with their Unsqueeze/Squeeze, everything else as is."""

    def __init__(self, graph: _Graph, plan: _Plan, opset: int) -> None:
        self.graph = graph
        self.plan = plan
        self.axes_as_input = opset >= _SQUEEZE_AXES_AS_INPUT
        self.consumers = graph.consumers()
        self.renamed = {name: self._fresh(f"{name}/4d") for name in sorted(plan.lifted_tensors)}
        self.unsqueezed: dict[tuple[str, int], str] = {}
        self.axes_tensors: dict[int, str] = {}
        self.counter = 0

    def encode(self) -> Chunks:
        out = Chunks()
        for position, item in enumerate(self.graph.items):
            for part in self._rewrite(position, item):
                out.add(part)
        for axis, name in sorted(self.axes_tensors.items()):
            out.add(wire.int64_tensor(name, [axis]))
        return out

    def _rewrite(self, position: int, item: wire.Field) -> Iterator[bytes | memoryview]:
        if position in self.plan.lifted:
            yield from self._lifted_node(self.graph.nodes[position])
        elif item.number == wire.GRAPH_INITIALIZER:
            tensor = wire.parse_tensor(item)
            if tensor.name in self.plan.retyped_weights:
                yield from wire.retyped_tensor(tensor, _with_unit_axis(tensor.dims)).parts
            else:
                yield item.raw
        elif item.number == wire.GRAPH_VALUE_INFO:
            name, _ = wire.value_info_rank(item)
            if name not in self.plan.lifted_tensors:  # onnxruntime infers the new shapes
                yield item.raw
        else:
            yield item.raw

    def _lifted_node(self, node: Node) -> list[bytes]:
        """The node at rank 4, after the Unsqueezes its inputs need and before its Squeeze."""
        encoded: list[bytes] = []
        inputs = [self._input_at_rank_4(node, index, encoded) for index in range(len(node.inputs))]
        output = node.outputs[0]
        encoded.append(
            wire.node_field(
                node.op_type,
                inputs,
                [self.renamed[output]],
                node.name,
                node.domain,
                [self._attribute(a) for a in node.attributes],
                node.other,
            )
        )
        if self._needed_at_rank_3(output):
            encoded.append(self._squeeze(self.renamed[output], output))
        return encoded

    def _input_at_rank_4(self, node: Node, index: int, encoded: list[bytes]) -> str:
        name = node.inputs[index]
        if not name or (node.op_type in CONVOLUTIONS and index == 2):  # absent, or a bias
            return name
        if node.op_type in CONVOLUTIONS and index == 1:
            if name in self.plan.retyped_weights:
                return name
            return self._unsqueeze(name, _LIFTED_AXIS, encoded)  # folded at load time
        if name in self.renamed:
            return self.renamed[name]
        # A convolution's data input has the rank of its weight: 3.
        rank = 3 if node.op_type in CONVOLUTIONS else self.graph.ranks[name]
        if rank <= 1:  # scalars and per-time-step vectors broadcast the same way at rank 4
            return name
        # A rank-r operand gains its unit axis just before its last one, as [N, C, T] does.
        return self._unsqueeze(name, rank - 1, encoded)

    def _unsqueeze(self, name: str, axis: int, encoded: list[bytes]) -> str:
        key = (name, axis)
        if key not in self.unsqueezed:
            self.unsqueezed[key] = self._fresh(f"{name}/unsqueezed")
            encoded.append(self._axes_node("Unsqueeze", name, self.unsqueezed[key], axis))
        return self.unsqueezed[key]

    def _squeeze(self, lifted: str, original: str) -> bytes:
        return self._axes_node("Squeeze", lifted, original, _LIFTED_AXIS)

    def _axes_node(self, op_type: str, source: str, target: str, axis: int) -> bytes:
        self.counter += 1
        name = f"yomiage/{op_type}/{self.counter}"
        if self.axes_as_input:
            if axis not in self.axes_tensors:
                self.axes_tensors[axis] = self._fresh(f"yomiage/axes_{axis}")
            return wire.node_field(op_type, [source, self.axes_tensors[axis]], [target], name)
        return wire.node_field(
            op_type, [source], [target], name, attributes=[wire.ints_attribute("axes", [axis])]
        )

    def _attribute(self, attribute: wire.Attribute) -> bytes | memoryview:
        widen = _SPATIAL_ATTRIBUTES.get(attribute.name)
        if widen is None or not attribute.ints:
            return attribute.raw
        return wire.ints_attribute(attribute.name, widen(attribute.ints))

    def _needed_at_rank_3(self, name: str) -> bool:
        if name in self.graph.outputs or name in self.graph.in_subgraphs:
            return True
        return any(c not in self.plan.lifted for c in self.consumers.get(name, []))

    def _fresh(self, wanted: str) -> str:
        name, suffix = wanted, 1
        while name in self.graph.names:
            suffix += 1
            name = f"{wanted}_{suffix}"
        self.graph.names.add(name)
        return name


def _with_unit_axis(dims: list[int]) -> list[int]:
    return [*dims[:_LIFTED_AXIS], 1, *dims[_LIFTED_AXIS:]]
