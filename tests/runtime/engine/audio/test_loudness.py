"""Even loudness: -16 LUFS with the true peak under -1 dBTP by default, as ffmpeg measures it,
sentence by sentence without jumps, the same whether streamed or whole."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest

from custom_components.yomiage.engine.audio import loudness
from custom_components.yomiage.engine.errors import InvalidOptionError
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.options import SynthesisOptions
from custom_components.yomiage.engine.synthesis.pieces import FIRST_PIECE_FRAMES
from custom_components.yomiage.engine.synthesis.voice import Voice

from ...ebur128 import measure
from ..common import QUIET, SAMPLE_RATE

BASIS = FIRST_PIECE_FRAMES * 512  # the engine decides a gain on a first piece's samples
FIVE_SENTENCES = (
    "おはようございます。今日の東京は晴れ、最高気温は二十五度の予想です。"
    "午後から風が強くなるので、洗濯物には気をつけてください。それでは、いってらっしゃい！"
    "本当に大丈夫ですか？"
)


def _sentences(engine: Engine, options: SynthesisOptions) -> list[np.ndarray]:
    """Each sentence's audio (without the pause before it) as a stream delivers it."""
    sentences: list[np.ndarray] = []
    for chunk in engine.stream(FIVE_SENTENCES, options):
        pcm = chunk.pcm[round(chunk.pause_before_s * SAMPLE_RATE) :]
        if chunk.starts_sentence:
            sentences.append(pcm)
        else:
            sentences[-1] = np.concatenate((sentences[-1], pcm))
    return sentences


def test_the_default_is_minus_16_lufs_under_minus_1_dbtp(engine: Engine) -> None:
    raw = measure(
        engine.synthesize(FIVE_SENTENCES, QUIET.with_changes(normalize=False)).audio, SAMPLE_RATE
    )
    levelled = measure(engine.synthesize(FIVE_SENTENCES, QUIET).audio, SAMPLE_RATE)
    assert raw.true_peak_dbtp > -1.0  # the tiny voice's raw output goes over the ceiling
    assert abs(levelled.integrated_lufs + 16) <= 1.5
    assert levelled.true_peak_dbtp <= -1.0


def test_consecutive_sentences_stay_within_1_5_lu(engine: Engine) -> None:
    sentences = [measure(pcm, SAMPLE_RATE).integrated_lufs for pcm in _sentences(engine, QUIET)]
    assert len(sentences) == 5
    assert max(abs(a - b) for a, b in itertools.pairwise(sentences)) <= 1.5


def test_volume_is_decibels_under_the_target(engine: Engine) -> None:
    target = measure(engine.synthesize(FIVE_SENTENCES, QUIET).audio, SAMPLE_RATE)
    quieter = measure(
        engine.synthesize(FIVE_SENTENCES, QUIET.with_changes(volume=-6)).audio, SAMPLE_RATE
    )
    assert abs(target.integrated_lufs - quieter.integrated_lufs - 6) <= 1.0


def test_normalize_off_is_the_raw_output_with_the_volume_as_gain(engine: Engine) -> None:
    raw = engine.synthesize(FIVE_SENTENCES, QUIET.with_changes(normalize=False)).audio
    halved = engine.synthesize(FIVE_SENTENCES, QUIET.with_changes(normalize=False, volume=-6.0206))
    assert np.abs(np.round(raw / 2) - halved.audio).max() <= 1


