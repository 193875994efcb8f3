"""Even loudness: each sentence brought to a target loudness with its true peak under a ceiling.

Loudness is ITU-R BS.1770 (what EBU R128 and ffmpeg's ``ebur128`` measure): K-weighted power
in 400 ms blocks, gated at -70 LUFS and 10 LU below the ungated mean. A sentence's gain is
decided when its first audio is ready, from the message so far plus the sentence's first
``basis`` samples (what a stream's first piece always holds), so streaming needs no look-ahead and
whole-file synthesis gets the same gains; later sentences follow the message's measure, so
loudness does not jump between them. A look-ahead limiter inside the sentence then keeps
peaks, between samples too, under the ceiling.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

TARGET_LUFS = -16.0
TRUE_PEAK_DBTP = -1.0
# The limiter aims under the ceiling: the true-peak estimate and the 16-bit rounding each
# add a little.
_CEILING = 10 ** ((TRUE_PEAK_DBTP - 0.5) / 20)
# Never more gain than this: a near-silent output stays near-silent rather than noise.
_MAX_GAIN_DB = 40.0
# The limiter's loss is made up in this many rounds, by at most this much (past it, the limiter
# would only squash the speech harder).
_MAKEUP_ROUNDS = 2
_MAX_MAKEUP_DB = 4.0
_BLOCK_S = 0.4
_STEP_S = 0.1  # blocks overlap by 75 %: a block is four steps
_STEPS_PER_BLOCK = round(_BLOCK_S / _STEP_S)
_ABSOLUTE_GATE_LUFS = -70.0
_RELATIVE_GATE_LU = -10.0
_LOUDNESS_OFFSET = -0.691  # BS.1770: 0 dB K-weighted sine at 997 Hz reads -3.01 LUFS
# K-weighting: a high shelf (+4 dB above ~1.7 kHz, the head's effect) and a high-pass at 38 Hz,
# given by BS.1770 as analogue parameters so that any sample rate gets its biquads.
_SHELF_HZ, _SHELF_DB, _SHELF_Q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
_HIGH_PASS_HZ, _HIGH_PASS_Q = 38.13547087602444, 0.5003270373238773
# Limiter: gain reduction held for this long on each side of a peak and ramped over as long
# again; longer holds leave peaky speech short of the target (docs/LOUDNESS.md).
_HOLD_S = 0.003
# True peak: 4x oversampling with a windowed-sinc interpolator of this many taps a side,
# evaluated only where a sample comes within 6 dB of the ceiling.
_OVERSAMPLING = 4
_INTERPOLATION_TAPS = 16
_CANDIDATE = 0.5


def gain_db_for(loudness_lufs: float | None, target_lufs: float) -> float:
    """The gain that brings ``loudness_lufs`` to ``target_lufs``; 0 for silence."""
    if loudness_lufs is None:
        return 0.0
    return min(_MAX_GAIN_DB, target_lufs - loudness_lufs)


class Leveller:
    """One message's loudness: a gain per sentence and a limiter for each (``normalize`` off:
    the volume as a plain gain on the raw output)."""

    def __init__(self, sample_rate: int, volume_db: float, normalize: bool, basis: int) -> None:
        """``basis``: how many samples of a sentence's start its gain is decided on."""
        self.sample_rate = sample_rate
        self.normalize = normalize
        self.basis = basis
        self._volume_db = volume_db
        # K-weighted energy per 100 ms step of the sentences so far
        self._steps: NDArray[np.float64] = np.zeros(0)

    def sentence(self) -> SentenceLevel:
        return SentenceLevel(self)

    def gain_for(self, basis: NDArray[np.float32]) -> float:
        """The gain of a sentence that starts with ``basis``, after the sentences measured."""
        if not self.normalize:
            return float(10 ** (self._volume_db / 20))
        basis_steps = step_energies(basis, self.sample_rate)
        loudness = integrated_loudness(np.concatenate((self._steps, basis_steps)), self.sample_rate)
        gain_db = gain_db_for(loudness, TARGET_LUFS + self._volume_db)
        before = integrated_loudness(basis_steps, self.sample_rate)
        return float(10 ** ((gain_db + self._limiter_loss_db(basis, before, gain_db)) / 20))

    def _limiter_loss_db(
        self, basis: NDArray[np.float32], before: float | None, gain_db: float
    ) -> float:
        """What the limiter will take off the sentence's loudness at ``gain_db``, judged on its
        start (loudness ``before``), so that a quieter ``volume`` stays that much quieter where
        peaks are limited."""
        if before is None:
            return 0.0
        loss = 0.0
        for _ in range(_MAKEUP_ROUNDS):
            gained = basis.astype(np.float64) * 10 ** ((gain_db + loss) / 20)
            limited = _Limiter(self.sample_rate).apply(gained, last=True)
            after = integrated_loudness(step_energies(limited, self.sample_rate), self.sample_rate)
            if after is None:
                return 0.0
            loss = min(_MAX_MAKEUP_DB, loss + before + gain_db - after)
        return loss

    def measure(self, sentence: NDArray[np.float32]) -> None:
        """Add a whole sentence's raw audio to the message's measure."""
        self._steps = np.concatenate((self._steps, step_energies(sentence, self.sample_rate)))


