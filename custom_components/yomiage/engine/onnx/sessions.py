"""onnxruntime sessions: device choice, threads, and loading graphs (errors name the file).

On the CPU each graph is prepared once and cached (docs/PERFORMANCE.md): the flow's frame mask
left out where it is all ones (flow_mask.py), the relative attention of Style-Bert-VITS2's
lineage cut to its window (relative_band.py), convolutions lifted to 2-D (rewrite.py), BERT's
relative positions cut to the buckets a run reads (relative_attention.py), then onnxruntime's
fully optimised graph saved with its weights in a file of their own, pre-packed where
onnxruntime's kernels pack them (BERT's int8 matrix products, ConvTranspose). Later loads
memory-map that file: no graph optimisation, no packing per run, the weights used in place
(onnxruntime still copies a few packed ones, ~20 MB), and weights that are never read (most BERT
embedding rows, the buckets of distances no text reaches) never enter memory. Each graph is
prepared by a child process of its own (prepare.py), so that this process never holds what
preparing costs. ``YOMIAGE_GRAPH_CACHE=0`` loads the graphs as published instead.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import mmap
import os
import platform
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnxruntime as ort

from ..errors import BundleError, DeviceUnavailableError
from . import (
    cuda_probe,
    device_graphs,
    flow_mask,
    graph_cache,
    prepare,
    reduction_split,
    relative_attention,
    relative_band,
    rewrite,
    wire,
)
from .cores import usable_cores
from .decoder_graph import DecoderShape, DecoderSplit, cut_durations, read_split
from .wire import Chunks, WireError

_LOGGER = logging.getLogger(__name__)

CPU_PROVIDER = "CPUExecutionProvider"
# A prepared graph is a folder: the optimised graph and the file of its weights.
GRAPH_FILE = "graph.onnx"
WEIGHTS_FILE = "weights.bin"
DEVICES = ("auto", "cpu", "cuda")
# cuDNN's default search (EXHAUSTIVE) benchmarks every convolution again for each new input shape,
# and every sentence has a new length; HEURISTIC asks cuDNN's heuristics instead, at no cost.
CUDA_OPTIONS = {"cudnn_conv_algo_search": "HEURISTIC"}
# Held while a child prepares a graph: several voices loading at once still prepare one by one.
_PREPARING = threading.Lock()
# A folder: every session run here (not a preparation) writes onnxruntime's per-node profile
# there, named after its graph, when the session ends (tools/roofline.py reads them).
PROFILE_VARIABLE = "YOMIAGE_ORT_PROFILE"


def resolve_device(requested: str) -> str:
    """Pick "cpu" or "cuda" for a requested "auto" | "cpu" | "cuda"."""
    if requested not in DEVICES:
        raise DeviceUnavailableError(
            f"unknown device {requested!r}; use one of {', '.join(DEVICES)}"
        )
    if requested == "cpu":
        return "cpu"
    cuda_problem = cuda_probe.cuda_problem()
    if cuda_problem is None:
        return "cuda"
    if requested == "cuda":
        raise DeviceUnavailableError(f"CUDA was requested but cannot be used: {cuda_problem}")
    _LOGGER.info("Using the CPU: %s", cuda_problem)
    return "cpu"


@dataclass(frozen=True)
class SplitSessions:
    """A synthesizer cut in front of its decoder (decoder_graph.py)."""

    front: ort.InferenceSession  # the synthesizer's inputs -> ``boundary``
    decoder: ort.InferenceSession  # ``boundary`` (time-sliceable) -> audio
    boundary: tuple[str, ...]
    shape: DecoderShape


def _cache_enabled() -> bool:
    return os.environ.get("YOMIAGE_GRAPH_CACHE", "1") != "0"


@dataclass(frozen=True)
class SessionFactory:
    """Creates onnxruntime sessions with one policy for every graph of the engine."""

    device: str = "cpu"
    threads: int | None = None
    cache_dir: Path | None = None  # None: graph_cache.default_cache_dir()
    use_cache: bool = field(default_factory=_cache_enabled)

    @property
    def intra_op_threads(self) -> int:
        return self.threads if self.threads else usable_cores()

    @property
    def providers(self) -> list[str | tuple[str, dict[str, str]]]:
        if self.device == "cuda":
            return [(cuda_probe.CUDA_PROVIDER, CUDA_OPTIONS), CPU_PROVIDER]
        return [CPU_PROVIDER]

    def options(self) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.intra_op_threads
        options.inter_op_num_threads = 1
        # No memory patterns: one is planned and kept per input shape, and every sentence has
        # its own, so a long text's many shapes grew the peak (docs/PERFORMANCE.md).
        options.enable_mem_pattern = False
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # onnxruntime's warnings about unused initialisers are noise
        # Idle pool threads sleep instead of spinning: the kernels here are long, so waking costs
        # nothing measurable, while spinning takes the cores from whatever else runs (HA itself).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self.device == "cpu" and _shared_cpu_arena():
            options.add_session_config_entry("session.use_env_allocators", "1")
        return options

    def mapped_options(self) -> ort.SessionOptions:
        """For a prepared graph: already optimised; its weights, pre-packed ones included, are
        read from the mapped weights file."""
        options = self.options()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return options

    def create_split(self, path: Path, audio: str) -> SplitSessions | None:
        """Front and decoder sessions of a synthesizer whose output ``audio`` the decoder
        makes, for chunked decoding; None when the graph has no clean decoder tail, off the
        CPU, or without the graph cache."""
        if self.device != "cpu" or not self.use_cache or not path.is_file():
            return None
        folder = self._cache_folder()
        try:
            meta = graph_cache.cache_entry(path, folder, self._settings, ".json", "split")
            if not meta.is_file():
                folder.mkdir(parents=True, exist_ok=True)
                self._prepare_split(path, audio, meta)
            described = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            _LOGGER.warning("Graph cache unusable (%s); %s stays whole", err, path)
            return None
        if not described["boundary"]:
            return None
        try:
            front, decoder = (
                self._open(self._part_entry(path, part) / GRAPH_FILE, self.mapped_options())
                for part in ("front", "decoder")
            )
        except BundleError as err:
            _LOGGER.warning("Discarding cached split of %s: %s", path, err.problem)
            meta.unlink(missing_ok=True)
            return None
        shape = DecoderShape(hop=described["hop"], context=described["context"])
        return SplitSessions(front, decoder, tuple(described["boundary"]), shape)

    def create_durations(self, path: Path, output: str | None) -> ort.InferenceSession | None:
        """A session of the part of synthesizer ``path`` that computes the frames per phone
        (decoder_graph.cut_durations: up to its output ``output`` where it has one); None where
        it has no such part. Its inputs are those of the synthesizer that the part reads."""
        if self.device == "cpu" and self.use_cache:
            folder = self._cache_folder()
            try:
                entry = graph_cache.cache_entry(path, folder, self._settings, "", "durations")
                if not (entry / GRAPH_FILE).is_file():
                    cut = _durations_or_none(path, output)
                    if cut is None:
                        return None
                    folder.mkdir(parents=True, exist_ok=True)
                    with tempfile.TemporaryDirectory(dir=folder, prefix=".cut-") as scratch:
                        graph = Path(scratch) / "durations.onnx"
                        wire.write_model(cut, graph)
                        self._prepare(graph, entry, shown_as=path)
                return self._open(entry / GRAPH_FILE, self.mapped_options())
            except OSError as err:
                _LOGGER.warning("Graph cache unusable (%s); durations of %s made here", err, path)
            except BundleError as err:  # a damaged entry: dropped, the part made in memory
                _LOGGER.warning("Discarding cached durations of %s: %s", path, err.problem)
                graph_cache.drop_entry(entry)
        cut = _durations_or_none(path, output)
        if cut is None:
            return None
        return self._open(b"".join(cut.parts), self.options(), shown_as=path)

    def _prepare_split(self, source: Path, audio: str, meta: Path) -> None:
        """Cut ``source`` before its decoder, prepare both halves, then describe the cut."""
        split = _split_or_none(source, audio)
        described: dict[str, object] = {"boundary": []}
        with tempfile.TemporaryDirectory(dir=meta.parent, prefix=".split-") as scratch:
            if split is not None:
                for part, chunks in (("front", split.front), ("decoder", split.decoder)):
                    graph = Path(scratch) / f"{part}.onnx"
                    wire.write_model(chunks, graph)
                    self._prepare(graph, self._part_entry(source, part), shown_as=source)
                shape = split.shape
                described = {"boundary": split.boundary, "hop": shape.hop, "context": shape.context}
            written = Path(scratch) / "split.json"
            written.write_text(json.dumps(described), encoding="utf-8")
            graph_cache.install_entry(written, meta)

    def _part_entry(self, source: Path, part: str) -> Path:
        folder = self._cache_folder()
        return graph_cache.cache_entry(source, folder, self._settings, "", part)

    @property
    def _settings(self) -> str:
        return _prepared_settings(self.intra_op_threads)

    def _cache_folder(self) -> Path:
        return (self.cache_dir or graph_cache.default_cache_dir()) / "sessions"

    def create(self, path: Path) -> ort.InferenceSession:
        if not path.is_file():
            raise BundleError(str(path), "file is missing")
        if self.device == "cpu" and self.use_cache:
            session = self._from_cache(path)
            if session is not None:
                return session
        return self._open(path, self.options())

    def _from_cache(self, source: Path) -> ort.InferenceSession | None:
        """The session from the prepared copy of ``source`` (made now if needed), or None if the
        cache cannot be used; a broken ``source`` raises BundleError as a plain load would."""
        folder = self._cache_folder()
        try:
            entry = graph_cache.cache_entry(source, folder, self._settings, "")
            if not (entry / GRAPH_FILE).is_file():
                folder.mkdir(parents=True, exist_ok=True)
                self._prepare(source, entry)
        except OSError as err:
            _LOGGER.warning("Graph cache unusable (%s); loading %s as published", err, source)
            return None
        try:
            return self._open(entry / GRAPH_FILE, self.mapped_options())
        except BundleError as err:  # a damaged cache entry: drop it, use the source
            _LOGGER.warning("Discarding cached graph %s: %s", entry, err.problem)
            graph_cache.drop_entry(entry)
            return None

    def _prepare(self, source: Path, entry: Path, shown_as: Path | None = None) -> None:
        """Have a child process prepare ``source`` (prepare.py), then install what it saved as
        the folder ``entry``; one graph at a time, so that the box holds one preparation's
        memory at most. BundleError names ``shown_as`` (default ``source``)."""
        with _PREPARING:
            if (entry / GRAPH_FILE).is_file():
                return  # another thread of this process prepared it meanwhile
            with tempfile.TemporaryDirectory(dir=entry.parent, prefix=".prepare-") as scratch:
                saved = Path(scratch) / "saved"
                prepare.prepare_in_child(source, saved, self.intra_op_threads, shown_as or source)
                graph_cache.install_entry(saved, entry)
        _LOGGER.info("Prepared %s for fast loading: %s", shown_as or source, entry)

    def prepare_here(self, source: Path, saved: Path) -> None:
        """Rewrite the graph, let onnxruntime optimise it, save its result as the new folder
        ``saved``: the graph, and its weights (pre-packed ones too) in a file of their own,
        which later loads map rather than copy. What prepare.py's child process runs."""
        saved.mkdir()
        with tempfile.TemporaryDirectory(dir=saved.parent, prefix=".rewrite-") as scratch:
            graph = _rewritten_or_source(source, Path(scratch), self.intra_op_threads)
            options = self.options()
            options.optimized_model_filepath = str(saved / GRAPH_FILE)
            for key, value in (
                ("session.optimized_model_external_initializers_file_name", WEIGHTS_FILE),
                ("session.optimized_model_external_initializers_min_size_in_bytes", "1024"),
                ("session.save_external_prepacked_constant_initializers", "1"),
            ):
                options.add_session_config_entry(key, value)
            try:
                self._open(graph, options)
            except BundleError:
                if graph == source:
                    raise
                _LOGGER.warning("Rewritten %s did not load; caching it unrewritten", source)
                self._open(source, options)

    def _open(
        self, graph: Path | bytes, options: ort.SessionOptions, shown_as: Path | None = None
    ) -> ort.InferenceSession:
        """A session of the graph file (or the graph's bytes, named ``shown_as`` in errors)."""
        source = str(graph) if isinstance(graph, Path) else graph
        profiles = os.environ.get(PROFILE_VARIABLE)
        if profiles and not options.optimized_model_filepath:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(profiles) / _graph_label(graph, shown_as))
        try:
            return ort.InferenceSession(source, options, providers=self.providers)
        except Exception as err:  # onnxruntime raises its own exception types for bad graphs
            first_line = (
                str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            )
            raise BundleError(
                str(shown_as or graph), f"not a loadable ONNX graph ({first_line[:200]})"
            ) from err


