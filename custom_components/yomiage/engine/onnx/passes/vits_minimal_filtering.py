"""A voice's wide convolutions at frame and audio rate (the flow's feed-forward layers, the
decoder's stages from 32 channels and its upsamplings) in fewer multiplications: minimal
filtering (Winograd's F(m, r), built the Toom-Cook way), where onnxruntime has no blocked kernels
(the aarch64 wheel a Raspberry Pi runs: its convolutions are im2col + SGEMM, its
ConvTransposes SGEMM + a Col2im on one thread).

A convolution of kernel ``r`` and dilation ``d`` computes ``m`` outputs ``d`` apart from
``m + r - 1`` inputs ``d`` apart with ``n`` products per pair of channels instead of ``m * r``
(``n = m + r - 1`` for one F(m, r); a kernel in parts takes the sum of its parts'), after a
transform of the input and before one of the output that are sums of a few terms. The samples
are rows of channels (``[N, 1, T, C]``: the Transposes at a convolution's ends, which onnxruntime
cancels between two rewritten ones, the residual sums included), so that each step is one
operation that onnxruntime shares over its threads and what is copied moves a row of channels,
not single floats: the input transform is one convolution over the image ``[N, 1, rows, d C]``
(rows of ``d`` samples; kernel ``m + r - 1`` rows, stride ``m``) giving ``V[N, n, Q, d C]``; the
products one batched MatMul ``V[n, Q d, C] @ U[n, C, O]`` (U = G W, worked out once from the
weights in float64); the output transform one MatMul ``AT @ M`` giving ``[m, Q, d, O]``,
which a Transpose puts in sample order a row of ``O`` channels at a time (rows that long
onnxruntime copies on all its threads). What stays on one thread: the Transposes where a run of
rewritten convolutions starts and ends, the Pad to whole rows (d > 1) and the final Slice, each
one copy.

A ConvTranspose of stride ``s`` and kernel ``r s`` is such a correlation too: each of its ``s``
phases (output samples ``s u + p``) takes ``r`` of the taps over input rows ``u - r + 1 .. u``,
so one correlation of kernel ``r`` to ``s O`` channels gives every phase of a sample ``u`` side by
side, a row of ``s`` samples; what its pads cut off the ends the final Slice leaves out.

The products' batch is the tile's ``n`` points. MLAS gives each thread whole products, so a
Pi's 4 threads share them unevenly where 4 does not divide ``n``; splitting the output channels
to even that out costs more in placing the shorter rows than it saves (docs/PERFORMANCE.md).

Exact in arithmetic, not in rounding: the transforms' sums round differently from the direct
sums. The tiles and points are the ones whose samples stay within 1 LSB of the published graph on
random voices and on Piper's trained decoder (tests/runtime/engine/onnx/passes/
test_vits_minimal_filtering.py). What each convolution costs on a Cortex-A72, and the
decoder's, is in docs/PERFORMANCE.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .. import wire
from ..graph_edit import GraphEdit, NewNodes, RankedGraph, edit_model
from ..wire import Chunks, Graph, Node

SCOPE = "minimal_filtering"
# Both channel counts at least this: at 16 channels the transforms cost more than the products
# save (A72 count, docs/PERFORMANCE.md).
MIN_CHANNELS = 32
Points = tuple[Fraction | int, ...]
_SEVEN: Points = (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))
_EIGHT: Points = (*_SEVEN, Fraction(-1, 4))
_NINE: Points = (*_EIGHT, Fraction(1, 4))
_TEN: Points = (*_NINE, 4)
# kernel -> (outputs per tile m, the kernel's parts in order: (taps, the finite interpolation
# points of that part's F(m, taps); the last point is infinity)). Kernels 7 and 11 in parts of 4
# and 3 taps, since one F(m, r) of them needs more points, whose powers round too coarsely (one
# F(2, 11) was 10x further off); eight outputs per tile there (21 and 32 products a tile: 7 %
# fewer a sample than six), six for kernel 3 (11 % fewer than four): more rounding, still within
# 1 LSB (the full-size voices 2.7 times further off than with four and six, Piper's trained
# voice 0.20 LSB at most); kernel 5 (the flow's, at frame rate) keeps four: six there put
# Piper's voice up to 1.16 LSB off (A72 counts and rounding: docs/PERFORMANCE.md). Kernels 2 and
# 4 are the upsamplings' (kernel 16 stride 8, kernel 8 stride 2) on seven points: F(8, 4) on ten
# put the full-size voices ten times further off (0.75 LSB).
TILES: dict[int, tuple[int, tuple[tuple[int, Points], ...]]] = {
    2: (7, ((2, _SEVEN),)),
    3: (6, ((3, _SEVEN),)),
    4: (5, ((4, _SEVEN),)),
    5: (4, ((5, _SEVEN),)),
    7: (8, ((4, _TEN), (3, _NINE))),
    11: (8, ((4, _TEN), (4, _TEN), (3, _NINE))),
}
_OPSET = 13  # Slice with inputs (10), Pad with inputs (11), integer Div on int64 (7)


@dataclass(frozen=True)
class Transforms:
    """F(m, r) for correlation, as convolutions compute: ``y = AT ((G g) * (BT x))`` for ``n``
    products per tile and a tile's ``m + r - 1`` inputs."""

    output: NDArray[np.float64]  # AT [m, n]
    kernel: NDArray[np.float64]  # G [n, r]
    input: NDArray[np.float64]  # BT [n, m + r - 1]


