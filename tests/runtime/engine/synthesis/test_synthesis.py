"""Synthesis on the tiny bundle: audio shape, sentence split, pauses, streaming, determinism."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.audio.loudness import held_back
from custom_components.yomiage.engine.synthesis.bert import join_char_features, spread_over_phones
from custom_components.yomiage.engine.synthesis.decode_speed import DecodeSpeed
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.options import SynthesisOptions
from custom_components.yomiage.engine.synthesis.pauses import MIN_PAUSE_S
from custom_components.yomiage.engine.synthesis.pieces import FIRST_PIECE_FRAMES
from custom_components.yomiage.engine.synthesis.results import AudioChunk
from custom_components.yomiage.engine.synthesis.voice import Voice
from custom_components.yomiage.engine.text.frontend import Frontend

from ..common import QUIET, SAMPLE_RATE, THREE_SENTENCES


def test_voices_list_every_speaker_and_style(engine: Engine) -> None:
    assert len(engine.voices) == 2
    assert all(len(styles) >= 2 for styles in engine.voices.values())
    speaker, style = engine.default_voice.split("/")
    assert engine.voices[speaker][0] == style


def test_synthesize_returns_int16_mono_at_bundle_rate(engine: Engine) -> None:
    result = engine.synthesize("こんにちは。", QUIET)
    assert engine.sample_rate == SAMPLE_RATE
    assert result.audio.dtype == np.int16 and result.audio.ndim == 1
    assert result.audio_s > 0.1
    assert np.abs(result.audio).max() > 0


def test_three_sentences_give_three_reports_and_two_pauses(engine: Engine) -> None:
    result = engine.synthesize(THREE_SENTENCES, QUIET)
    assert len(result.sentences) == 3
    assert result.sentences[0].pause_before_s == 0.0
    assert all(s.pause_before_s >= MIN_PAUSE_S for s in result.sentences[1:])


def test_noise_off_is_deterministic(engine: Engine) -> None:
    first = engine.synthesize(THREE_SENTENCES, QUIET).audio
    second = engine.synthesize(THREE_SENTENCES, QUIET).audio
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize(
    "options",
    [QUIET, QUIET.with_changes(normalize=False), QUIET.with_changes(lead_silence=200, volume=-3)],
)
def test_synthesize_is_the_stream_collected_bit_for_bit(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, options: SynthesisOptions
) -> None:
    # Pieces are cut where this machine's decoding speed says; fixed here, so that both calls
    # cut alike (a different cut may round a sample to the neighbouring 16-bit value).
    monkeypatch.setattr(DecodeSpeed, "first_piece", lambda self, frames, ctx, least, *_: least)
    chunks = list(engine.stream(THREE_SENTENCES, options))
    whole = engine.synthesize(THREE_SENTENCES, options)
    assert sum(c.starts_sentence for c in chunks) == 3
    assert [c.text for c in chunks if c.starts_sentence] == [s.text for s in whole.sentences]
    np.testing.assert_array_equal(np.concatenate([c.pcm for c in chunks]), whole.audio)


def test_stream_sends_the_start_of_the_first_sentence_early(engine: Engine) -> None:
    engine.synthesize(THREE_SENTENCES, QUIET)  # the engine learns how fast it decodes
    chunks = list(engine.stream(THREE_SENTENCES, QUIET))
    first, second = chunks[0], chunks[1]
    # The tiny decoder is many times faster than real time: a small first piece is enough.
    sentence_samples = first.pcm.shape[0] + second.pcm.shape[0]
    # The loudness limiter holds the end of a piece back until it sees what follows.
    smallest = FIRST_PIECE_FRAMES * 512 - held_back(SAMPLE_RATE)
    assert smallest <= first.pcm.shape[0] < sentence_samples / 2
    assert first.starts_sentence and not second.starts_sentence
    assert not first.ends_sentence and second.ends_sentence
    assert second.text == first.text and second.pause_before_s == 0.0
    assert all(c.starts_sentence for c in chunks[2:])  # later sentences play after it anyway


def _speaks_after_the_first_sentences_bert(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, stream: Callable[[], Iterator[AudioChunk]]
) -> None:
    """The first chunk comes after a BERT batch of its sentence alone; the other sentences
    follow from one batch."""
    batches: list[list[str]] = []
    featurize = engine._features.char_features

    def recorded(texts: list[str]) -> list[object]:
        batches.append(list(texts))
        return list(featurize(texts))

    monkeypatch.setattr(engine._features, "char_features", recorded)
    chunks = stream()
    first = next(chunks)
    assert batches == [[first.text]]
    rest = list(chunks)
    assert len(batches) == 2 and len(batches[1]) == 2  # the rest in one batch
    assert [c.text for c in rest if c.starts_sentence] == batches[1]


def test_first_audio_needs_bert_for_the_first_sentence_only(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _speaks_after_the_first_sentences_bert(
        engine, monkeypatch, lambda: engine.stream(THREE_SENTENCES, QUIET)
    )


def test_a_whole_message_streamed_as_it_arrives_also_speaks_after_one_sentence_of_bert(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Home Assistant hands an announcement over as one piece (stream_sentences): its first
    audio must not wait for the other sentences' BERT either."""
    _speaks_after_the_first_sentences_bert(
        engine, monkeypatch, lambda: engine.stream_sentences(iter([THREE_SENTENCES]), QUIET)
    )


