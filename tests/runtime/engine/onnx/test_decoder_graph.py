"""The synthesizer cut in front of its decoder (engine/onnx/decoder_graph.py), its cached sessions
(onnx/sessions.py, SessionFactory.create_split) and chunked decoding (synthesis/pieces.py,
decode_in_pieces)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.bundle import Bundle
from custom_components.yomiage.engine.onnx import wire
from custom_components.yomiage.engine.onnx.decoder_graph import read_split, split_decoder
from custom_components.yomiage.engine.onnx.passes.registry import GraphKind
from custom_components.yomiage.engine.onnx.sessions import SessionFactory
from custom_components.yomiage.engine.synthesis import pieces as pieces_module
from custom_components.yomiage.engine.synthesis.decode_speed import (
    FIRST_AUDIO_BUDGET_S,
    DecodeSpeed,
)
from custom_components.yomiage.engine.synthesis.graphs import VoiceGraphs
from custom_components.yomiage.engine.synthesis.pieces import decode_in_pieces, decode_spans
from custom_components.yomiage.engine.synthesis.voice import ModelInputs, SentenceInput, Voice
from custom_components.yomiage.engine.text.frontend import Frontend
from custom_components.yomiage.engine.text.normalize import normalize

from .onnx_build import ModelBuilder, conv_attributes
from .sample_graphs import TOLERANCE, synthesizer_feeds

QUIET_INPUTS = ModelInputs(length_scale=1.0, sdp_ratio=0.2, noise_scale=0.0, noise_scale_w=0.0)


def session(model: bytes | Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def encoded(chunks: object) -> bytes:
    return b"".join(bytes(part) for part in chunks.parts)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def synthesizer(tiny_bundle: Path) -> Path:
    return sorted((tiny_bundle / "onnx" / "speakers").iterdir())[0] / "synthesizer.onnx"


def test_tiny_synthesizer_splits_before_its_decoder(synthesizer: Path) -> None:
    split = read_split(synthesizer, "audio")
    assert split is not None
    assert len(split.boundary) == 2
    assert split.shape.hop == 512  # the product of the upsampling strides
    assert 1 <= split.shape.context <= 64


def test_front_then_decoder_gives_the_whole_graphs_audio(synthesizer: Path) -> None:
    split = read_split(synthesizer, "audio")
    assert split is not None
    whole, front, decoder = (
        session(synthesizer),
        session(encoded(split.front)),
        session(encoded(split.decoder)),
    )
    for phones in (3, 41):
        feeds = synthesizer_feeds(whole, phones)
        (expected,) = whole.run(None, feeds)
        boundary = front.run(list(split.boundary), feeds)
        (got,) = decoder.run(None, dict(zip(split.boundary, boundary, strict=True)))
        np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_receptive_field_covers_every_sample_a_frame_changes(synthesizer: Path) -> None:
    split = read_split(synthesizer, "audio")
    assert split is not None
    front, decoder = session(encoded(split.front)), session(encoded(split.decoder))
    feeds = synthesizer_feeds(session(synthesizer), 60)
    latent, speaker = front.run(list(split.boundary), feeds)
    frames = latent.shape[-1]
    frame = frames // 2
    latent_name, speaker_name = split.boundary
    nudged = latent.copy()
    nudged[..., frame] += 1.0
    (before,) = decoder.run(None, {latent_name: latent, speaker_name: speaker})
    (after,) = decoder.run(None, {latent_name: nudged, speaker_name: speaker})
    changed = np.flatnonzero(np.abs(after - before).reshape(-1) > 0)
    hop, context = split.shape.hop, split.shape.context
    assert changed.size > 0
    assert changed.min() >= (frame - context) * hop
    assert changed.max() < (frame + context + 1) * hop


def test_graph_without_a_decoder_scope_does_not_split() -> None:
    b = ModelBuilder()
    x = b.input("x", [1, 16, "T"])
    weight = np.ones((16, 16, 3), dtype=np.float32)
    b.node("Conv", [x, b.weight("w", weight)], "y", *conv_attributes(3))
    b.output("y", [1, 16, "T"])
    assert split_decoder(memoryview(b.encode()), "y") is None


# -- sessions and pieces ---------------------------------------------------------------------
@pytest.fixture
def voice(tiny_bundle: Path, tmp_path: Path) -> Voice:
    files = next(iter(Bundle.open(tiny_bundle).speakers.values()))
    factory = SessionFactory(threads=1, cache_dir=tmp_path, use_cache=True)
    frame_s = files.config.hop_length / files.config.sample_rate
    graphs = VoiceGraphs(files.synthesizer, files.duration_predictor, factory, DecodeSpeed(frame_s))
    return Voice(files, graphs, _bert_width(files.synthesizer), "bert_q8.onnx")


def _bert_width(synthesizer: Path) -> int:
    shape = wire.read_interface(synthesizer).inputs["bert"]
    assert shape is not None and shape[1] is not None
    return shape[1]


def sentence(voice: Voice, text: str) -> SentenceInput:
    """Phones of ``text``, random BERT features of the bundle's width, the first style."""
    frontend = Frontend()
    sequence = frontend.analyse(normalize(text))
    hidden = _bert_width(voice.files.synthesizer)
    rng = np.random.default_rng(len(text))
    bert = rng.standard_normal((hidden, sequence.phones.shape[0])).astype(np.float32)
    return SentenceInput(sequence, bert, voice.style_vector(voice.styles[0], 1.0), QUIET_INPUTS)