def tile_transforms(kernel: int) -> tuple[int, Transforms]:
    """m and the transforms of ``kernel``'s tiles (TILES): each part's F(m, taps) over its own
    taps and the inputs they read, side by side."""
    m, parts = TILES[kernel]
    window = m + kernel - 1
    each = [transforms(m, taps, points) for taps, points in parts]
    n = sum(part.output.shape[1] for part in each)
    output, g, bt = np.zeros((m, n)), np.zeros((n, kernel)), np.zeros((n, window))
    row = tap = 0
    for (taps, _), part in zip(parts, each, strict=True):
        rows = slice(row, row + part.output.shape[1])
        output[:, rows] = part.output
        g[rows, tap : tap + taps] = part.kernel
        bt[rows, tap : tap + part.input.shape[1]] = part.input
        row, tap = rows.stop, tap + taps
    return m, Transforms(output, g, bt)


def transforms(m: int, r: int, points: Points) -> Transforms:
    """The Toom-Cook matrices of F(m, r) on ``points`` (n - 1 distinct finite points, and
    infinity), exact until they become float64."""
    n = m + r - 1
    finite = [Fraction(p) for p in points]
    if len(finite) != n - 1 or len(set(finite)) != n - 1:
        raise ValueError(f"F({m}, {r}) takes {n - 1} distinct finite points")
    product = _poly_from_roots(finite)  # M(x), ascending coefficients
    at = [[Fraction(0)] * n for _ in range(m)]
    g = [[Fraction(0)] * r for _ in range(n)]
    bt = [[Fraction(0)] * n for _ in range(n)]
    for i, p in enumerate(finite):
        others = Fraction(1)
        for q in finite:
            if q != p:
                others *= p - q
        g[i] = [p**k / others for k in range(r)]
        for k in range(m):
            at[k][i] = p**k
        quotient = _divide_by_root(product, p)
        bt[i] = quotient + [Fraction(0)] * (n - len(quotient))
    g[n - 1][r - 1] = Fraction(1)
    at[m - 1][n - 1] = Fraction(1)
    bt[n - 1] = list(product)
    return Transforms(_as_array(at), _as_array(g), _as_array(bt))


def _as_array(rows: list[list[Fraction]]) -> NDArray[np.float64]:
    return np.array([[float(value) for value in row] for row in rows])


def _poly_from_roots(roots: list[Fraction]) -> list[Fraction]:
    coefficients = [Fraction(1)]
    for root in roots:
        shifted = [Fraction(0), *coefficients]
        coefficients = [
            high - root * low
            for high, low in zip(shifted, [*coefficients, Fraction(0)], strict=True)
        ]
    return coefficients


def _divide_by_root(coefficients: list[Fraction], root: Fraction) -> list[Fraction]:
    """``coefficients`` (ascending) divided by (x - root), which divides them exactly."""
    quotient: list[Fraction] = []
    carry = Fraction(0)
    for coefficient in reversed(coefficients[1:]):
        carry = coefficient + carry * root
        quotient.append(carry)
    return quotient[::-1]


