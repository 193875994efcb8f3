"""onnxruntime sessions: device choice, threads, and loading graphs (errors name the file).

On the CPU each graph is prepared once and cached (docs/PERFORMANCE.md): the passes that
passes/registry.py lists for its kind (BERT, or a voice's synthesizer, front, decoder or
durations), then onnxruntime's fully optimised graph saved with its weights in a file of their
own, pre-packed where onnxruntime's kernels pack them (BERT's int8 matrix products,
ConvTranspose). A graph's cache key holds what its own passes depend on. Later loads
memory-map that file: no graph optimisation, no packing per run, the weights used in place
(onnxruntime still copies a few packed ones, ~20 MB), and weights that are never read (most BERT
embedding rows, the buckets of distances no text reaches) never enter memory. Each graph is
prepared by a child process of its own (prepare.py), so that this process never holds what
preparing costs. ``YOMIAGE_GRAPH_CACHE=0`` loads the graphs as published instead.
"""

from __future__ import annotations

import functools
import json
import logging
import mmap
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import onnxruntime as ort

from ..errors import BundleError, DeviceUnavailableError
from . import cuda_probe, decoder_graph, graph_cache, machine, prepare, wire
from .cores import usable_cores
from .decoder_graph import DecoderShape, DecoderSplit, cut_durations, read_split
from .machine import CPU_PROVIDER, Machine
from .passes.registry import GraphKind, passes_for
from .passes.vits_decoder_span import SPAN_INPUT
from .wire import Chunks, WireError