def test_silence_between_sentences_is_the_duration_predictor_pause(engine: Engine) -> None:
    chunks = [c for c in engine.stream(THREE_SENTENCES, QUIET) if c.starts_sentence]
    expected = _pauses_from_duration_graph(engine, [c.text for c in chunks])
    for chunk, pause in zip(chunks[1:], expected, strict=True):
        assert chunk.pause_before_s == pytest.approx(max(MIN_PAUSE_S, pause), rel=1e-6)
        samples = round(chunk.pause_before_s * SAMPLE_RATE)
        assert not chunk.pcm[:samples].any(), "the pause must be digital silence"
        assert chunk.pause_before_s >= MIN_PAUSE_S


def test_pause_scale_lengthens_pauses(engine: Engine) -> None:
    normal = engine.synthesize(THREE_SENTENCES, QUIET)
    longer = engine.synthesize(THREE_SENTENCES, QUIET.with_changes(pause_scale=3.0))
    for a, b in zip(normal.sentences[1:], longer.sentences[1:], strict=True):
        assert b.pause_before_s >= a.pause_before_s
    assert sum(s.pause_before_s for s in longer.sentences) > sum(
        s.pause_before_s for s in normal.sentences
    )


def test_faster_speed_gives_shorter_audio(engine: Engine) -> None:
    normal = engine.synthesize("明日の朝は七時に起きます。", QUIET)
    fast = engine.synthesize("明日の朝は七時に起きます。", QUIET.with_changes(speed=2.0))
    assert fast.audio_s < normal.audio_s * 0.75


def test_styles_change_the_audio(engine: Engine) -> None:
    speaker, styles = next(iter(engine.voices.items()))
    a = engine.synthesize("こんにちは。", QUIET.with_changes(voice=f"{speaker}/{styles[0]}")).audio
    b = engine.synthesize("こんにちは。", QUIET.with_changes(voice=f"{speaker}/{styles[1]}")).audio
    assert a.shape != b.shape or not np.array_equal(a, b)


def test_streamed_sentences_arrive_one_by_one_with_pauses(engine: Engine) -> None:
    pieces = ["今日はいい天気ですね。", "散歩に行きましょう！"]
    consumed: list[str] = []

    def arriving() -> object:
        for piece in pieces:
            consumed.append(piece)
            yield piece

    stream = engine.stream_sentences(arriving(), QUIET)  # type: ignore[arg-type]
    first = next(stream)
    assert consumed == pieces[:1], "the first sentence is spoken before the second arrives"
    starts = [c for c in [first, *stream] if c.starts_sentence]
    assert [c.text for c in starts] == [
        "今日はいい天気ですね.",
        "散歩に行きましょう!",
    ]  # normalised
    assert starts[0].pause_before_s == 0.0 and starts[1].pause_before_s >= MIN_PAUSE_S


