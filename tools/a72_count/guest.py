"""The guest side of tools/a72_count: runs inside the .arm64 root file system (its Python 3.11 and
/opt/venv), under qemu-aarch64 with the counting plugin (plugin.c), and marks what it does.

    python guest.py run SPEC.json      (started by tools/a72_count, which reads what it wrote)
    python guest.py prepare SPEC.json  (through scripts/chroot: Yomiage's graphs prepared first)

A mark is ``lseek(-1, MARK_BASE + k, 0)``: the plugin writes every thread's instruction count
with ``k``; this script writes what each ``k`` meant (SPEC's ``events`` file). Marked: each
text's start and end, Yomiage's first audio, each onnxruntime run's start and end (with the
session's stage), and each Python thread's start (so that the threads that never mark are
onnxruntime's pool threads). Imports nothing from ``tools`` (the rootfs has no .venv-tools).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARK_BASE = 0x594F4D0000000000  # plugin.c's MARK_BASE
SPINNING = "session.intra_op.allow_spinning"


class Marks:
    """Numbered marks, and what each meant, in the order they were made."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def mark(self, kind: str, **details: Any) -> None:
        with self._lock:
            number = len(self.events)
            self.events.append({"k": number, "kind": kind, **details})
            # The call itself is the mark; it fails (no such file), as intended.
            with contextlib.suppress(OSError):
                os.lseek(-1, MARK_BASE + number, os.SEEK_SET)


def stage_of(path: str, inputs: list[str], outputs: list[str]) -> str:
    """The stage a session runs, from its graph file and its inputs and outputs: BERT, the
    duration predictor's graph (pauses), Yomiage's synthesizer halves (front: text encoder,
    durations and flow; decoder), or a whole synthesizer (hayakoe: one run for all)."""
    lowered = path.lower()
    if path == "<bytes>":  # a graph made in memory (Yomiage's CPU probe at load)
        return "other"
    if "yomi_model" in lowered:  # pyopenjtalk-plus's reading of 何 (Yomiage's text analysis)
        return "reading model"
    if "input_ids" in inputs or "bert" in Path(lowered).name or "/bert" in lowered:
        return "bert"
    if "duration" in lowered:
        return "duration_predictor"
    if ".decoder" in lowered or "decoder" in Path(lowered).parent.name:
        return "decoder"
    if ".front" in lowered or "front" in Path(lowered).parent.name:
        return "front"
    return "synthesizer"


def spinning_of(options: Any) -> str:
    """Whether the session's idle pool threads spin: "0" or "1" (onnxruntime's default)."""
    try:
        return str(options.get_session_config_entry(SPINNING))
    except RuntimeError:  # not set: the default
        return "1"


def count_runs(
    marks: Marks, threads: int, set_threads: bool, refused: str | None
) -> list[dict[str, Any]]:
    """Wraps onnxruntime's sessions so that each run is marked with its stage; ``set_threads``:
    every session gets ``threads`` intra-op threads that sleep when idle (what Yomiage sets
    itself; hayakoe leaves onnxruntime's defaults); a session of a graph under ``refused``
    stops the run at once. Returns the sessions made, described."""
    import onnxruntime as ort

    cls = ort.InferenceSession
    made: list[dict[str, Any]] = []
    init: Callable[..., None] = cls.__init__
    run: Callable[..., Any] = cls.run

    def counted_init(
        self: Any, source: Any, sess_options: Any = None, *args: Any, **kw: Any
    ) -> None:
        path = str(source) if isinstance(source, str | os.PathLike) else "<bytes>"
        if refused and path.startswith(refused):
            # Yomiage prepares a missing graph in a child process, which qemu with a plugin
            # cannot start; it would run the graph as published, which is not what users run.
            raise SystemExit(f"graphs not prepared beforehand: {path}")
        options = sess_options if sess_options is not None else ort.SessionOptions()
        if set_threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry(SPINNING, "0")
        init(self, source, options, *args, **kw)
        inputs = [i.name for i in self.get_inputs()]
        outputs = [o.name for o in self.get_outputs()]
        self._a72_stage = stage_of(path, inputs, outputs)  # InParts names its parts' own
        made.append(
            {
                "path": path,
                "stage": self._a72_stage,
                "inputs": inputs,
                "outputs": outputs,
                "intra_op_threads": options.intra_op_num_threads,
                "spinning": spinning_of(options),
            }
        )

    def counted_run(self: Any, *args: Any, **kw: Any) -> Any:
        stage = getattr(self, "_a72_stage", "unknown")
        marks.mark("run_begin", stage=stage)
        try:
            return run(self, *args, **kw)
        finally:
            marks.mark("run_end", stage=stage)

    cls.__init__ = counted_init  # type: ignore[method-assign]
    cls.run = counted_run  # type: ignore[method-assign]
    return made