def minimal_filtering_for_cpu(model: memoryview, block: int) -> Chunks | None:
    """The rewrite where onnxruntime's convolutions are im2col + SGEMM (``block`` 0: no
    blocked kernels); None elsewhere (the blocked kernels run these convolutions faster) and
    where no convolution qualifies."""
    if block > 0:
        return None
    return minimal_filtering(model)


def minimal_filtering(model: memoryview, min_channels: int = MIN_CHANNELS) -> Chunks | None:
    """``model`` with each qualifying convolution at frame or audio rate in minimal filtering
    form (the flow's feed-forward ones, the decoder's and its upsamplings: at frame rate too the
    transforms cost less than they save, docs/PERFORMANCE.md); None where none qualifies.
    Those in front of the phones' durations stay as published: a duration is rounded up (Ceil),
    and a sum rounded differently could move a phone's last frame."""
    edited = edit_model(model, SCOPE, RankedGraph.parse)
    graph, edit = edited.graph, edited.edit
    if edited.opset < _OPSET:
        return None
    framed = _after_durations(graph)
    rewritten: set[str] = set()
    for position, node in graph.nodes.items():
        if framed is not None and position not in framed:
            continue
        conv = _Conv.read(node, graph, min_channels)
        if conv is None:
            continue
        nodes = edit.nodes()
        conv.write(nodes, edit)
        edit.replace(position, nodes)
        rewritten.add(conv.node.outputs[0])
    if not rewritten:
        return None
    _sums_on_rows(graph, edit, rewritten)
    return edited.encode()


def _sums_on_rows(graph: RankedGraph, edit: GraphEdit, rewritten: set[str]) -> None:
    """Each sum of a rewritten convolution's output and another tensor of its rank (a
    residual, another convolution's output) done on rows as well, between a Transpose of each
    term and one back: onnxruntime's transpose optimiser cancels these against the
    convolutions' own, so that a decoder stage's residual stream stays on rows from its first
    convolution to its last and only the stage's ends move single floats."""
    for position, node in graph.nodes.items():
        if node.op_type != "Add" or len(node.inputs) != 2 or node.domain not in ("", "ai.onnx"):
            continue
        rank, other = (graph.ranks.get(name) for name in node.inputs)
        if rewritten.isdisjoint(node.inputs) or rank is None or other != rank:
            continue
        nodes = edit.nodes()
        terms = [nodes.add("Transpose", [name], _perm(_rows_first(rank))) for name in node.inputs]
        total = nodes.add("Add", terms)
        nodes.add("Transpose", [total], _perm(_channels_first(rank)), outputs=node.outputs[:1])
        edit.replace(position, nodes)


def _rows_first(rank: int) -> list[int]:
    """[N, C, T] -> [N, T, C]; [N, C, 1, T] -> [N, 1, T, C]."""
    return [0, 2, 3, 1] if rank == 4 else [0, 2, 1]


def _channels_first(rank: int) -> list[int]:
    return [0, 3, 1, 2] if rank == 4 else [0, 2, 1]


def _perm(axes: list[int]) -> bytes:
    return wire.ints_attribute("perm", axes)


def _after_durations(graph: Graph) -> set[int] | None:
    """The positions of the nodes that read the durations' Ceil (what runs at frame rate and
    after), or None where the graph has no Ceil (a decoder: all of it)."""
    consumers = graph.consumers()
    wanted = [
        name for node in graph.nodes.values() if node.op_type == "Ceil" for name in node.outputs
    ]
    if not wanted:
        return None
    found: set[int] = set()
    while wanted:
        for position in consumers.get(wanted.pop(), []):
            if position not in found:
                found.add(position)
                wanted.extend(graph.nodes[position].outputs)
    return found


class _SampleAxis(NamedTuple):
    """A convolution's attributes along its samples (the last axis)."""

    rank: int
    dilation: int
    stride: int
    left_pad: int
    right_pad: int


