"""Prepared graphs and their cache keys (engine/onnx/sessions.py): a graph is prepared again only
when something its own passes depend on changes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.errors import BundleError
from custom_components.yomiage.engine.onnx.machine import Dependency
from custom_components.yomiage.engine.onnx.passes import registry
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind, Pass
from custom_components.yomiage.engine.onnx.sessions import GRAPH_FILE, WEIGHTS_FILE, SessionFactory
from custom_components.yomiage.engine.synthesis.engine import Engine

from ..common import QUIET, THREE_SENTENCES
from .sample_graphs import CHANNELS, TOLERANCE, residual_feeds, residual_model
from .test_prepare import Children, children  # noqa: F401 (the fixture)


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "bundle" / "synthesizer.onnx"
    path.parent.mkdir()
    path.write_bytes(residual_model())
    return path


def cached_factory(cache: Path) -> SessionFactory:
    return SessionFactory(threads=1, cache_dir=cache, use_cache=True)


def cache_entries(cache: Path) -> list[Path]:
    return sorted((cache / "sessions").glob("*"))


def outputs(session: ort.InferenceSession, frames: int = 6) -> list[NDArray[np.float32]]:
    return [np.asarray(out) for out in session.run(None, residual_feeds(frames))]


def test_session_cache_prepares_once_then_maps_the_saved_graph(
    graph_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = cached_factory(cache).create(graph_file, GraphKind.SYNTHESIZER)
    (entry,) = cache_entries(cache)
    assert sorted(path.name for path in entry.iterdir()) == [GRAPH_FILE, WEIGHTS_FILE]
    stamp = (entry / GRAPH_FILE).stat().st_mtime_ns
    second = cached_factory(cache).create(graph_file, GraphKind.SYNTHESIZER)
    assert cache_entries(cache) == [entry] and (entry / GRAPH_FILE).stat().st_mtime_ns == stamp
    plain = SessionFactory(threads=1, use_cache=False).create(graph_file, GraphKind.SYNTHESIZER)
    for session in (first, second):
        for got, expected in zip(outputs(session), outputs(plain), strict=True):
            np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_changed_source_gets_a_new_entry_and_the_old_one_goes(
    graph_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cached_factory(cache).create(graph_file, GraphKind.SYNTHESIZER)
    (first,) = cache_entries(cache)
    graph_file.write_bytes(residual_model(opset=11))
    os.utime(graph_file, ns=(1, 1))
    cached_factory(cache).create(graph_file, GraphKind.SYNTHESIZER)
    (second,) = cache_entries(cache)
    assert second != first


def test_unwritable_cache_loads_the_published_graph_with_a_warning(
    graph_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder would go")
    with caplog.at_level(logging.WARNING):
        session = cached_factory(blocked).create(graph_file, GraphKind.SYNTHESIZER)
    assert "Graph cache unusable" in caplog.text and str(graph_file) in caplog.text
    assert outputs(session)[0].shape == (1, CHANNELS // 2, 12)


def test_damaged_cache_entry_is_dropped_and_the_source_used(
    graph_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "cache"
    cached_factory(cache).create(graph_file, GraphKind.SYNTHESIZER)
    (entry,) = cache_entries(cache)
    (entry / GRAPH_FILE).write_bytes(b"not a graph")
    with caplog.at_level(logging.WARNING):
        session = cached_factory(cache).create(graph_file, GraphKind.SYNTHESIZER)
    assert "Discarding cached graph" in caplog.text
    assert not entry.exists()
    assert outputs(session)[0].shape == (1, CHANNELS // 2, 12)


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff garbage", b"\x0a\x05short"])
def test_broken_graph_error_names_the_bundle_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(BundleError) as caught:
        cached_factory(tmp_path / "cache").create(path, GraphKind.SYNTHESIZER)
    assert caught.value.path == str(path)
    assert cache_entries(tmp_path / "cache") == []


def test_cache_can_be_switched_off_by_environment(
    monkeypatch: pytest.MonkeyPatch, graph_file: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", "0")
    monkeypatch.setenv("YOMIAGE_CACHE_DIR", str(tmp_path / "cache"))
    factory = SessionFactory(threads=1)
    assert not factory.use_cache
    factory.create(graph_file, GraphKind.SYNTHESIZER)
    assert not (tmp_path / "cache").exists()


def test_cache_dir_comes_from_environment(
    monkeypatch: pytest.MonkeyPatch, graph_file: Path, tmp_path: Path
) -> None:
    monkeypatch.delenv("YOMIAGE_GRAPH_CACHE", raising=False)
    monkeypatch.setenv("YOMIAGE_CACHE_DIR", str(tmp_path / "from-env"))
    SessionFactory(threads=1).create(graph_file, GraphKind.SYNTHESIZER)
    assert len(cache_entries(tmp_path / "from-env")) == 1


def test_engine_speaks_the_same_with_and_without_the_cache(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YOMIAGE_CACHE_DIR", str(tmp_path))
    audio = {}
    for cache in ("1", "0"):
        monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", cache)
        engine = Engine(tiny_bundle, device="cpu", threads=1)
        try:
            audio[cache] = engine.synthesize(THREE_SENTENCES, QUIET).audio
        finally:
            engine.close()
    # BERT, the synthesizer's two parts, durations
    assert len(list((tmp_path / "sessions").glob(f"*/{GRAPH_FILE}"))) >= 3
    assert audio["1"].shape == audio["0"].shape
    # int16 samples: float outputs within 1e-5 round to within one step.
    assert np.abs(audio["1"].astype(np.int32) - audio["0"]).max() <= 1


def start(bundle: Path, cache: Path, threads: int) -> None:
    """An engine as a start of Home Assistant makes it, with ``threads`` per run."""
    engine = Engine(bundle, device="cpu", threads=threads, graph_cache=cache)
    try:
        engine.load_all()
        assert engine.synthesize("はい。", QUIET).audio.size
    finally:
        engine.close()


def prepared_graphs(cache: Path) -> dict[str, int]:
    """Every prepared graph: its folder's name and its graph file's inode (a file written again
    is a new inode)."""
    return {
        path.parent.name: path.stat().st_ino
        for path in (cache / "sessions").glob(f"*/{GRAPH_FILE}")
    }


def test_other_threads_prepare_no_graph_again(
    tiny_bundle: Path,
    tmp_path: Path,
    children: Children,  # noqa: F811
) -> None:
    """No pass depends on the thread count: an engine started with one thread, then with two
    (the threads option, or a container's CPU quota changed), maps what the first prepared:
    BERT's graph (737 MB for the full model) is neither prepared nor written again."""
    cache = tmp_path / "cache"
    start(tiny_bundle, cache, threads=1)
    before = prepared_graphs(cache)
    assert any(name.startswith("bert_q8-") for name in before)
    children.commands.clear()
    start(tiny_bundle, cache, threads=2)
    assert children.commands == []
    assert prepared_graphs(cache) == before


def test_a_pass_on_threads_prepares_only_its_own_graphs_again(
    tiny_bundle: Path,
    tmp_path: Path,
    children: Children,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a pass that depends on the threads registered for the synthesizer's front alone, a
    start with other threads prepares each speaker's front again, and nothing else."""
    on_threads = Pass(
        "on threads",
        lambda model, threads: None,
        1,
        frozenset({GraphKind.FRONT}),
        (Dependency.THREADS,),
    )
    monkeypatch.setattr(registry, "PASSES", (*registry.PASSES, on_threads))
    cache = tmp_path / "cache"
    start(tiny_bundle, cache, threads=1)
    before = prepared_graphs(cache)
    children.commands.clear()
    start(tiny_bundle, cache, threads=2)
    assert children.sources() == {"front.onnx": 2}
    after = prepared_graphs(cache)
    bert = {name: inode for name, inode in before.items() if name.startswith("bert_q8-")}
    assert bert and bert.items() <= after.items()
    changed = set(before.items()) ^ set(after.items())
    assert changed and all(".front-" in name for name, _ in changed)