def _pauses_from_duration_graph(engine: Engine, sentences: list[str]) -> list[float]:
    """An independent reading of the pause: run duration_predictor.onnx directly over the whole
    text, take the frames of each sentence-final punctuation phone and the blanks around it."""
    frontend = Frontend()
    whole = frontend.analyse("".join(sentences))
    voice_name, style = engine.default_voice.split("/")
    voice_dir = engine.bundle.speakers[voice_name].synthesizer.parent
    session = ort.InferenceSession(str(voice_dir / "duration_predictor.onnx"))
    # The engine reuses the sentences' BERT rows for the whole text (no second BERT run): so
    # here, batched as the engine batches them (the first sentence alone, then the rest).
    batches = [sentences[:1], sentences[1:]]
    bert = join_char_features([f for batch in batches for f in engine._bert.char_features(batch)])
    style_vec = engine._voices[voice_name].style_vector(style, 1.0)
    durations = session.run(
        None,
        {
            "x": whole.phones[None],
            "x_lengths": np.array([whole.phones.size]),
            "sid": np.array([0]),
            "tone": whole.tones[None],
            "language": whole.languages[None],
            "bert": spread_over_phones(bert, whole.word2ph)[None],
            "style_vec": style_vec[None],
            "length_scale": np.array([1.0], np.float32),
            "noise_scale_w": np.array([0.0], np.float32),
            "sdp_ratio": np.array([0.2], np.float32),
        },
    )[0][0]
    phone_ends = np.cumsum(whole.word2ph)  # phone index after each token ([CLS], chars..., [SEP])
    pauses = []
    chars = 0
    for sentence in sentences[:-1]:
        chars += len(sentence)
        punct_phone = phone_ends[chars] - 2  # the char's phone, then its blank
        frames = durations[punct_phone - 1 : punct_phone + 2].sum()
        pauses.append(float(frames) * 512 / SAMPLE_RATE)
    return pauses


LONGER_FIRST_SENTENCE = "今日は天気がいいので、公園まで散歩に行きましょう。はい。"


def test_load_all_times_decoding_so_the_first_stream_is_sized_for_this_machine(
    tiny_bundle: Path,
) -> None:
    unmeasured = Engine(tiny_bundle, device="cpu", threads=1)
    measured = Engine(tiny_bundle, device="cpu", threads=1)
    try:
        measured.load_all()
        guessed = next(unmeasured.stream(LONGER_FIRST_SENTENCE, QUIET))
        sized = next(measured.stream(LONGER_FIRST_SENTENCE, QUIET))
    finally:
        unmeasured.close()
        measured.close()
    # Unmeasured, decoding is assumed as fast as playing: half the sentence first. The tiny
    # decoder is many times faster than real time: the smallest first piece is enough.
    assert sized.pcm.shape == (FIRST_PIECE_FRAMES * 512 - held_back(SAMPLE_RATE),)
    assert guessed.pcm.shape[0] > sized.pcm.shape[0]


def test_load_all_survives_a_voice_that_cannot_run(
    tiny_bundle: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engine = Engine(tiny_bundle, device="cpu", threads=1)

    def broken(*args: object) -> None:
        raise RuntimeError("the graph failed to run")

    monkeypatch.setattr(Voice, "front", broken)
    try:
        engine.load_all()  # the files load: the bundle is accepted
    finally:
        engine.close()
    assert "could not time the decoder at load" in caplog.text


@pytest.mark.parametrize("first_frames", [FIRST_PIECE_FRAMES, 60, 90])
def test_the_samples_do_not_depend_on_where_the_first_piece_ends(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, first_frames: int
) -> None:
    """Loudness is decided from a sentence's first 0.56 s (FIRST_PIECE_FRAMES): a first piece
    cut anywhere from that length on gives the same samples, within rounding. The piece sizer
    never cuts shorter, however slow the box (a shorter one changed them by thousands of LSB)."""
    text = "リビングの照明をつけました！ほかに何かありますか？"
    reference = engine.synthesize(text, QUIET).audio.astype(np.int32)
    monkeypatch.setattr(DecodeSpeed, "first_piece", lambda self, *_: first_frames)
    cut = engine.synthesize(text, QUIET).audio.astype(np.int32)
    assert np.abs(cut - reference).max() <= 1
    slow = DecodeSpeed(512 / SAMPLE_RATE)
    for _ in range(20):
        slow.record(100, 100 * 512 / SAMPLE_RATE * 10)  # a tenth of real time
    assert slow.first_piece(300, 16, FIRST_PIECE_FRAMES, None) >= FIRST_PIECE_FRAMES
