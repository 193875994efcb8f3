"""Pitch and intonation (audio/pitch.py), measured as a listener's ear would: f0 tracked by the
test's own estimator (plain autocorrelation, not the module's), on a synthetic voice whose f0 is
known, on Piper's trained voice (a real intonation contour) and on the tiny bundle through the
engine (whose random weights buzz at the frame rate, 44100/512 = 86 Hz, with no contour)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy.typing import NDArray
from yomiage_engine import Engine, SynthesisOptions
from yomiage_engine.audio.pitch import PitchShape

from .. import trained_voice

RATE = 44100
BASIS = 48 * 512  # the engine's: a first piece's samples


def f0_track(samples: NDArray[np.float32], rate: int) -> NDArray[np.float64]:
    """f0 per 20 ms frame (40 ms windows), 0 where the frame is not clearly periodic."""
    size, step = int(0.04 * rate), int(0.02 * rate)
    low, high = int(rate / 450), int(rate / 65)
    track = []
    for start in range(0, len(samples) - size, step):
        frame = samples[start : start + size].astype(np.float64)
        frame = frame - frame.mean()
        energy = float(frame @ frame)
        if energy < 1e-6 * size:
            track.append(0.0)
            continue
        ac = np.correlate(frame, frame, "full")[size - 1 :]
        ac /= ac[0] * (size - np.arange(size)) / size  # unbiased, 1 at lag 0
        best = float(ac[low:high].max())
        # The shortest lag whose peak is nearly the best: a period's multiples score as high.
        peaks = [
            lag
            for lag in range(low, high)
            if ac[lag] >= 0.9 * best and ac[lag] >= ac[lag - 1] and ac[lag] >= ac[lag + 1]
        ]
        track.append(rate / peaks[0] if best > 0.6 and peaks else 0.0)
    return np.array(track)


def shaped(
    samples: NDArray[np.float32], pitch: float, intonation: float, cuts: list[int], rate: int = RATE
) -> NDArray[np.float32]:
    """The samples through one sentence's pitch stage, handed over in pieces cut at ``cuts``."""
    sentence = PitchShape(pitch, intonation, rate, BASIS).sentence()
    bounds = [0, *cuts, len(samples)]
    parts = [
        sentence.apply(samples[a:b], last=b == len(samples)) for a, b in itertools.pairwise(bounds)
    ]
    return np.concatenate(parts)


def glide() -> NDArray[np.float32]:
    """Two seconds of a buzzy voice gliding 110 -> 190 -> 130 Hz, with 0.1 s of noise inside."""
    t = np.arange(2 * RATE) / RATE
    f0 = 150 + 40 * np.sin(np.pi * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    voice = 0.2 * sum(np.sin(k * phase) / k for k in range(1, 25))
    voice[RATE : RATE + RATE // 10] = np.random.default_rng(0).normal(0, 0.02, RATE // 10)
    return voice.astype(np.float32)


def spread(track: NDArray[np.float64]) -> float:
    """How far the melody moves: the 10-90 % range of log f0 over the voiced frames (robust to
    the odd octave slip of a frame-wise tracker)."""
    high, low = np.percentile(np.log(track[track > 0]), [90, 10])
    return float(high - low)


def voiced_log_ratio(
    before: NDArray[np.float64], after: NDArray[np.float64]
) -> NDArray[np.float64]:
    both = (before > 0) & (after > 0)
    assert both.mean() > 0.25, "too little voiced audio to compare"
    return np.log(after[both] / before[both])


@pytest.mark.parametrize("pitch", [0.8, 1.25, 1.5])
def test_pitch_multiplies_f0_and_keeps_the_duration(pitch: float) -> None:
    voice = glide()
    out = shaped(voice, pitch, 1.0, cuts=[BASIS, 60000])
    assert len(out) == len(voice)
    ratios = np.exp(voiced_log_ratio(f0_track(voice, RATE), f0_track(out, RATE)))
    assert np.median(ratios) == pytest.approx(pitch, rel=0.02)


def test_intonation_scales_the_contour_around_the_sentence_mean() -> None:
    voice = glide()
    moves = spread(f0_track(voice, RATE))
    for intonation in (0.0, 0.5, 1.5):
        after = f0_track(shaped(voice, 1.0, intonation, cuts=[BASIS]), RATE)
        assert spread(after) == pytest.approx(intonation * moves, abs=0.1 * moves)


def test_the_samples_do_not_depend_on_where_the_pieces_are_cut() -> None:
    voice = glide()
    for pitch, intonation in [(1.3, 1.0), (0.9, 1.6), (1.0, 0.0)]:
        reference = shaped(voice, pitch, intonation, cuts=[BASIS])
        for cuts in ([BASIS, BASIS + 1], [30000, 31000, 70000], [BASIS + 777]):
            assert np.array_equal(shaped(voice, pitch, intonation, cuts), reference)


def test_tiny_pieces_and_an_empty_sentence_pass_through() -> None:
    voice = glide()[:5000]
    assert np.array_equal(
        shaped(voice, 1.0, 1.0, cuts=[10, 20, 3000]), shaped(voice, 1.0, 1.0, cuts=[])
    )
    assert len(shaped(voice, 1.3, 0.5, cuts=[1, 2])) == len(voice)
    assert len(PitchShape(1.3, 1.0, RATE, BASIS).sentence().apply(voice[:0], last=True)) == 0


def test_unchanged_pitch_gives_back_the_samples() -> None:
    """The stage is not run at 1 and 1 (the engine skips it); were it run, it is lossless."""
    voice = glide()
    assert not PitchShape(1.0, 1.0, RATE, BASIS).changes
    assert np.array_equal(shaped(voice, 1.0, 1.0, cuts=[BASIS, 50000]), voice)


def test_a_trained_voice_keeps_its_words_and_moves_its_melody() -> None:
    """Piper's trained voice (real speech): pitch 1.2 raises every voiced frame by 1.2, and
    intonation 0 flattens the sentence's melody while it keeps its length."""
    rate = trained_voice.sample_rate()
    speech = trained_voice.speech()
    basis = rate // 2
    before = f0_track(speech, rate)
    raised = PitchShape(1.2, 1.0, rate, basis).sentence().apply(speech, last=True)
    assert len(raised) == len(speech)
    ratios = np.exp(voiced_log_ratio(before, f0_track(raised, rate)))
    assert np.median(ratios) == pytest.approx(1.2, rel=0.03)
    flat = PitchShape(1.0, 0.0, rate, basis).sentence().apply(speech, last=True)
    assert len(flat) == len(speech)
    assert spread(f0_track(flat, rate)) < 0.4 * spread(before)


def test_the_engine_moves_pitch_per_request_and_leaves_the_default_alone(engine: Engine) -> None:
    text = "駅前の小さなパン屋は、毎朝早くから店を開けています。"
    quiet = SynthesisOptions(noise=0.0, noise_w=0.0)
    default = engine.synthesize(text, quiet)
    explicit = engine.synthesize(text, quiet.with_changes(pitch=1.0, intonation=1.0))
    assert np.array_equal(explicit.audio, default.audio)
    raised = engine.synthesize(text, quiet.with_changes(pitch=1.25))
    assert len(raised.audio) == len(default.audio)
    before = f0_track(default.audio.astype(np.float32) / 32768, engine.sample_rate)
    after = f0_track(raised.audio.astype(np.float32) / 32768, engine.sample_rate)
    assert np.median(np.exp(voiced_log_ratio(before, after))) == pytest.approx(1.25, rel=0.02)