def mark_python_threads(marks: Marks) -> None:
    """Each Python thread marks its start: a thread that never marks is a native one."""
    bootstrap: Callable[[threading.Thread], None] = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def marked(self: threading.Thread) -> None:
        marks.mark("python_thread", name=self.name)
        bootstrap(self)

    threading.Thread._bootstrap_inner = marked  # type: ignore[attr-defined]


def _held_clock() -> float:
    return 0.0


class Yomiage:
    def __init__(self, spec: dict[str, Any]) -> None:
        from yomiage_engine import Engine, SynthesisOptions

        # A clock held still: the pieces a sentence is decoded in are chosen on the clock, and
        # emulation's pace (which varies with this machine's load) must not choose them. Held:
        # the first piece at its minimum and no later sentence split, as a Pi 4B chooses
        # (decode_speed.py: at a third of real time its first-audio budget is under the minimum).
        self.engine = Engine(
            spec["bundle"],
            device="cpu",
            threads=spec["threads"],
            graph_cache=Path(spec["cache"]),
            clock=_held_clock,
        )
        self.engine.load_all()  # every session, and its one timing synthesis
        self.rate = self.engine.sample_rate
        # No smooth start: its lead of silence would be the first audio. Noise off: the same
        # durations, so the same work, every run.
        self.options = SynthesisOptions(
            voice=spec["voice"], noise=0.0, noise_w=0.0, smooth_start=False
        )

    def speak(self, text: str, first: Callable[[], None]) -> int:
        samples = 0
        for chunk in self.engine.stream(text, self.options):
            if not samples:
                first()
            samples += int(chunk.pcm.shape[0])
        return samples


class Hayakoe:
    def __init__(self, spec: dict[str, Any]) -> None:
        sys.path.insert(0, spec["hayakoe_path"])  # its pyopenjtalk before the venv's
        from hayakoe import TTS

        bundle = Path(spec["bundle"])
        speaker, _, self.style = spec["voice"].partition("/")
        tts = TTS(device="cpu", cache_dir=Path(spec["cache"]) / "hayakoe", bert_source=str(bundle))
        self.speaker = tts.load(speaker, source=str(bundle)).prepare().speakers[speaker]
        self.rate = int(self.speaker.sampling_rate)

    def speak(self, text: str, first: Callable[[], None]) -> int:
        # hayakoe returns the whole text at once: its first audio is its end.
        result = self.speaker.generate(text, style=self.style, noise=0.0, noise_w=0.0)
        return len(result.data)