class SentenceLevel:
    """One sentence's audio levelled as it comes, piece by piece.

    With the limiter on, the last ``held_back`` samples of a piece wait for the next piece
    (their surroundings decide their gain); the sentence's last piece brings them all.
    """

    def __init__(self, message: Leveller) -> None:
        self._message = message
        self._gain: float | None = None
        self._raw: list[NDArray[np.float32]] = []
        self._limiter = _Limiter(message.sample_rate) if message.normalize else None

    def apply(self, samples: NDArray[np.float32], last: bool) -> NDArray[np.float32]:
        if self._gain is None:
            self._gain = self._message.gain_for(samples[: self._message.basis])
        if self._limiter is None:
            return samples if self._gain == 1.0 else (samples * self._gain).astype(np.float32)
        self._raw.append(samples)
        if last:
            self._message.measure(np.concatenate(self._raw))
            self._raw = []
        gained = samples.astype(np.float64) * self._gain
        return self._limiter.apply(gained, last).astype(np.float32)


def step_energies(samples: NDArray[np.floating[Any]], sample_rate: int) -> NDArray[np.float64]:
    """Sum of K-weighted squares in each whole 100 ms step (a shorter audio: one step)."""
    weighted = k_weighted(samples, sample_rate)
    step = round(_STEP_S * sample_rate)
    whole = len(weighted) // step
    if whole == 0:
        return np.array([np.sum(weighted**2) * step / max(1, len(weighted))])
    return np.asarray(np.sum(weighted[: whole * step].reshape(whole, step) ** 2, axis=1))


def integrated_loudness(steps: NDArray[np.float64], sample_rate: int) -> float | None:
    """Gated loudness (LUFS) of audio given as ``step_energies``; None below the absolute gate."""
    if len(steps) == 0:
        return None
    count = max(1, len(steps) - _STEPS_PER_BLOCK + 1)
    window = min(len(steps), _STEPS_PER_BLOCK)
    sums = np.convolve(steps, np.ones(window), mode="valid")[:count]
    powers = sums / (window * round(_STEP_S * sample_rate))
    with np.errstate(divide="ignore"):
        loudness = _LOUDNESS_OFFSET + 10 * np.log10(powers)
    gated = powers[loudness > _ABSOLUTE_GATE_LUFS]
    if len(gated) == 0:
        return None
    relative_gate = _LOUDNESS_OFFSET + 10 * math.log10(float(np.mean(gated))) + _RELATIVE_GATE_LU
    kept = powers[loudness > max(_ABSOLUTE_GATE_LUFS, relative_gate)]
    return _LOUDNESS_OFFSET + 10 * math.log10(float(np.mean(kept)))