def _graph_label(graph: Path | bytes, shown_as: Path | None) -> str:
    """What a graph is called in file names: a prepared entry by its folder's name up to its
    versions (``synthesizer.decoder``), any other graph by its file's stem."""
    if isinstance(graph, Path) and graph.name == GRAPH_FILE:
        return graph.parent.name.split("-", 1)[0]
    named = graph if isinstance(graph, Path) else shown_as
    return named.stem if named is not None else "graph"


@functools.cache
def _shared_cpu_arena() -> bool:
    """One memory arena for every CPU session of the process (registered once): the sessions
    take turns, so each need not keep an arena of its own sized for its largest run
    (docs/PERFORMANCE.md)."""
    memory = ort.OrtMemoryInfo(
        "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
    )
    try:
        ort.create_and_register_allocator(memory, ort.OrtArenaCfg({}))
    except Exception as err:  # onnxruntime's own exception types; only memory is lost
        _LOGGER.debug("No shared arena: %s", err)
        return False
    return True


def _durations_or_none(source: Path, output: str | None) -> Chunks | None:
    try:
        return cut_durations(wire.mapped(source), output)
    except WireError:
        return None  # the synthesizer's own load names the problem


def _split_or_none(source: Path, audio: str) -> DecoderSplit | None:
    try:
        return read_split(source, audio)
    except WireError:
        return None  # onnxruntime names the problem when the whole graph is loaded


