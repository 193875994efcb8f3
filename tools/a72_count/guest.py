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
        self._a72_stage = stage_of(path, inputs, outputs)  # DecoderStages names its own
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


class Yomiage:
    def __init__(self, spec: dict[str, Any]) -> None:
        from yomiage_engine import Engine, SynthesisOptions

        self.engine = Engine(
            spec["bundle"], device="cpu", threads=spec["threads"], graph_cache=Path(spec["cache"])
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


class DecoderStages:
    """The voice's decoder (as Yomiage cuts it from the synthesizer and lifts it) cut again in
    front of each upsampling: one session per stage, named by its channels, run one after the
    other on ``SECONDS`` of random latent frames, whatever the text. Each stage is prepared as the
    engine prepares the whole decoder for this CPU."""

    SECONDS = 1.0

    def __init__(self, spec: dict[str, Any]) -> None:
        import numpy as np
        from yomiage_engine.onnx import wire
        from yomiage_engine.onnx.decoder_graph import split_decoder
        from yomiage_engine.onnx.machine import blocked_kernel_block
        from yomiage_engine.onnx.passes import vits_conv_lift
        from yomiage_engine.onnx.sessions import SessionFactory

        speaker = spec["voice"].partition("/")[0]
        model = Path(spec["bundle"]) / "onnx" / "speakers" / speaker / "synthesizer.onnx"
        source = wire.mapped(model)
        audio_outputs = wire.read_interface(model).outputs
        split = next(
            found for name in audio_outputs if (found := split_decoder(source, name)) is not None
        )
        config = json.loads((model.parent / "config.json").read_text(encoding="utf-8"))
        self.rate, hop = int(config["data"]["sampling_rate"]), split.shape.hop
        factory = SessionFactory(threads=spec["threads"], use_cache=False)
        self.stages: list[tuple[Any, list[str], str]] = []
        decoder = b"".join(bytes(part) for part in split.decoder.parts)
        for label, graph, inputs, output in stage_graphs(decoder, split.boundary):
            lifted = vits_conv_lift.lift_for_cpu(memoryview(graph), block=blocked_kernel_block())
            prepared = graph if lifted is None else b"".join(bytes(part) for part in lifted.parts)
            session = ort_session(prepared, factory)
            session._a72_stage = label
            self.stages.append((session, inputs, output))
        frames = round(self.SECONDS * self.rate / hop)
        rng = np.random.default_rng(0)
        widths = boundary_widths(decoder, split.boundary)
        self.feeds = {
            name: rng.standard_normal((1, width, frames if i == 0 else 1)).astype(np.float32)
            for i, (name, width) in enumerate(widths.items())
        }
        self.samples = frames * hop

    def speak(self, text: str, first: Callable[[], None]) -> int:
        values = dict(self.feeds)
        for session, inputs, output in self.stages:
            (values[output],) = session.run([output], {name: values[name] for name in inputs})
        return self.samples


def ort_session(graph: bytes, factory: Any) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(graph, factory.options(), providers=["CPUExecutionProvider"])


def stage_graphs(
    decoder: bytes, boundary: tuple[str, ...]
) -> list[tuple[str, bytes, list[str], str]]:
    """The decoder cut in front of each upsampling ConvTranspose: (label, graph, its inputs, its
    output) per stage, labelled by the channels it runs at (the first: at frame rate)."""
    from yomiage_engine.onnx import wire
    from yomiage_engine.onnx.graph_edit import GraphEdit

    fields, graph_field = wire.model_graph(memoryview(decoder))
    graph = wire.Graph.parse(wire.as_message(graph_field.value))
    stage_of: dict[str, int] = {name: 0 for name in boundary}
    untimed: dict[str, int] = {}  # constants: written into each stage that reads them
    members: list[set[int]] = [set()]
    labels = ["decoder, frame rate"]
    for position in sorted(graph.nodes):
        node = graph.nodes[position]
        timed = [stage_of[name] for name in node.inputs if name in stage_of]
        if not timed:
            untimed.update((name, position) for name in node.outputs)
            continue
        stage = max(timed)
        if node.op_type == "ConvTranspose" and node.first_int("strides", 1) > 1:
            stage = len(members)
            members.append(set())
            labels.append(f"decoder, {graph.initializers[node.inputs[1]].dims[1]} ch")
        members[stage].add(position)
        for name in node.outputs:
            stage_of[name] = stage
    for positions in members:
        reads = {name for p in positions for name in graph.nodes[p].inputs}
        positions.update(untimed[name] for name in reads if name in untimed)
    stages = []
    for number, positions in enumerate(members):
        made = {name for p in positions for name in graph.nodes[p].outputs}
        read = [n for p in sorted(positions) for n in graph.nodes[p].inputs if n]
        inputs = list(
            dict.fromkeys(n for n in read if n not in made and n not in graph.initializers)
        )
        later = {
            n
            for p in graph.nodes
            for n in graph.nodes[p].inputs
            if stage_of.get(n) == number and p not in positions
        }
        outputs = [n for n in made if n in later or n in graph.outputs]
        if len(outputs) != 1:
            raise SystemExit(f"stage {labels[number]} hands on {outputs}: not a chain")
        edit = GraphEdit(graph, "stage")
        edit.keep_only(positions, inputs, outputs)
        encoded = wire.with_graph(fields, graph_field, edit.encode())
        stages.append(
            (labels[number], b"".join(bytes(p) for p in encoded.parts), inputs, outputs[0])
        )
    return stages


def boundary_widths(decoder: bytes, boundary: tuple[str, ...]) -> dict[str, int]:
    """The channels of each decoder input, from the first convolution that reads it."""
    from yomiage_engine.onnx import wire

    graph = wire.Graph.parse(wire.as_message(wire.model_graph(memoryview(decoder))[1].value))
    readers = graph.consumers()

    def width(name: str) -> int:
        for position in readers.get(name, []):
            node = graph.nodes[position]
            if node.op_type == "Conv" and node.inputs[0] == name:
                return int(graph.initializers[node.inputs[1]].dims[1])
            for output in node.outputs:
                if found := width(output):
                    return found
        return 0

    return {name: width(name) for name in boundary}


def run(spec: dict[str, Any]) -> None:
    marks = Marks()
    marks.mark("python_thread", name=threading.current_thread().name)
    mark_python_threads(marks)
    kind = spec["engine"]
    ours = kind in ("yomiage", "decoder")  # sessions made with Yomiage's own options
    refused = spec["bundle"] if kind == "yomiage" else None
    sessions = count_runs(marks, spec["threads"], set_threads=not ours, refused=refused)
    engine = {"yomiage": Yomiage, "hayakoe": Hayakoe, "decoder": DecoderStages}[kind](spec)
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