def test_split_sessions_are_cached_with_their_description(
    tiny_bundle: Path, tmp_path: Path, synthesizer: Path
) -> None:
    factory = SessionFactory(threads=1, cache_dir=tmp_path, use_cache=True)
    first = factory.create_split(synthesizer, "audio")
    assert first is not None
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "sessions").iterdir())
    assert names == ["synthesizer.decoder", "synthesizer.front", "synthesizer.split"]
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "sessions").iterdir()}
    second = factory.create_split(synthesizer, "audio")
    assert second is not None and second.shape == first.shape
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "sessions").iterdir()} == stamps


def test_no_split_without_the_cache_or_for_a_graph_without_decoder(
    tiny_bundle: Path, tmp_path: Path, synthesizer: Path
) -> None:
    assert SessionFactory(threads=1, use_cache=False).create_split(synthesizer, "audio") is None
    durations = synthesizer.parent / "duration_predictor.onnx"
    factory = SessionFactory(threads=1, cache_dir=tmp_path, use_cache=True)
    assert factory.create_split(durations, "durations") is None
    assert factory.create_split(durations, "durations") is None  # the negative answer is cached too
    assert len(list((tmp_path / "sessions").glob("duration_predictor.split-*.json"))) == 1


def test_pieces_add_up_to_the_whole_sentence(voice: Voice, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DecodeSpeed, "first_piece", lambda self, frames, ctx, least, *_: least)
    spoken = sentence(voice, "今日は天気がいいので、公園まで散歩に行きましょう。")
    whole = voice.synthesize(spoken)
    pieces = list(decode_in_pieces(voice, spoken, first_frames=7))
    assert [piece.last for piece in pieces] == [False, True]
    assert pieces[0].samples.shape == (7 * 512,)
    joined = np.concatenate([piece.samples for piece in pieces])
    np.testing.assert_allclose(joined, whole, atol=TOLERANCE, rtol=0)
    # The published, unsplit graph agrees as well (same threads: durations are rounded up, so
    # a different summation order could move a phone by a frame).
    feeds = voice.graphs._contract.feeds(voice._values(spoken))
    published_session = SessionFactory(threads=1, use_cache=False).create(
        voice.files.synthesizer, GraphKind.SYNTHESIZER
    )
    (published,) = published_session.run(None, feeds)
    np.testing.assert_allclose(whole, published.reshape(-1), atol=TOLERANCE, rtol=0)


def test_short_sentence_comes_in_one_piece(voice: Voice) -> None:
    pieces = decode_in_pieces(voice, sentence(voice, "はい。"), first_frames=400)
    assert [piece.last for piece in pieces] == [True]


