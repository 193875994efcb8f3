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
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.sessions import SessionFactory
from custom_components.yomiage.engine.synthesis.decode_speed import DecodeSpeed
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.results import AudioChunk
from custom_components.yomiage.engine.synthesis.smooth_start import LEAD_MARGIN

from ..voice_files import (
    AIVMX,
    BROKEN,
    DIALECTS,
    DUO_AIVMX,
    DUO_SPEAKERS,
    SBV2_SPEAKER,
    SPEAKER,
    SPEAKER_DIR,
    aivmx_folder,
    bundle_with,
    hayakoe_bundle,
    redeclared,
    sbv2_bundle,
)
from .box import SlowBox
from .common import QUIET, THREE_SENTENCES
from .onnx.test_decoder_graph import sentence
from .playback import listen

TEXT = "今日は天気がいいので、公園まで散歩に行きましょう。" + THREE_SENTENCES


def ours_without_duration_graph(tiny_bundle: Path, root: Path) -> Path:
    folder = tiny_bundle / SPEAKER_DIR
    names = ("config.json", "style_vectors.npy", "synthesizer.onnx")
    return bundle_with(tiny_bundle, root, {name: folder / name for name in names})


MAKERS: dict[str, Callable[[Path, Path], Path]] = {
    "hayakoe": hayakoe_bundle,
    "sbv2-converter": sbv2_bundle,
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
    """Streamed without a smooth start: whether a box needs one is learnt from the time its
    sentences took, and a loaded box would give the two engines two piece plans."""
    return list(engine.stream(TEXT, QUIET.with_changes(voice=voice, smooth_start=False)))


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
    box = SlowBox(1.3)
    engine = box.engine(MAKERS[maker](tiny_bundle, tmp_path / "bundle"))
    options = QUIET.with_changes(voice=f"{SPEAKER}/Neutral")
    try:
        engine.load_all()  # as every entry point does
        for _ in engine.stream("おはようございます。七時です。", options):
            pass  # the engine learns the box from what it speaks
        smooth = listen(lambda: engine.stream(THREE_SENTENCES, options), box.clock)
    finally:
        engine.close()
    assert not np.any(smooth.chunks[0].pcm)
    assert smooth.waits_s() == 0.0, f"lateness per chunk: {smooth.lateness_s()}"
    least = smooth.least_lead_s()
    assert least <= smooth.lead_s <= LEAD_MARGIN * 1.03 * least


# -- what the converter adds is left unread; what cannot speak fails at load, with one line ------
def test_the_converters_extra_outputs_are_cut_away_from_every_run(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    """Style-Bert-VITS2's graph gives six outputs beside the audio (attention path, masks,
    latents): the engine reads none of them, and neither the front nor the decoder nor the
    duration pass computes one for nobody (their graphs end at what is read)."""
    outputs = list(wire.read_interface(SBV2_SPEAKER / "synthesizer.onnx").outputs)
    assert outputs[0] == "output" and len(outputs) == 7
    extra = set(outputs[1:])
    engine = Engine(sbv2_bundle(tiny_bundle, tmp_path / "bundle"), device="cpu", threads=1)
    try:
        engine.load_all()
        graphs = engine._voices[SPEAKER].graphs
        split = graphs._split_sessions()
        assert split is not None  # cut in front of the decoder
        assert [o.name for o in split.front.get_outputs()] == list(split.boundary)
        assert [o.name for o in split.decoder.get_outputs()] == ["output"]
        durations = graphs._duration_pass()
        assert durations is not None  # cut at its durations
        assert [o.name for o in durations[0].get_outputs()] == [durations[1].output]
        read = {o.name for o in (*split.front.get_outputs(), *durations[0].get_outputs())}
        assert not read & extra
    finally:
        engine.close()


def test_a_synthesizers_own_durations_output_gives_the_pauses(
    ours: Engine, tiny_bundle: Path, tmp_path: Path
) -> None:
    """hayakoe's synthesizer without its duration graph: the pause pass is cut at the
    ``durations`` the graph gives, and pauses as ours."""
    folder = DIALECTS / "hayakoe" / SPEAKER_DIR
    files = {p.name: p for p in folder.iterdir() if p.name != "duration_predictor.onnx"}
    engine = Engine(bundle_with(tiny_bundle, tmp_path / "bundle", files), device="cpu", threads=1)
    try:
        found = engine._voices[SPEAKER].graphs._duration_pass()
        assert found is not None and found[1].output == "durations"
        voice = f"{SPEAKER}/Neutral"
        got = [c.pause_before_s for c in _speak(engine, voice)]
        assert got == [c.pause_before_s for c in _speak(ours, voice)]
    finally:
        engine.close()


@pytest.mark.parametrize("defect", sorted(BROKEN))
def test_a_voice_that_cannot_speak_with_its_bundle_fails_at_load(
    tiny_bundle: Path, tmp_path: Path, defect: str
) -> None:
    bundle = BROKEN[defect].bundle(tiny_bundle, tmp_path / "bundle")
    with pytest.raises(BundleError, match=BROKEN[defect].message) as caught:
        Engine(bundle, device="cpu", threads=1)
    assert "\n" not in str(caught.value)


def _scalar_as_matrix(name: str) -> bytes | bool:
    if name != "length_scale":
        return True
    return wire.value_info("length_scale", wire.TENSOR_FLOAT, [1, 1])


def test_a_scalar_of_another_rank_fails_at_load(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = sbv2_bundle(tiny_bundle, tmp_path / "bundle")
    graph = bundle / SPEAKER_DIR / "synthesizer.onnx"
    redeclared(SBV2_SPEAKER / "synthesizer.onnx", graph, _scalar_as_matrix)
    with pytest.raises(BundleError, match=r"'length_scale' has rank 2: a scalar is \[1\] or 0-d$"):
        Engine(bundle, device="cpu", threads=1)


# -- AivisHub's AIVMX files: a folder of them, the language model of a bundle beside it ---------
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
    shutil.copyfile(AIVMX, tmp_path / "voices" / AIVMX.name)
    with pytest.raises(BundleError, match="no language model"):
        Engine(tmp_path / "voices", device="cpu", threads=1)


def test_a_named_language_model_serves_aivmx_voices(tiny_bundle: Path, tmp_path: Path) -> None:
    (tmp_path / "voices").mkdir()
    shutil.copyfile(AIVMX, tmp_path / "voices" / AIVMX.name)
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
    _with_metadata(AIVMX, folder / AIVMX.name, key, value)
    with pytest.raises(BundleError, match=message) as caught:
        Engine(folder, device="cpu", threads=1)
    assert "\n" not in str(caught.value)


def test_two_voice_files_with_one_speaker_name_give_two_voices(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    folder = aivmx_folder(tiny_bundle, tmp_path)
    shutil.copyfile(AIVMX, folder / "another.aivmx")
    engine = Engine(folder, device="cpu", threads=1)
    try:
        assert list(engine.voices) == [SPEAKER, f"{SPEAKER} (2)"]
        spoken = engine.synthesize("はい。", QUIET.with_changes(voice=f"{SPEAKER} (2)/Sad"))
        assert spoken.audio.size > 0
    finally:
        engine.close()


def test_a_multi_speaker_aivmx_is_one_set_of_sessions_chosen_by_sid(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every speaker of the file is a voice with its styles as AivisSpeech lists them; all run
    on the file's one set of sessions, each fed its manifest id as ``sid``."""
    prepared: list[Path] = []
    create_split = SessionFactory.create_split

    def counted(self: SessionFactory, path: Path, audio: str) -> object:
        prepared.append(path)
        return create_split(self, path, audio)

    monkeypatch.setattr(SessionFactory, "create_split", counted)
    engine = Engine(aivmx_folder(tiny_bundle, tmp_path, DUO_AIVMX), device="cpu", threads=1)
    try:
        assert engine.voices == {name: ["ノーマル", "Happy", "Sad"] for name in DUO_SPEAKERS}
        engine.load_all()
        assert len(prepared) == 1  # one file, one set of sessions
        published = SessionFactory(threads=1, use_cache=False).create(
            DUO_AIVMX, GraphKind.SYNTHESIZER
        )
        spoken: dict[int, np.ndarray] = {}
        for sid, name in enumerate(DUO_SPEAKERS):
            voice = engine._voices[name]
            said = sentence(voice, "今日はいい天気ですね。")
            spoken[sid] = voice.synthesize(said)
            feeds = voice.graphs._contract.feeds({**voice._values(said), "sid": np.array([sid])})
            (expected,) = published.run(["output"], feeds)
            np.testing.assert_allclose(spoken[sid], expected.reshape(-1), atol=1e-4, rtol=0)
        assert spoken[0].shape != spoken[1].shape or not np.allclose(spoken[0], spoken[1])
    finally:
        engine.close()