def k_weighted(samples: NDArray[np.floating[Any]], sample_rate: int) -> NDArray[np.float64]:
    """The samples through BS.1770's K-weighting filter (applied in the frequency domain)."""
    size = 1 << (len(samples) + sample_rate // 10).bit_length()  # room for the filter's tail
    response = _k_response(size, sample_rate)
    return np.fft.irfft(np.fft.rfft(samples.astype(np.float64), size) * response, size)[
        : len(samples)
    ]


@cache
def _k_response(size: int, sample_rate: int) -> NDArray[np.complex128]:
    z_inverse = np.exp(-2j * np.pi * np.arange(size // 2 + 1) / size)
    shelf = _biquad_response(_shelf(sample_rate), z_inverse)
    high_pass = _biquad_response(_high_pass(sample_rate), z_inverse)
    return shelf * high_pass


def _shelf(rate: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    k = math.tan(math.pi * _SHELF_HZ / rate)
    high = 10 ** (_SHELF_DB / 20)
    band = high**0.4996667741545416
    norm = 1 + k / _SHELF_Q + k * k
    numerator = (
        (high + band * k / _SHELF_Q + k * k) / norm,
        2 * (k * k - high) / norm,
        (high - band * k / _SHELF_Q + k * k) / norm,
    )
    return numerator, (1.0, 2 * (k * k - 1) / norm, (1 - k / _SHELF_Q + k * k) / norm)


def _high_pass(rate: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    k = math.tan(math.pi * _HIGH_PASS_HZ / rate)
    norm = 1 + k / _HIGH_PASS_Q + k * k
    return (1.0, -2.0, 1.0), (1.0, 2 * (k * k - 1) / norm, (1 - k / _HIGH_PASS_Q + k * k) / norm)


def _biquad_response(
    coefficients: tuple[tuple[float, float, float], tuple[float, float, float]],
    z_inverse: NDArray[np.complex128],
) -> NDArray[np.complex128]:
    (b0, b1, b2), (a0, a1, a2) = coefficients
    return (b0 + z_inverse * (b1 + z_inverse * b2)) / (a0 + z_inverse * (a1 + z_inverse * a2))


class _Limiter:
    """Keeps a sentence's true peak under the ceiling, fed piece by piece.

    The gain at a sample depends only on the samples within ``reach`` of it, so the output
    does not depend on where the pieces were cut: a piece's last ``reach`` samples wait for
    the next piece. The sentence starts and ends in silence.
    """

    def __init__(self, sample_rate: int) -> None:
        self._hold = round(_HOLD_S * sample_rate)
        self.reach = held_back(sample_rate)
        # the context before what waits, then what waits
        self._tail: NDArray[np.float64] = np.zeros(self.reach)
        self._waiting = 0

    def apply(self, samples: NDArray[np.float64], last: bool) -> NDArray[np.float64]:
        parts = [self._tail, samples] + ([np.zeros(self.reach)] if last else [])
        signal = np.concatenate(parts)
        low = len(self._tail) - self._waiting
        high = max(low, len(signal) - self.reach)
        limited = signal[low:high] * self._gain(signal)[low:high]
        self._tail = signal[high - self.reach :]
        self._waiting = len(signal) - high
        return limited

    def _gain(self, signal: NDArray[np.float64]) -> NDArray[np.float64]:
        peaks = _true_peaks(signal)
        wanted = np.minimum(1.0, _CEILING / np.maximum(peaks, 1e-12))
        held = _sliding_min(wanted, self._hold)
        return _moving_mean(held, self._hold)


def held_back(sample_rate: int) -> int:
    """Samples at the end of a sentence's piece that wait for the next piece (normalised)."""
    return 2 * round(_HOLD_S * sample_rate) + _INTERPOLATION_TAPS


@cache
def _interpolator() -> NDArray[np.float64]:
    """[taps, phases]: weights of the samples around a point for each point between samples."""
    offsets = np.arange(-_INTERPOLATION_TAPS + 1, _INTERPOLATION_TAPS + 1)[:, None]
    phases = np.arange(1, _OVERSAMPLING)[None, :] / _OVERSAMPLING
    distance = offsets - phases
    window = np.cos(np.pi * distance / (2 * _INTERPOLATION_TAPS)) ** 2
    return np.asarray(np.sinc(distance) * window, dtype=np.float64)


def _true_peaks(signal: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per sample, the highest magnitude at it and between it and its neighbours."""
    peaks = np.abs(signal)
    taps = _INTERPOLATION_TAPS
    near = peaks > _CANDIDATE * _CEILING
    near[:taps] = near[-taps:] = False  # the signal's edges: context padding, silent
    candidates = np.flatnonzero(near | np.roll(near, -1))
    if len(candidates) == 0:
        return peaks
    offsets = np.arange(-taps + 1, taps + 1)
    between = np.abs(signal[candidates[:, None] + offsets] @ _interpolator()).max(axis=1)
    peaks[candidates] = np.maximum(peaks[candidates], between)
    peaks[candidates + 1] = np.maximum(peaks[candidates + 1], between)
    return peaks


def _sliding_min(values: NDArray[np.float64], reach: int) -> NDArray[np.float64]:
    """Minimum of ``values`` within ``reach`` on each side (1 beyond the ends)."""
    padded = np.pad(values, reach, constant_values=1.0)
    width = 2 * reach + 1
    span = 1
    current = padded
    while span * 2 <= width:  # current[i] = min(padded[i : i + 2 * span])
        current = np.minimum(current[:-span], current[span:])
        span *= 2
    return np.minimum(current[: len(values)], current[width - span : width - span + len(values)])


def _moving_mean(values: NDArray[np.float64], reach: int) -> NDArray[np.float64]:
    """Mean of ``values`` within ``reach`` on each side (the end values beyond the ends)."""
    padded = np.pad(values, reach, mode="edge")
    sums = np.concatenate(([0.0], np.cumsum(padded)))
    width = 2 * reach + 1
    return np.asarray((sums[width:] - sums[:-width]) / width)