def test_long_sentence_is_decoded_in_bounded_pieces(
    voice: Voice, monkeypatch: pytest.MonkeyPatch
) -> None:
    spoken = sentence(voice, "今日は天気がいいので、公園まで散歩に行きましょう。")
    whole = voice.synthesize(spoken)
    frames = whole.shape[0] // 512
    limit = frames // 3 + 1
    monkeypatch.setattr(pieces_module, "MAX_DECODE_FRAMES", limit)
    pieces = list(decode_in_pieces(voice, spoken, first_frames=None))
    assert [piece.last for piece in pieces] == [False, False, True]
    assert max(piece.samples.shape[0] for piece in pieces) <= limit * 512
    joined = np.concatenate([piece.samples for piece in pieces])
    np.testing.assert_allclose(joined, whole, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize(
    ("frames", "first", "limit", "expected"),
    [
        (10, 48, 768, [(0, 10)]),  # shorter than the first piece and its overlap: one run
        (64, 48, 768, [(0, 64)]),
        (65, 48, 768, [(0, 48), (48, 65)]),
        (768, None, 768, [(0, 768)]),
        (769, None, 768, [(0, 385), (385, 769)]),
        (2000, 48, 768, [(0, 48), (48, 699), (699, 1350), (1350, 2000)]),
    ],
)
def test_decode_spans_cover_every_frame_once(
    frames: int, first: int | None, limit: int, expected: list[tuple[int, int]]
) -> None:
    spans = decode_spans(frames, first, 16, limit)
    assert spans == expected
    assert [low for low, _ in spans[1:]] == [high for _, high in spans[:-1]]


FRAME_S = 512 / 44100


def test_first_piece_is_half_the_sentence_before_any_decoding_was_timed() -> None:
    speed = DecodeSpeed(FRAME_S)
    assert speed.first_piece(200, 16, 48, None) == 108  # (200 + 16) / 2: decoding = playing


def test_first_piece_covers_the_time_the_rest_takes_to_decode() -> None:
    speed = DecodeSpeed(FRAME_S)
    speed.record(100, 100 * FRAME_S / 2)  # twice as fast as real time
    frames, context = 300, 16
    first = speed.first_piece(frames, context, 48, None)
    cost = FRAME_S / 2 * 1.3  # with the headroom for a shared machine
    assert (frames - first + context) * cost <= first * FRAME_S
    assert (frames - first + 1 + context) * cost > (first - 1) * FRAME_S  # and no larger


def test_decoding_timed_at_nothing_gives_the_least_first_piece() -> None:
    """A clock too coarse to see a run (or a box that decodes for free) means no wait at all."""
    speed = DecodeSpeed(FRAME_S)
    speed.record(100, 0.0)
    assert speed.first_piece(300, 16, 48, None) == 48


def test_while_playing_the_lead_and_the_pause_buy_decoding_time() -> None:
    speed = DecodeSpeed(FRAME_S)
    speed.record(100, 100 * FRAME_S / 2)
    cost = FRAME_S / 2 * 1.3
    frames, context = 300, 16
    assert speed.first_piece(frames, context, 48, lead_s=frames * cost) == frames  # no split
    small_lead = speed.first_piece(frames, context, 48, lead_s=0.5, pause_s=0.2)
    first = small_lead
    assert (frames + 2 * context) * cost <= 0.5 + 0.2 + first * FRAME_S
    assert (frames + 2 * context) * cost > 0.5 + 0.2 + (first - 1) * FRAME_S
    assert speed.first_piece(frames, context, 48, lead_s=2.0) < small_lead


def test_first_piece_is_never_below_the_minimum_and_follows_the_machine() -> None:
    speed = DecodeSpeed(FRAME_S)
    speed.record(100, 0.001)  # a fast machine
    assert speed.first_piece(300, 16, 48, None) == 48
    for _ in range(20):
        speed.record(100, 100 * FRAME_S * 2)  # the machine became busy: slower than real time
    # Slower than real time: the first audio comes within the budget; minimum pieces at worst.
    cost = 100 * FRAME_S * 2 / 100 * 1.3
    budget_frames = FIRST_AUDIO_BUDGET_S / cost - 16
    assert speed.first_piece(300, 16, 48, None) == max(48, math.ceil(budget_frames))
    near_real_time = DecodeSpeed(FRAME_S)
    near_real_time.record(100, 100 * FRAME_S * 0.9)  # the unbroken piece fits in the budget
    cost = FRAME_S * 0.9 * 1.3
    assert near_real_time.first_piece(60, 16, 8, None) == math.ceil(76 * cost / (cost + FRAME_S))
    assert speed.first_piece(300, 16, 48, lead_s=0.0) == 300  # nothing can avoid the wait


def test_a_box_that_just_slowed_down_is_judged_by_its_last_sentence() -> None:
    speed = DecodeSpeed(FRAME_S)
    assert speed.sentence_s_per_frame_now() is None
    for _ in range(5):
        speed.record_sentence(100, 100 * FRAME_S * 1.3)
    speed.record_sentence(100, 100 * FRAME_S * 1.6)  # the load grew
    learnt = speed.sentence_s_per_frame()
    assert learnt is not None and learnt < FRAME_S * 1.6
    assert speed.sentence_s_per_frame_now() == pytest.approx(FRAME_S * 1.6)
    speed.record_sentence(100, 100 * FRAME_S * 1.0)  # and shrank: the average still holds
    assert speed.sentence_s_per_frame_now() == speed.sentence_s_per_frame()