@dataclass(frozen=True)
class _Conv:
    """A convolution this pass rewrites, as a correlation over rows of samples: [N, C, T] or
    [N, C, 1, T] in; out, the samples ``start`` to ``samples * T + end`` of its rows of
    ``samples`` samples of ``out_channels`` each (a Conv: one sample a row; a ConvTranspose of
    stride ``s``: ``s`` a row, its phases side by side)."""

    node: Node
    weight: NDArray[np.float32]  # [samples * out_channels, C, r], a correlation's taps
    rank: int  # of its input and output
    dilation: int
    left_pad: int  # input samples in front, whole rows of ``dilation``
    extra_rows: int  # output rows beyond its input's (a ConvTranspose's r - 1)
    samples: int  # output samples a row
    out_channels: int
    start: int  # the first output sample kept
    end: int  # the last one kept is ``samples * T + end - 1``

    @classmethod
    def read(cls, node: Node, graph: Graph, min_channels: int) -> _Conv | None:
        if node.op_type not in ("Conv", "ConvTranspose") or node.domain not in ("", "ai.onnx"):
            return None
        tensor = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
        data = wire.raw_data(tensor, wire.TENSOR_FLOAT) if tensor is not None else None
        if tensor is None or data is None or len(tensor.dims) not in (3, 4):
            return None
        rank = len(tensor.dims)
        first, second, *spatial = tensor.dims
        if rank == 4 and spatial[0] != 1:
            return None
        k = spatial[-1]
        if min(first, second) < min_channels or _int(node, "group", 1) != 1:
            return None
        auto_pad = node.attribute("auto_pad")
        if auto_pad is not None and auto_pad.s not in (b"", b"NOTSET"):
            return None
        ones = [1] * (rank - 2)
        dilations = _ints(node, "dilations") or ones
        strides = _ints(node, "strides") or ones
        pads = _ints(node, "pads") or [0] * (2 * (rank - 2))
        if rank == 4 and (dilations[0] != 1 or strides[0] != 1 or pads[0] != 0 or pads[2] != 0):
            return None
        axis = _SampleAxis(rank, dilations[-1], strides[-1], pads[rank - 3], pads[-1])
        weight = np.frombuffer(data, dtype="<f4").reshape(first, second, k)
        if node.op_type == "Conv":
            return cls._conv(node, weight, axis)
        return cls._transposed(node, weight, axis)

    @classmethod
    def _conv(cls, node: Node, weight: NDArray[np.float32], axis: _SampleAxis) -> _Conv | None:
        rank, d, s, left, right = axis
        r = weight.shape[-1]
        shorter = d * (r - 1) - left - right
        if r not in TILES or s != 1 or shorter < 0 or left < 0 or right < 0:
            return None  # none whose output is longer than its input
        if left % d:
            return None  # the padding is whole rows of d samples
        return cls(node, weight, rank, d, left, 0, 1, weight.shape[0], 0, -shorter)

    @classmethod
    def _transposed(
        cls, node: Node, weight: NDArray[np.float32], axis: _SampleAxis
    ) -> _Conv | None:
        """A ConvTranspose of stride s and kernel k = r s: output row u (s samples, one a
        phase p) is the correlation of input rows u - r + 1 .. u with the taps W[p + s j] of
        its phase, in reverse; its (T + r - 1) s samples less the pads."""
        rank, d, s, left, right = axis
        in_channels, out_channels, k = weight.shape
        if d != 1 or k % s or k // s not in TILES or left < 0 or right < 0:
            return None
        if left + right >= k or node.attribute("output_padding") or node.attribute("output_shape"):
            return None
        r = k // s
        # W[C, O, s j + p] -> [p, O, C, r - 1 - j]: phase p's taps, reversed, a correlation's
        taps = weight.reshape(in_channels, out_channels, r, s)[:, :, ::-1, :]
        correlation = np.ascontiguousarray(taps.transpose(3, 1, 0, 2)).reshape(
            s * out_channels, in_channels, r
        )
        return cls(
            node, correlation, rank, 1, r - 1, r - 1, s, out_channels, left, s * (r - 1) - right
        )

    def write(self, nodes: NewNodes, edit: GraphEdit) -> None:
        """The nodes that compute the convolution's output (under its own output name), with
        the samples on rows and the channels along them, so that every step is one threaded
        convolution or product and the tiles' outputs are placed a row of channels at a time
        (module docstring)."""
        row_channels, in_channels, r = self.weight.shape
        out_channels = self.out_channels
        m, f = tile_transforms(r)
        n, window, d = f.output.shape[1], m + r - 1, self.dilation
        products = np.einsum("lk,ock->lco", f.kernel, self.weight.astype(np.float64))
        name = self.node.outputs[0]
        u = _float_initializer(edit, f"{name}/products", products)
        bt = _float_initializer(edit, f"{name}/input_transform", f.input.reshape(n, 1, window, 1))
        at = _float_initializer(edit, f"{name}/output_transform", f.output)
        ints = edit.ints
        x = self.node.inputs[0]
        # [N, 1, T, C] (rank 4) or [N, T, C]: a row of channels per sample. The Transpose back
        # at the end is this one's inverse: onnxruntime cancels the pair between two rewritten
        # convolutions (through the element-wise operators between them).
        x = nodes.add("Transpose", [x], _perm(_rows_first(self.rank)))
        # Its length read after the Transpose: what onnxruntime keeps once the pairs cancel.
        length = nodes.add("Gather", [nodes.add("Shape", [x]), ints([-2])])
        if d > 1:  # T samples padded to whole rows of d
            rows = nodes.add("Div", [nodes.add("Add", [length, ints([d - 1])]), ints([d])])
            right = nodes.add("Sub", [nodes.add("Mul", [rows, ints([d])]), length])
            pads = nodes.add(
                "Concat",
                [ints([0] * (2 * self.rank - 2)), right, ints([0])],
                wire.int_attribute("axis", 0),
            )
            x = nodes.add("Pad", [x, pads])
        # [N, 1, rows, d C]: tile q reads rows q m - lead .. q m - lead + window - 1 (each d
        # samples of every channel); padded so that the last tile is the last that holds an
        # output row (a ConvTranspose's r - 1 beyond the input's). -> V [N, n, Q, d C]
        grid = nodes.add("Reshape", [x, ints([0, 1, -1, d * in_channels])])
        lead = self.left_pad // d
        v = nodes.add(
            "Conv",
            [grid, bt],
            wire.ints_attribute("kernel_shape", [window, 1]),
            wire.ints_attribute("strides", [m, 1]),
            wire.ints_attribute("pads", [lead, 0, window - 1 - lead + self.extra_rows, 0]),
        )
        # The products [N, n, Q d, O'], then y = AT M: [N, m, Q, d, O'], the tiles' m rows put
        # in sample order by a Transpose that moves rows of O' channels (O' = s O: a row is s
        # samples).
        v = nodes.add("Reshape", [v, ints([0, n, -1, in_channels])])
        product = nodes.add("MatMul", [v, u])
        product = nodes.add("Reshape", [product, ints([0, n, -1])])
        audio = nodes.add("MatMul", [at, product])
        audio = nodes.add("Reshape", [audio, ints([0, m, -1, d, row_channels])])
        audio = nodes.add("Transpose", [audio], _perm([0, 2, 1, 3, 4]))
        sample_axis = self.rank - 2
        samples = [0, 1, -1, out_channels] if self.rank == 4 else [0, -1, out_channels]
        audio = nodes.add("Reshape", [audio, ints(samples)])
        # The samples kept: as many as the input's (a Conv padded to its length), fewer (hayakoe's
        # exporter pads in a Pad of its own), or a ConvTranspose's s T + s (r - 1) less its pads.
        end = nodes.add("Mul", [length, ints([self.samples])]) if self.samples > 1 else length
        end = nodes.add("Add", [end, ints([self.end])]) if self.end else end
        audio = nodes.add("Slice", [audio, ints([self.start]), end, ints([sample_axis])])
        bias = self.node.inputs[2] if len(self.node.inputs) > 2 and self.node.inputs[2] else None
        last = [] if bias is not None else [name]
        audio = nodes.add("Transpose", [audio], _perm(_channels_first(self.rank)), outputs=last)
        if bias is not None:
            column = ints([out_channels] + [1] * (self.rank - 2))
            nodes.add("Add", [audio, nodes.add("Reshape", [bias, column])], outputs=[name])


def _float_initializer(edit: GraphEdit, label: str, values: NDArray[np.floating]) -> str:
    name = edit.new_name(label)
    data = np.ascontiguousarray(values, dtype="<f4")
    edit.add_initializer(name, wire.raw_float_tensor(name, data.shape, memoryview(data.tobytes())))
    return name


def _ints(node: Node, name: str) -> list[int]:
    attribute = node.attribute(name)
    return list(attribute.ints) if attribute is not None else []


def _int(node: Node, name: str, default: int) -> int:
    attribute = node.attribute(name)
    return attribute.i if attribute is not None and attribute.i is not None else default