class YomiageInParts(Yomiage):
    """Yomiage with each voice's front and decoder run as consecutive parts, one onnxruntime
    session each, so that the marks split them: the front into text encoder, durations and flow
    (the exporter's scopes), the decoder by channel width (a part per upsampling). The parts are
    the graphs the engine prepares for this CPU (cut, passes), cut where the label changes; each
    part is optimised by onnxruntime on its own, so fusions across a cut are lost (a little more
    work than the whole graphs)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        import dataclasses

        from yomiage_engine.onnx import wire
        from yomiage_engine.onnx.decoder_graph import read_split
        from yomiage_engine.onnx.machine import Machine
        from yomiage_engine.onnx.passes.registry import GraphKind, prepared_in_memory
        from yomiage_engine.onnx.sessions import SessionFactory

        factory = SessionFactory(threads=spec["threads"], use_cache=False)
        machine = Machine(spec["threads"])
        for source, graphs in self.engine._graphs.items():
            split = graphs._split_sessions()
            cut = read_split(source, graphs._contract.output)
            if split is None or cut is None:
                raise SystemExit(f"{source}: no split synthesizer to count in parts")
            halves = {}
            for kind, chunks in ((GraphKind.FRONT, cut.front), (GraphKind.DECODER, cut.decoder)):
                published = b"".join(bytes(part) for part in chunks.parts)
                labels = front_labels
                if kind is GraphKind.DECODER:  # its parts follow the published upsamplings
                    labels = decoder_labels(wire.read_graph(memoryview(published)))
                graph = prepared_in_memory(published, kind, machine)
                halves[kind] = InParts(graph, labels, factory)
            with graphs._lock:
                graphs._split = dataclasses.replace(
                    split, front=halves[GraphKind.FRONT], decoder=halves[GraphKind.DECODER]
                )


class InParts:
    """A graph run as consecutive parts: the nodes, in the order the graph lists them (an order
    that computes every input first), cut wherever ``labels`` changes; each part a session whose
    runs are marked with its label; tensors handed on by name. Runs as a session does."""

    def __init__(
        self, graph: bytes, labels: Callable[[Any, list[int]], list[str]], factory: Any
    ) -> None:
        from yomiage_engine.onnx import wire
        from yomiage_engine.onnx.graph_edit import GraphEdit

        fields, graph_field = wire.model_graph(memoryview(graph))
        parsed = wire.Graph.parse(wire.as_message(graph_field.value))
        positions = sorted(parsed.nodes)
        runs: list[tuple[str, list[int]]] = []
        for position, label in zip(positions, labels(parsed, positions), strict=True):
            if runs and runs[-1][0] == label:
                runs[-1][1].append(position)
            else:
                runs.append((label, [position]))
        cuts = []
        for number, (_, members) in enumerate(runs):
            made = {name for p in members for name in parsed.nodes[p].outputs}
            read = [name for p in members for name in parsed.nodes[p].inputs if name]
            inputs = [
                n for n in dict.fromkeys(read) if n not in made and n not in parsed.initializers
            ]
            later = {
                n
                for _, others in runs[number + 1 :]
                for p in others
                for n in parsed.nodes[p].inputs
            }
            cuts.append((inputs, [n for n in made if n in later or n in parsed.outputs]))
        types = _tensor_types(
            fields, graph_field, {n for _, outputs in cuts for n in outputs}, factory
        )
        self.outputs = list(parsed.outputs)
        self.parts: list[tuple[Any, list[str], list[str]]] = []
        for (label, members), (inputs, outputs) in zip(runs, cuts, strict=True):
            edit = GraphEdit(parsed, "part")
            edit.keep_only(set(members), inputs, outputs, types)
            encoded = wire.with_graph(fields, graph_field, edit.encode())
            session = ort_session(b"".join(bytes(x) for x in encoded.parts), factory)
            session._a72_stage = label
            self.parts.append((session, inputs, outputs))

    def run(self, names: Any, feeds: dict[str, Any], options: Any = None) -> list[Any]:
        values = dict(feeds)
        for session, inputs, outputs in self.parts:
            made = session.run(outputs, {name: values[name] for name in inputs}, options)
            values.update(zip(outputs, made, strict=True))
        return [values[name] for name in (names or self.outputs)]


# onnxruntime's type names -> TensorProto element types
_ELEMENT_TYPES = {"tensor(float)": 1, "tensor(int32)": 6, "tensor(int64)": 7, "tensor(bool)": 9}


def _tensor_types(fields: Any, graph_field: Any, names: set[str], factory: Any) -> dict[str, int]:
    """The element type of the graph's inputs and of each of ``names``: the graph with those
    declared as outputs of no type, as onnxruntime infers them."""
    from yomiage_engine.onnx import wire

    probe = wire.Chunks()
    probe.add(wire.as_message(graph_field.value))
    for name in sorted(names):
        probe.add(wire.bytes_field(wire.GRAPH_OUTPUT, wire.text_field(wire.VALUE_INFO_NAME, name)))
    encoded = wire.with_graph(fields, graph_field, probe)
    session = ort_session(b"".join(bytes(x) for x in encoded.parts), factory)
    declared = [*session.get_inputs(), *session.get_outputs()]
    return {item.name: _ELEMENT_TYPES[item.type] for item in declared}


def front_labels(graph: Any, positions: list[int]) -> list[str]:
    """Text encoder, durations, flow, by the exporter's scopes; a node of none (glue, a pass's
    own) goes with the one before it."""
    scopes = (
        ("/enc_p/", "text encoder"),
        ("/sdp/", "durations"),
        ("/dp/", "durations"),
        ("/flow/", "flow"),
    )
    labels, current = [], "text encoder"
    for position in positions:
        name = graph.nodes[position].name
        current = next((label for scope, label in scopes if scope in name), current)
        labels.append(current)
    return labels


def decoder_labels(published: Any) -> Callable[[Any, list[int]], list[str]]:
    """The decoder by channel width: a new part at each upsampling of the ``published`` decoder,
    from the first node that reads its input (its ConvTranspose, or the first of the nodes a
    pass made of it), named by its output channels (before the first: frame rate)."""
    from yomiage_engine.onnx.decoder_graph import is_upsampling

    widths = {
        node.inputs[0]: published.initializers[node.inputs[1]].dims[1]
        for node in published.nodes.values()
        if is_upsampling(node)
    }

    def labels(graph: Any, positions: list[int]) -> list[str]:
        found, current = [], "decoder, frame rate"
        for position in positions:
            width = next((widths[n] for n in graph.nodes[position].inputs if n in widths), None)
            if width is not None:
                current = f"decoder, {width} ch"
            found.append(current)
        return found

    return labels


def ort_session(graph: bytes, factory: Any) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(graph, factory.options(), providers=["CPUExecutionProvider"])


def run(spec: dict[str, Any]) -> None:
    marks = Marks()
    marks.mark("python_thread", name=threading.current_thread().name)
    mark_python_threads(marks)
    kind = spec["engine"]
    ours = kind != "hayakoe"  # sessions made with Yomiage's own options
    refused = spec["bundle"] if ours else None
    sessions = count_runs(marks, spec["threads"], set_threads=not ours, refused=refused)
    engines = {"yomiage": Yomiage, "hayakoe": Hayakoe, "yomiage-parts": YomiageInParts}
    engine = engines[kind](spec)
    for text in spec["warmup"]:
        engine.speak(text, lambda: None)
    marks.mark("loaded")
    texts: list[dict[str, Any]] = []
    for name, text in spec["texts"].items():
        marks.mark("text_begin", text=name)
        samples = engine.speak(text, functools.partial(marks.mark, "first_audio", text=name))
        marks.mark("text_end", text=name)
        texts.append({"name": name, "samples": samples, "audio_s": samples / engine.rate})
        # Written after every text: a long run stopped early still tells what it counted.
        Path(spec["events"]).write_text(
            json.dumps({"events": marks.events, "sessions": sessions, "texts": texts}, indent=1),
            encoding="utf-8",
        )


def prepare(spec: dict[str, Any]) -> None:
    """Yomiage's graphs prepared for this CPU and thread count (children of their own, which
    qemu-user with a plugin cannot start: run through scripts/chroot)."""
    from yomiage_engine import Engine

    engine = Engine(
        spec["bundle"], device="cpu", threads=spec["threads"], graph_cache=Path(spec["cache"])
    )
    engine.load_all()
    engine.close()


def main() -> None:
    command, spec_path = sys.argv[1], sys.argv[2]
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    {"run": run, "prepare": prepare}[command](spec)


if __name__ == "__main__":
    main()
