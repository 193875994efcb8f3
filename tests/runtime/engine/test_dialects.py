"""Voices as other exporters write them (tests/fixtures/dialects-tiny, built by
``python -m tools.make_dialects --preset tiny`` from the same random voice as the tiny bundle's
tiny-a): each speaks what our own export speaks, streams with the same first piece and pauses
the same, and starts smoothly on a slow box; a graph no dialect fits fails when the bundle
loads, with one line."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from custom_components.yomiage.engine.errors import BundleError
from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.pieces import DecodeSpeed
from custom_components.yomiage.engine.synthesis.results import AudioChunk

from ..conftest import FIXTURES
from .common import QUIET, THREE_SENTENCES, slow_down
from .playback import listen

DIALECTS = FIXTURES / "dialects-tiny"
SPEAKER = "tiny-a"
TEXT = "今日は天気がいいので、公園まで散歩に行きましょう。" + THREE_SENTENCES


def _bundle_with(tiny_bundle: Path, root: Path, speaker_files: dict[str, Path]) -> Path:
    """A bundle of the tiny bundle's BERT and one speaker ``SPEAKER`` made of ``speaker_files``
    (file name in the speaker folder -> the file to copy there)."""
    shutil.copytree(tiny_bundle / "bert", root / "bert")
    shutil.copytree(tiny_bundle / "onnx" / "bert", root / "onnx" / "bert")
    folder = root / "onnx" / "speakers" / SPEAKER
    folder.mkdir(parents=True)
    for name, source in speaker_files.items():
        shutil.copyfile(source, folder / name)
    return root


def _ours(tiny_bundle: Path) -> dict[str, Path]:
    folder = tiny_bundle / "onnx" / "speakers" / SPEAKER
    return {name: folder / name for name in ("config.json", "style_vectors.npy")}


def hayakoe(tiny_bundle: Path, root: Path) -> Path:
    folder = DIALECTS / "hayakoe" / "onnx" / "speakers" / SPEAKER
    return _bundle_with(tiny_bundle, root, {p.name: p for p in folder.iterdir()})


def sbv2_onnx(tiny_bundle: Path, root: Path) -> Path:
    """Style-Bert-VITS2's ONNX export beside its config and style vectors: an AIVMX's graph is
    that export, and no duration graph comes with it."""
    files = {**_ours(tiny_bundle), "synthesizer.onnx": DIALECTS / f"{SPEAKER}.aivmx"}
    return _bundle_with(tiny_bundle, root, files)


def ours_without_duration_graph(tiny_bundle: Path, root: Path) -> Path:
    folder = tiny_bundle / "onnx" / "speakers" / SPEAKER
    files = {**_ours(tiny_bundle), "synthesizer.onnx": folder / "synthesizer.onnx"}
    return _bundle_with(tiny_bundle, root, files)


MAKERS: dict[str, Callable[[Path, Path], Path]] = {
    "hayakoe": hayakoe,
    "sbv2-onnx": sbv2_onnx,
    "ours-without-duration-graph": ours_without_duration_graph,
}


def _engine(bundle: Path) -> Iterator[Engine]:
    engine = Engine(bundle, device="cpu", threads=1)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def ours(tiny_bundle: Path) -> Iterator[Engine]:
    yield from _engine(tiny_bundle)


@pytest.fixture(scope="module", params=sorted(MAKERS))
def dialect(
    request: pytest.FixtureRequest, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    root = tmp_path_factory.mktemp(request.param)
    yield from _engine(MAKERS[request.param](tiny_bundle, root / "bundle"))


def _speak(engine: Engine, voice: str) -> list[AudioChunk]:
    return list(engine.stream(TEXT, QUIET.with_changes(voice=voice)))


def test_each_dialect_speaks_what_our_export_speaks(
    ours: Engine, dialect: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same samples within 1 LSB (noise off), the same pieces (the first one included), the
    same pauses (a voice without a duration graph derives them from its synthesizer)."""
    # The first piece is sized by each engine's measured decoding speed: fixed here.
    monkeypatch.setattr(DecodeSpeed, "first_piece", lambda self, frames, ctx, least, *_: least)
    voice = f"{SPEAKER}/Neutral"
    assert dialect.voices == {SPEAKER: ours.voices[SPEAKER]}
    expected, got = _speak(ours, voice), _speak(dialect, voice)
    assert [c.pcm.size for c in got] == [c.pcm.size for c in expected]
    assert [c.pause_before_s for c in got] == [c.pause_before_s for c in expected]
    for ours_chunk, their_chunk in zip(expected, got, strict=True):
        difference = np.abs(ours_chunk.pcm.astype(np.int32) - their_chunk.pcm.astype(np.int32))
        assert difference.max() <= 1
    assert len(expected) > 4  # the long first sentence came in pieces: the stream was split


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_each_dialect_starts_a_whole_message_smoothly_on_a_slow_box(
    maker: str, tiny_bundle: Path, tmp_path: Path
) -> None:
    """Smooth start needs the frames each sentence will take before any is synthesized: every
    dialect gives them (a duration graph, or the cut of its synthesizer), so on a box slower
    than real time each opens with just enough silence (as ours does, test_smooth_start.py)
    and then plays without a wait."""
    engine = Engine(MAKERS[maker](tiny_bundle, tmp_path / "bundle"), device="cpu", threads=1)
    options = QUIET.with_changes(voice=f"{SPEAKER}/Neutral")
    try:
        with pytest.MonkeyPatch.context() as patch:
            slow_down(engine, 1.3, patch)
            engine.load_all()  # as every entry point does: no session is made while timed
            for _ in engine.stream("おはようございます。七時です。", options):
                pass  # the engine learns the box from what it speaks
            smooth = listen(lambda: engine.stream(THREE_SENTENCES, options))
    finally:
        engine.close()
    assert not np.any(smooth.chunks[0].pcm)
    assert smooth.waits_s() == 0.0, f"lateness per chunk: {smooth.lateness_s()}"
    assert smooth.lead_s <= 1.2 * smooth.least_lead_s()


