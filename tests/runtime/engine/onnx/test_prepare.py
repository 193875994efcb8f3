"""Graphs prepared for this CPU in child processes, one at a time (engine/onnx/prepare.py): the
engine's own process only maps prepared files, a failing child is a one-line BundleError that
leaves nothing in the cache, and a child prepares what this process would have, byte for byte."""

from __future__ import annotations

import logging
import mmap
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.bundle import Bundle
from custom_components.yomiage.engine.errors import BundleError
from custom_components.yomiage.engine.onnx import prepare, wire
from custom_components.yomiage.engine.onnx.machine import blocked_probe_graph
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.sessions import GRAPH_FILE, WEIGHTS_FILE, SessionFactory
from custom_components.yomiage.engine.synthesis.engine import Engine

from ..common import QUIET
from .sample_graphs import residual_feeds, residual_model, run


class Children:
    """Every child process the preparation starts (their command lines), run for real; counts
    how many ran at once at most."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.most_at_once = 0
        self._running = 0
        self._lock = threading.Lock()

    def run(self, command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        with self._lock:
            self.commands.append(command)
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
        try:
            finished: subprocess.CompletedProcess[str] = REAL_RUN(command, **options)
            return finished
        finally:
            with self._lock:
                self._running -= 1

    def sources(self) -> Counter[str]:
        """The file name of each graph a child was given (child_command's fourth-last argument)."""
        return Counter(Path(command[-4]).name for command in self.commands)


REAL_RUN = subprocess.run


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> Children:
    spy = Children()
    monkeypatch.setattr(prepare.subprocess, "run", spy.run)
    return spy


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What every onnxruntime session of this process was made from."""
    made: list[object] = []
    real = ort.InferenceSession

    def spy(model: object, *args: Any, **kwargs: Any) -> ort.InferenceSession:
        made.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    return made


def prepared(cache: Path) -> list[Path]:
    return sorted(path.parent for path in (cache / "sessions").glob(f"*/{GRAPH_FILE}"))


def speaker_graphs(bundle: Path) -> Iterator[Path]:
    for files in Bundle.open(bundle).speakers.values():
        yield files.synthesizer


def test_each_graph_is_prepared_by_a_child_and_this_process_only_maps_the_results(
    tiny_bundle: Path, tmp_path: Path, children: Children, opened: list[object]
) -> None:
    cache = tmp_path / "cache"

    def start() -> int:
        engine = Engine(tiny_bundle, device="cpu", threads=1, graph_cache=cache)
        try:
            engine.load_all()
            return int(engine.synthesize("はい。", QUIET).audio.size)
        finally:
            engine.close()

    # As Home Assistant starts it: in a thread of an executor, not the main thread.
    with ThreadPoolExecutor(1) as executor:
        assert executor.submit(start).result() > 0
    # BERT, then per speaker (two) the synthesizer's front and decoder and the duration graph.
    assert children.sources() == Counter(
        {"bert_q8.onnx": 1, "front.onnx": 2, "decoder.onnx": 2, "duration_predictor.onnx": 2}
    )
    assert len(prepared(cache)) == len(children.commands)  # one graph per child
    # Besides the one-convolution graph that asks onnxruntime for its blocked kernels (the
    # voices' cache keys hold their block size: machine.py).
    models = [model for model in opened if model != blocked_probe_graph()]
    assert models and all(
        isinstance(model, str) and Path(model).parent in prepared(cache) for model in models
    ), "every session of this process maps a prepared file"
    children.commands.clear()
    start()  # a later start: everything mapped, no child
    assert children.commands == []


def test_graphs_asked_for_at_once_are_prepared_one_after_the_other(
    tiny_bundle: Path, tmp_path: Path, children: Children
) -> None:
    factory = SessionFactory(threads=1, cache_dir=tmp_path, use_cache=True)
    graphs = list(speaker_graphs(tiny_bundle))
    with ThreadPoolExecutor(len(graphs)) as executor:
        sessions = list(
            executor.map(lambda graph: factory.create(graph, GraphKind.SYNTHESIZER), graphs)
        )
    assert len(sessions) == len(graphs) == len(prepared(tmp_path)) == len(children.commands)
    assert children.most_at_once == 1


def canonical(model: bytes) -> list[object]:
    """A saved graph, but for the names onnxruntime makes up: its optimiser names the nodes it
    inserts (the NCHWc reorders) differently from one run to the next, even in fresh processes,
    and numbers the tensors it adds from one count with them. So: every field as saved, nodes
    without their names, each made-up number replaced by the order of its first use."""
    model_fields, graph_field = wire.model_graph(memoryview(model))
    graph = wire.Graph.parse(wire.as_message(graph_field.value))
    numbers: dict[str, int] = {}

    def renumbered(text: str) -> str:
        return re.sub(
            r"token_\d+", lambda m: f"token#{numbers.setdefault(m[0], len(numbers))}", text
        )

    nodes = (
        (
            n.op_type,
            n.domain,
            [*map(renumbered, n.inputs)],
            [*map(renumbered, n.outputs)],
            [bytes(a.raw) for a in n.attributes],
            [bytes(o) for o in n.other],
        )
        for n in graph.nodes.values()
    )
    others = (
        renumbered(bytes(item.raw).decode("latin-1"))
        for item in graph.items
        if item.number != wire.GRAPH_NODE
    )
    return [[bytes(f.raw) for f in model_fields if f is not graph_field], *nodes, *others]


@pytest.mark.parametrize(
    ("graph", "kind"),
    [
        ("onnx/bert/q8/bert_q8.onnx", GraphKind.LANGUAGE_MODEL),
        ("onnx/speakers/tiny-a/synthesizer.onnx", GraphKind.SYNTHESIZER),
    ],
)
def test_a_child_prepares_what_this_process_would(
    tiny_bundle: Path, tmp_path: Path, graph: str, kind: GraphKind
) -> None:
    factory = SessionFactory(threads=1, cache_dir=tmp_path / "cache", use_cache=True)
    factory.create(tiny_bundle / graph, kind)
    (entry,) = prepared(tmp_path / "cache")
    here = tmp_path / "here"
    factory.prepare_here(tiny_bundle / graph, here, kind)
    assert (entry / WEIGHTS_FILE).read_bytes() == (here / WEIGHTS_FILE).read_bytes()
    child, ours = ((folder / GRAPH_FILE).read_bytes() for folder in (entry, here))
    assert canonical(child) == canonical(ours)


# Writes part of a prepared graph where the child was told to save it, then fails.
HALF_WRITTEN = (
    "import os, pathlib, signal, sys\n"
    "saved = pathlib.Path(sys.argv[1])\n"
    "saved.mkdir()\n"
    "(saved / 'graph.onnx').write_bytes(b'half a graph')\n"
)
FAILURES = {
    "killed": ("os.kill(os.getpid(), signal.SIGKILL)\n", "the child process was killed by SIGKILL"),
    "raising": (
        "raise RuntimeError('no luck')\n",
        "the child process exited with status 1 (RuntimeError: no luck)",
    ),
}


def failing_child(
    ending: str, only: str | None = None
) -> Callable[[Path, Path, GraphKind, int], list[str]]:
    """A child_command whose child fails after writing half a graph (only for the graph file
    named ``only``, where given; the others are prepared for real)."""

    def command(source: Path, saved: Path, kind: GraphKind, threads: int) -> list[str]:
        if only is not None and source.name != only:
            return REAL_COMMAND(source, saved, kind, threads)
        return [sys.executable, "-c", HALF_WRITTEN + ending, str(saved)]

    return command


REAL_COMMAND = prepare.child_command


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failing_child_is_a_one_line_bundle_error_and_leaves_no_cache_file(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    ending, said = FAILURES[failure]
    monkeypatch.setattr(prepare, "child_command", failing_child(ending))
    cache = tmp_path / "cache"
    with pytest.raises(BundleError) as caught:
        Engine(tiny_bundle, device="cpu", threads=1, graph_cache=cache)
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.path == str(Bundle.open(tiny_bundle).bert_q8)
    assert caught.value.problem.startswith("preparing it for this CPU failed: ")
    assert said in message
    assert list((cache / "sessions").iterdir()) == [], "no entry, no scratch folder left"


def test_a_part_of_the_synthesizer_that_fails_is_named_as_the_synthesizer(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending, said = FAILURES["raising"]
    monkeypatch.setattr(prepare, "child_command", failing_child(ending, only="decoder.onnx"))
    synthesizer = next(speaker_graphs(tiny_bundle))
    factory = SessionFactory(threads=1, cache_dir=tmp_path, use_cache=True)
    with pytest.raises(BundleError, match=re.escape(said)) as caught:
        factory.create_split(synthesizer, "audio")
    assert caught.value.path == str(synthesizer)
    # The front, prepared before the decoder failed, stays; no description of a split, no scratch.
    assert [path.name.split("-")[0] for path in (tmp_path / "sessions").iterdir()] == [
        "synthesizer.front"
    ]


def test_the_child_imports_from_the_path_of_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Home Assistant installs the engine's packages at run time into a folder it puts on
    sys.path itself: the child finds them there too, and what it says is passed on."""
    (tmp_path / "installed_at_run_time.py").write_text(
        "import sys\nsys.stderr.write('imported from the parent path\\n')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        prepare,
        "child_command",
        lambda *_: [sys.executable, "-P", "-c", "import installed_at_run_time"],
    )
    with caplog.at_level(logging.WARNING):
        prepare.prepare_in_child(
            tmp_path / "g.onnx", tmp_path / "saved", GraphKind.SYNTHESIZER, 1, Path("shown.onnx")
        )
    assert "Preparing shown.onnx: imported from the parent path" in caplog.text


# -- weights apart: what onnxruntime is given to prepare (wire.write_external) -----------------
def apart(model: Path) -> dict[str, tuple[int, int]]:
    """Offset and length of each initializer of ``model`` whose data lies in a file apart."""
    _, graph = wire.model_graph(wire.mapped(model))
    found = {}
    for item in wire.fields(wire.as_message(graph.value)):
        if item.number != wire.GRAPH_INITIALIZER or not wire.parse_tensor(item).external:
            continue
        where = {}
        for part in wire.fields(wire.as_message(item.value)):
            if part.number == wire.TENSOR_EXTERNAL_DATA:
                key, value = wire.fields(wire.as_message(part.value))
                where[wire.as_text(key.value)] = wire.as_text(value.value)
        found[wire.parse_tensor(item).name] = (int(where["offset"]), int(where["length"]))
    return found


def test_weights_moved_apart_start_on_pages_and_compute_the_same(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(residual_model())
    target = tmp_path / "apart.onnx"
    # 3 KB or more: the three 16 x 16 convolution weights; the bias, the scalar and the
    # half-width convolution's weight stay in the graph.
    assert wire.write_external(source, target, "apart.bin", 3072)
    places = apart(target)
    assert sorted(places) == ["w0", "w1", "wt"]
    data = (tmp_path / "apart.bin").read_bytes()
    originals = {
        tensor.name: wire.raw_data(tensor, wire.TENSOR_FLOAT)
        for tensor in wire.read_graph(wire.mapped(source)).initializers.values()
    }
    for name, (offset, length) in places.items():
        assert offset % mmap.PAGESIZE == 0
        assert data[offset : offset + length] == originals[name]
    for frames in (1, 9):
        for got, expected in zip(
            run(target, residual_feeds(frames)), run(source, residual_feeds(frames)), strict=True
        ):
            np.testing.assert_array_equal(got, expected)
    assert not wire.write_external(source, tmp_path / "none.onnx", "none.bin", 1 << 20)
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "apart.bin",
        "apart.onnx",
        "model.onnx",
    ]


def test_onnxruntime_prepares_the_graph_from_its_weights_apart(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given apart, the weights are mapped where onnxruntime would copy them into its heap: the
    preparation's peak halves (docs/PERFORMANCE.md). The steps' files go once it is saved."""
    given: list[tuple[str, int]] = []
    real = ort.InferenceSession

    def spy(model: object, *args: Any, **kwargs: Any) -> ort.InferenceSession:
        if isinstance(model, str):
            given.append((Path(model).name, len(apart(Path(model)))))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    SessionFactory(threads=1, use_cache=False).prepare_here(
        Bundle.open(tiny_bundle).bert_q8, tmp_path / "saved", GraphKind.LANGUAGE_MODEL
    )
    ((name, moved),) = given
    assert name == "apart.onnx" and moved > 0
    assert [path.name for path in tmp_path.iterdir()] == ["saved"]