def _rewritten_or_source(source: Path, scratch: Path, threads: int) -> Path:
    """``source`` after the load-time rewrites that find their part in it (the flow's frame
    mask left out where it is all ones, the relative attention's zero-padded terms cut to the
    window, the synthesizer's convolutions lifted, its front's too where that pays on this CPU,
    those that would leave one of ``threads`` idle split into partial sums, BERT's relative
    positions cut to the buckets read), its weights then moved to a file of their own
    (onnxruntime maps them instead of copying them into the heap that preparing it takes: half
    the peak for BERT, docs/PERFORMANCE.md); each step written to ``scratch``, each step's input
    removed once the next holds it all (the disk back)."""
    block = blocked_kernel_block()
    frame_rate = rewrite.frame_rate_lift_pays(block)
    steps: list[tuple[str, Callable[[Path, Path], bool]]] = [
        # First: it tells the flow by the exporter's node names, which later steps' nodes lack.
        ("unmasked.onnx", lambda a, b: wire.rewrite_file(a, b, flow_mask.leave_out_flow_mask)),
        (
            "banded.onnx",
            lambda a, b: wire.rewrite_file(a, b, relative_band.band_relative_attention),
        ),
        (
            "lifted.onnx",
            lambda a, b: rewrite.write_lifted(a, b, block=block, frame_rate=frame_rate),
        ),
        (
            "split.onnx",
            lambda a, b: wire.rewrite_file(
                a, b, lambda model: reduction_split.split_reductions(model, block, threads)
            ),
        ),
        (
            "sliced.onnx",
            lambda a, b: wire.rewrite_file(a, b, relative_attention.slice_relative_positions),
        ),
        ("apart.onnx", lambda a, b: wire.write_external(a, b, "apart.bin", mmap.PAGESIZE)),
    ]
    graph = source
    try:
        for name, step in steps:
            written = scratch / name
            if step(graph, written):
                if graph != source:
                    graph.unlink()
                graph = written
    except WireError:
        return source  # not a graph we can read: onnxruntime will name the problem
    return graph