# -- graphs no dialect fits fail at load, with one line ----------------------------------------
def _edited(source: Path, target: Path, edit: Callable[[wire.Field], list[bytes] | None]) -> None:
    """``source`` with each input/output declaration replaced by what ``edit`` gives (None:
    kept as it is)."""
    model_fields, graph_field = wire.model_graph(memoryview(source.read_bytes()))
    graph = wire.Chunks()
    for item in wire.fields(wire.as_message(graph_field.value)):
        replaced = edit(item) if item.number in (wire.GRAPH_INPUT, wire.GRAPH_OUTPUT) else None
        for part in [item.raw] if replaced is None else replaced:
            graph.add(part)
    target.write_bytes(b"".join(wire.with_graph(model_fields, graph_field, graph).parts))


def _named(item: wire.Field) -> str:
    return wire.value_info_rank(item)[0]


def _drop_sid(item: wire.Field) -> list[bytes] | None:
    return [] if _named(item) == "sid" else None


def _scalar_as_matrix(item: wire.Field) -> list[bytes] | None:
    if _named(item) != "length_scale":
        return None
    return [wire.bytes_field(item.number, wire.value_info("length_scale", 1, [1, 1]))]


def _audio_renamed(item: wire.Field) -> list[bytes] | None:
    if _named(item) != "output":
        return None
    return [wire.bytes_field(item.number, wire.value_info("wav", 1, [1, 1, "samples"]))]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_drop_sid, r"synthesizer\.onnx: missing input 'sid'$"),
        (_scalar_as_matrix, r"input 'length_scale' has rank 2: a scalar is \[1\] or 0-d$"),
        (_audio_renamed, r"no audio output: expected one output named 'audio' or 'output'"),
    ],
)
def test_a_graph_no_dialect_fits_fails_at_load(
    tiny_bundle: Path,
    tmp_path: Path,
    edit: Callable[[wire.Field], list[bytes] | None],
    message: str,
) -> None:
    bundle = sbv2_onnx(tiny_bundle, tmp_path / "bundle")
    graph = bundle / "onnx" / "speakers" / SPEAKER / "synthesizer.onnx"
    _edited(DIALECTS / f"{SPEAKER}.aivmx", graph, edit)
    with pytest.raises(BundleError, match=message) as caught:
        Engine(bundle, device="cpu", threads=1)
    assert "\n" not in str(caught.value)