@pytest.fixture
def quiet_voice(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every voice 30 dB under the tiny bundle's own level, as real voices come out of SBV2."""
    decode = Voice.decode

    def quieter(self: Voice, *args: object, **kwargs: object) -> np.ndarray:
        return decode(self, *args, **kwargs) * np.float32(10 ** (-30 / 20))  # type: ignore[arg-type]

    monkeypatch.setattr(Voice, "decode", quieter)
    yield


def test_a_quiet_voice_is_brought_to_the_target_without_jumps(
    engine: Engine, quiet_voice: None
) -> None:
    raw = measure(
        engine.synthesize(FIVE_SENTENCES, QUIET.with_changes(normalize=False)).audio, SAMPLE_RATE
    )
    streamed = _sentences(engine, QUIET)
    whole = measure(np.concatenate(streamed), SAMPLE_RATE)
    sentences = [measure(pcm, SAMPLE_RATE).integrated_lufs for pcm in streamed]
    assert raw.integrated_lufs < -40
    assert abs(whole.integrated_lufs + 16) <= 1.5 and whole.true_peak_dbtp <= -1.0
    assert max(abs(a - b) for a, b in itertools.pairwise(sentences)) <= 1.5


def test_streamed_and_whole_get_the_same_gains(engine: Engine, quiet_voice: None) -> None:
    whole = engine.synthesize(FIVE_SENTENCES, QUIET).audio
    streamed = np.concatenate([chunk.pcm for chunk in engine.stream(FIVE_SENTENCES, QUIET)])
    np.testing.assert_array_equal(streamed, whole)


def test_lead_silence_comes_before_the_first_sentence_only(engine: Engine) -> None:
    plain = list(engine.stream(FIVE_SENTENCES, QUIET))
    led = list(engine.stream(FIVE_SENTENCES, QUIET.with_changes(lead_silence=500)))
    lead = round(0.5 * SAMPLE_RATE)
    assert led[0].pause_before_s == 0.5 and not led[0].pcm[:lead].any()
    assert np.array_equal(led[0].pcm[lead:], plain[0].pcm)
    assert np.array_equal(
        np.concatenate([c.pcm for c in led[1:]]), np.concatenate([c.pcm for c in plain[1:]])
    )
    whole = engine.synthesize(FIVE_SENTENCES, QUIET.with_changes(lead_silence=500))
    assert whole.sentences[0].pause_before_s == 0.5 and not whole.audio[:lead].any()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"volume": 11}, "volume must be between -20 and 10"),
        ({"volume": "loud"}, "volume must be a number"),
        ({"lead_silence": -1}, "lead_silence must be between 0 and 1000"),
        ({"normalize": "yes"}, "normalize must be true or false"),
        ({"loudness": 1}, "unknown option 'loudness'"),
    ],
)
def test_bad_loudness_options_are_refused(
    engine: Engine, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        engine.stream("こんにちは。", SynthesisOptions().with_values(changes))
    assert next(engine.stream("こんにちは。", QUIET)).pcm.any()  # still usable


# -- the meter and the limiter on their own ------------------------------------------------------
def test_the_meter_reads_a_sine_as_bs1770_says() -> None:
    """A 997 Hz sine at -20 dBFS reads -23.0 LUFS (0 dBFS reads -3.01); ffmpeg agrees."""
    time = np.arange(SAMPLE_RATE * 3) / SAMPLE_RATE
    sine = (0.1 * np.sin(2 * np.pi * 997 * time)).astype(np.float32)
    ours = loudness.integrated_loudness(loudness.step_energies(sine, SAMPLE_RATE), SAMPLE_RATE)
    assert ours is not None and abs(ours + 23.01) <= 0.05
    theirs = measure(np.round(sine * 32767).astype(np.int16), SAMPLE_RATE)
    assert abs(theirs.integrated_lufs - ours) <= 0.1


def test_silence_has_no_loudness_and_gets_no_gain() -> None:
    silent = np.zeros(SAMPLE_RATE, dtype=np.float32)
    assert (
        loudness.integrated_loudness(loudness.step_energies(silent, SAMPLE_RATE), SAMPLE_RATE)
        is None
    )
    level = loudness.Leveller(SAMPLE_RATE, volume_db=0.0, normalize=True, basis=BASIS).sentence()
    assert not level.apply(silent, last=True).any()


@pytest.mark.parametrize("cuts", [[], [30_000], [24_576, 24_857, 50_000], [40_000, 40_100, 40_200]])
def test_the_limiter_gives_the_same_samples_however_the_sentence_is_cut(cuts: list[int]) -> None:
    """Pieces as the engine cuts them: the first holds the gain's basis (a stream's first piece
    is never shorter), the others any length, shorter than the limiter's reach too."""
    noise = np.random.default_rng(7).standard_normal(SAMPLE_RATE * 2).astype(np.float32) * 0.2
    whole = loudness.Leveller(SAMPLE_RATE, 0.0, True, BASIS).sentence().apply(noise, last=True)
    level = loudness.Leveller(SAMPLE_RATE, 0.0, True, BASIS).sentence()
    bounds = [0, *cuts, len(noise)]
    pieces = [
        level.apply(noise[low:high], last=high == len(noise))
        for low, high in itertools.pairwise(bounds)
    ]
    assert np.array_equal(np.concatenate(pieces), whole)
    assert measure(np.round(whole * 32767).astype(np.int16), SAMPLE_RATE).true_peak_dbtp <= -1.0