_LOGGER = logging.getLogger(__name__)

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
# How a prepared graph is saved: part of every cache key (a change makes every graph again).
SAVED_AS = "saved onnx, weights apart, pre-packed"
_HALVES = (GraphKind.FRONT, GraphKind.DECODER)  # a split synthesizer's two graphs, in order


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
    takes_span: bool  # the decoder gives only the span it is fed (passes/vits_decoder_span.py)


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

    def create(self, path: Path, kind: GraphKind) -> ort.InferenceSession:
        """A session of the graph file ``path``, a graph of ``kind`` (prepared on the CPU)."""
        if not path.is_file():
            raise BundleError(str(path), "file is missing")
        if self.device == "cpu" and self.use_cache:
            session = self._from_cache(path, kind)
            if session is not None:
                return session
        return self._open(path, self.options())

    def create_split(self, path: Path, audio: str) -> SplitSessions | None:
        """Front and decoder sessions of a synthesizer whose output ``audio`` the decoder
        makes, for chunked decoding; None when the graph has no clean decoder tail, off the
        CPU, or without the graph cache."""
        if self.device != "cpu" or not self.use_cache or not path.is_file():
            return None
        folder = self._cache_folder()
        try:
            # Described once for both halves: made again where either half's key changes.
            halves = (self._settings(kind, cut=True) for kind in _HALVES)
            settings = "|".join(part for half in halves for part in half)
            meta = graph_cache.cache_entry(path, folder, settings, ".json", "split")
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
                self._open(self._entry(path, kind, cut=True) / GRAPH_FILE, self.mapped_options())
                for kind in _HALVES
            )
        except BundleError as err:
            _LOGGER.warning("Discarding cached split of %s: %s", path, err.problem)
            meta.unlink(missing_ok=True)
            return None
        shape = DecoderShape(hop=described["hop"], context=described["context"])
        takes_span = SPAN_INPUT in {item.name for item in decoder.get_inputs()}
        return SplitSessions(front, decoder, tuple(described["boundary"]), shape, takes_span)

    def create_durations(self, path: Path, output: str | None) -> ort.InferenceSession | None:
        """A session of the part of synthesizer ``path`` that computes the frames per phone
        (decoder_graph.cut_durations: up to its output ``output`` where it has one); None where
        it has no such part. Its inputs are those of the synthesizer that the part reads."""
        if self.device == "cpu" and self.use_cache:
            folder = self._cache_folder()
            try:
                entry = self._entry(path, GraphKind.DURATIONS, cut=True)
                if not (entry / GRAPH_FILE).is_file():
                    cut = _durations_or_none(path, output)
                    if cut is None:
                        return None
                    folder.mkdir(parents=True, exist_ok=True)
                    with tempfile.TemporaryDirectory(dir=folder, prefix=".cut-") as scratch:
                        graph = Path(scratch) / "durations.onnx"
                        wire.write_model(cut, graph)
                        self._prepare(graph, entry, GraphKind.DURATIONS, shown_as=path)
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
                for kind, chunks in zip(_HALVES, (split.front, split.decoder), strict=True):
                    graph = Path(scratch) / f"{kind.value}.onnx"
                    wire.write_model(chunks, graph)
                    entry = self._entry(source, kind, cut=True)
                    self._prepare(graph, entry, kind, shown_as=source)
                shape = split.shape
                described = {"boundary": split.boundary, "hop": shape.hop, "context": shape.context}
            written = Path(scratch) / "split.json"
            written.write_text(json.dumps(described), encoding="utf-8")
            graph_cache.install_entry(written, meta)

    def _entry(self, source: Path, kind: GraphKind, cut: bool = False) -> Path:
        """The cache folder of ``source`` prepared as a graph of ``kind``: the file itself, or
        (``cut``) the part of it that decoder_graph.py cuts out, named after the kind."""
        settings = "|".join(self._settings(kind, cut))
        label = kind.value if cut else ""
        return graph_cache.cache_entry(source, self._cache_folder(), settings, "", label)

    def _settings(self, kind: GraphKind, cut: bool = False) -> tuple[str, ...]:
        """What a graph of ``kind`` prepared here depends on besides its source (and, for a
        part cut out of it, the cut)."""
        here = Machine(self.intra_op_threads)
        passes = tuple(step.key(here) for step in passes_for(kind))
        cuts = (f"cut {decoder_graph.CUT_VERSION}",) if cut else ()
        return (*machine.saved_for(), SAVED_AS, kind.value, *cuts, *passes)

    def _cache_folder(self) -> Path:
        return graph_cache.entries_folder(self.cache_dir)

    def _from_cache(self, source: Path, kind: GraphKind) -> ort.InferenceSession | None:
        """The session from the prepared copy of ``source`` (made now if needed), or None if the
        cache cannot be used; a broken ``source`` raises BundleError as a plain load would."""
        folder = self._cache_folder()
        try:
            entry = self._entry(source, kind)
            if not (entry / GRAPH_FILE).is_file():
                folder.mkdir(parents=True, exist_ok=True)
                self._prepare(source, entry, kind)
        except OSError as err:
            _LOGGER.warning("Graph cache unusable (%s); loading %s as published", err, source)
            return None
        try:
            return self._open(entry / GRAPH_FILE, self.mapped_options())
        except BundleError as err:  # a damaged cache entry: drop it, use the source
            _LOGGER.warning("Discarding cached graph %s: %s", entry, err.problem)
            graph_cache.drop_entry(entry)
            return None

    def _prepare(
        self, source: Path, entry: Path, kind: GraphKind, shown_as: Path | None = None
    ) -> None:
        """Have a child process prepare ``source`` as a graph of ``kind`` (prepare.py), then
        install what it saved as the folder ``entry``; one graph at a time, so that the box
        holds one preparation's memory at most. BundleError names ``shown_as`` (default
        ``source``)."""
        with _PREPARING:
            if (entry / GRAPH_FILE).is_file():
                return  # another thread of this process prepared it meanwhile
            with tempfile.TemporaryDirectory(dir=entry.parent, prefix=".prepare-") as scratch:
                saved = Path(scratch) / "saved"
                threads = self.intra_op_threads
                prepare.prepare_in_child(source, saved, kind, threads, shown_as or source)
                graph_cache.install_entry(saved, entry)
        _LOGGER.info("Prepared %s for fast loading: %s", shown_as or source, entry)

    def prepare_here(self, source: Path, saved: Path, kind: GraphKind) -> None:
        """Run the passes of ``kind`` over the graph, let onnxruntime optimise it, save its
        result as the new folder ``saved``: the graph, and its weights (pre-packed ones too) in
        a file of their own, which later loads map rather than copy. What prepare.py's child
        process runs."""
        saved.mkdir()
        with tempfile.TemporaryDirectory(dir=saved.parent, prefix=".rewrite-") as scratch:
            here = Machine(self.intra_op_threads)
            graph = _passed_or_source(source, Path(scratch), kind, here)
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


def _passed_or_source(source: Path, scratch: Path, kind: GraphKind, here: Machine) -> Path:
    """``source`` after the passes of ``kind`` that find their part in it, its weights then
    moved to a file of their own (onnxruntime maps them instead of copying them into the heap
    that preparing it takes: half the peak for BERT, docs/PERFORMANCE.md); each step written to
    ``scratch``, each step's input removed once the next holds it all (the disk back)."""
    graph = source
    try:
        for number, step in enumerate(passes_for(kind)):
            written = scratch / f"pass-{number}.onnx"
            if wire.rewrite_file(graph, written, functools.partial(step.run, machine=here)):
                if graph != source:
                    graph.unlink()
                graph = written
        apart = scratch / "apart.onnx"
        if wire.write_external(graph, apart, "apart.bin", mmap.PAGESIZE):
            if graph != source:
                graph.unlink()
            graph = apart
    except WireError:
        return source  # not a graph we can read: onnxruntime will name the problem
    return graph