def test_an_unknown_extra_output_fails_at_load(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = hayakoe(tiny_bundle, tmp_path / "bundle")
    graph = bundle / "onnx" / "speakers" / SPEAKER / "synthesizer.onnx"

    def rename_durations(item: wire.Field) -> list[bytes] | None:
        if _named(item) != "durations":
            return None
        return [wire.bytes_field(item.number, wire.value_info("timings", 1, [1, "phones"]))]

    _edited(
        DIALECTS / "hayakoe" / "onnx" / "speakers" / SPEAKER / "synthesizer.onnx",
        graph,
        rename_durations,
    )
    with pytest.raises(BundleError, match=r"unknown output 'timings'"):
        Engine(bundle, device="cpu", threads=1)


# -- AivisHub's AIVMX files: a folder of them, the language model of a bundle beside it ---------
def aivmx_folder(tiny_bundle: Path, root: Path) -> Path:
    """``root/voices`` holds the AIVMX file alone; ``root/official`` is a bundle beside it."""
    shutil.copytree(tiny_bundle, root / "official")
    (root / "voices").mkdir()
    shutil.copyfile(DIALECTS / f"{SPEAKER}.aivmx", root / "voices" / f"{SPEAKER}.aivmx")
    return root / "voices"


def test_a_folder_of_aivmx_files_speaks_with_the_manifests_names(
    ours: Engine, tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(DecodeSpeed, "first_piece", lambda self, frames, ctx, least, *_: least)
    folder = aivmx_folder(tiny_bundle, tmp_path)
    engine = Engine(folder, device="cpu", threads=1)
    try:
        # AivisSpeech's names: the neutral style is ノーマル; the others keep theirs.
        assert engine.voices == {SPEAKER: ["ノーマル", "Happy", "Sad"]}
        assert engine.bundle.language_root == tmp_path / "official"
        about = engine.bundle.speakers[SPEAKER].aivm
        assert about is not None and about.license == "CC0-1.0"
        assert about.description.startswith("Random weights")
        for theirs, style in (("ノーマル", "Neutral"), ("Sad", "Sad")):
            expected = _speak(ours, f"{SPEAKER}/{style}")
            got = _speak(engine, f"{SPEAKER}/{theirs}")
            assert [c.pcm.size for c in got] == [c.pcm.size for c in expected]
            assert [c.pause_before_s for c in got] == [c.pause_before_s for c in expected]
            for a, b in zip(expected, got, strict=True):
                assert np.abs(a.pcm.astype(np.int32) - b.pcm.astype(np.int32)).max() <= 1
    finally:
        engine.close()


def test_aivmx_voices_without_a_language_model_anywhere_fail_at_load(tmp_path: Path) -> None:
    (tmp_path / "voices").mkdir()
    shutil.copyfile(DIALECTS / f"{SPEAKER}.aivmx", tmp_path / "voices" / f"{SPEAKER}.aivmx")
    with pytest.raises(BundleError, match="no language model"):
        Engine(tmp_path / "voices", device="cpu", threads=1)


def test_a_named_language_model_serves_aivmx_voices(tiny_bundle: Path, tmp_path: Path) -> None:
    (tmp_path / "voices").mkdir()
    shutil.copyfile(DIALECTS / f"{SPEAKER}.aivmx", tmp_path / "voices" / f"{SPEAKER}.aivmx")
    engine = Engine(tmp_path / "voices", device="cpu", threads=1, language_model=tiny_bundle)
    try:
        assert engine.synthesize("はい。", QUIET).audio.size > 0
    finally:
        engine.close()


def _with_metadata(source: Path, target: Path, key: str, value: str) -> None:
    """``source`` with its metadata entry ``key`` set to ``value``."""
    model_fields, _ = wire.model_graph(memoryview(source.read_bytes()))
    out = wire.Chunks()
    for item in model_fields:
        if item.number == wire.MODEL_METADATA_PROPS:
            entry = {
                p.number: wire.as_text(p.value) for p in wire.fields(wire.as_message(item.value))
            }
            if entry.get(wire.ENTRY_KEY) == key:
                body = wire.text_field(wire.ENTRY_KEY, key) + wire.text_field(
                    wire.ENTRY_VALUE, value
                )
                out.add(wire.bytes_field(wire.MODEL_METADATA_PROPS, body))
                continue
        out.add(item.raw)
    target.write_bytes(b"".join(out.parts))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("aivm_manifest", "{not json", r"tiny-a\.aivmx: aivm_manifest is not valid JSON"),
        ("aivm_manifest", '{"speakers": [{"name": "x"}]}', "aivm_manifest has no valid speakers"),
        ("aivm_style_vectors", "***", "aivm_style_vectors is not base64"),
        ("aivm_hyper_parameters", '{"data": {}}', "not a valid SBV2 config"),
    ],
)
def test_aivmx_metadata_that_does_not_parse_fails_at_load(
    tiny_bundle: Path, tmp_path: Path, key: str, value: str, message: str
) -> None:
    folder = aivmx_folder(tiny_bundle, tmp_path)
    _with_metadata(DIALECTS / f"{SPEAKER}.aivmx", folder / f"{SPEAKER}.aivmx", key, value)
    with pytest.raises(BundleError, match=message) as caught:
        Engine(folder, device="cpu", threads=1)
    assert "\n" not in str(caught.value)


def test_two_voice_files_with_one_speaker_name_give_two_voices(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    folder = aivmx_folder(tiny_bundle, tmp_path)
    shutil.copyfile(DIALECTS / f"{SPEAKER}.aivmx", folder / "another.aivmx")
    engine = Engine(folder, device="cpu", threads=1)
    try:
        assert list(engine.voices) == [SPEAKER, f"{SPEAKER} (2)"]
        spoken = engine.synthesize("はい。", QUIET.with_changes(voice=f"{SPEAKER} (2)/Sad"))
        assert spoken.audio.size > 0
    finally:
        engine.close()