_BLOCKED_DOMAIN = "com.microsoft.nchwc"  # onnxruntime's blocked-layout operators


@functools.cache
def blocked_kernel_block() -> int:
    """Floats per block of this onnxruntime's blocked NCHWc convolutions (8 on AVX2, 16 on
    AVX-512), 0 where it has none (x86 builds have them; others may not): asked once, by
    optimising a one-convolution graph with 8 output channels: the NCHWc pass makes it a blocked
    convolution whose reordered weight has its output channels padded to a whole block."""
    probe_channels = 8
    weight = wire.float_tensor("w", [probe_channels, 16, 1, 1], [0.0] * probe_channels * 16)
    conv = wire.node_field("Conv", ["x", "w"], ["y"])
    graph = device_graphs.model(
        "blocked_probe",
        [conv],
        inputs=[wire.value_info("x", wire.TENSOR_FLOAT, [1, 16, 1, 8])],
        outputs=[wire.value_info("y", wire.TENSOR_FLOAT, [1, probe_channels, 1, 8])],
        initializers=[weight],
    )
    with tempfile.TemporaryDirectory(prefix="yomiage-probe-") as scratch:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.optimized_model_filepath = str(Path(scratch) / "optimised.onnx")
        try:
            ort.InferenceSession(graph, options, providers=[CPU_PROVIDER])
            saved = memoryview(Path(scratch, "optimised.onnx").read_bytes())
        except Exception as err:  # onnxruntime's own exception types; only a speed hint is lost
            _LOGGER.debug("Blocked-kernel probe failed: %s", err)
            return 0
    _, graph_field = wire.model_graph(saved)
    optimised = wire.Graph.parse(wire.as_message(graph_field.value))
    blocked = (
        optimised.initializers.get(node.inputs[1])
        for node in optimised.nodes.values()
        if node.op_type == "Conv" and node.domain == _BLOCKED_DOMAIN and len(node.inputs) > 1
    )
    return next((weight.dims[0] for weight in blocked if weight is not None), 0)


def _prepared_settings(threads: int) -> str:
    """What a saved graph depends on besides its source: the optimised graph holds kernels
    chosen for this onnxruntime and this CPU (NCHWc block size follows AVX2 / AVX-512), and
    which convolutions are split depends on the threads that share them."""
    return "|".join(
        (
            f"ort {ort.__version__}",
            f"lift {rewrite.REWRITE_VERSION}/{rewrite.DEFAULT_MIN_CHANNELS}",
            f"relative positions {relative_attention.REWRITE_VERSION}",
            f"relative band {relative_band.REWRITE_VERSION}",
            f"flow mask {flow_mask.REWRITE_VERSION}",
            f"reduction split {reduction_split.REWRITE_VERSION} on {threads} threads",
            "saved onnx, weights apart, pre-packed",
            platform.machine(),
            _cpu_flags_digest(),
        )
    )


def _cpu_flags_digest() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            flags = next((line for line in cpuinfo if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return hashlib.sha256(flags.encode()).hexdigest()[:12]
