"""Pitch and intonation, moved in each sentence's audio as its pieces arrive (TD-PSOLA).

The synthesizer has no f0 input (JP-Extra's tones are only high or low per phone), so both act
on its output, a sentence at a time, never on the whole message. Grains two periods long, centred
a period apart on the voice's own cycles, are laid again a *target* period apart: the duration
stays, and so, roughly, do the voice's formants. ``pitch`` multiplies f0; ``intonation`` scales its
excursions around the sentence's mean (in log f0), as Style-Bert-VITS2's pitch_scale and
intonation_scale do through the WORLD vocoder (a second analysis and synthesis we avoid: it costs
more than our decoder on a slow box, and AivisSpeech calls its quality loss clear). Unvoiced
stretches have no pitch and keep their samples.

Each output sample depends on the sentence's audio alone, never on where its pieces were cut:
f0 frames and marks go as far as the audio so far allows, the mean f0 comes from the sentence's
first ``basis`` samples (its first piece is never shorter), and a sample leaves once no later
grain can reach it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

F0_MIN_HZ = 70.0  # speech; lower "periods" are noise
F0_MAX_HZ = 500.0
HOP_S = 0.01  # f0 frame step
ANALYSIS_RATE = 11025  # f0 is tracked on the audio averaged down to about this rate (cost / 6)
VOICED = 0.5  # autocorrelation peak (window-corrected) from which a frame is voiced
SILENT_RMS = 1e-4
UNVOICED_PERIOD_S = 0.01  # mark spacing where there is no pitch
RATIO_LIMITS = (0.5, 2.0)  # f0 is moved by at most an octave (wider only rings)


@dataclass(frozen=True)
class PitchShape:
    """One message's pitch and intonation (both 1: no change, and no processing at all)."""

    pitch: float
    intonation: float
    sample_rate: int
    basis: int  # samples of a sentence's start its mean f0 is taken from

    @property
    def changes(self) -> bool:
        return self.pitch != 1.0 or self.intonation != 1.0

    def sentence(self) -> SentencePitch:
        return SentencePitch(self)


class SentencePitch:
    """One sentence, piece by piece: ``apply`` returns the samples that are final so far (a few
    tens of milliseconds wait for the next piece); the sentence's last piece brings them all."""

    def __init__(self, shape: PitchShape) -> None:
        self._shape = shape
        rate = shape.sample_rate
        self._down = max(1, rate // ANALYSIS_RATE)  # f0 frames see blocks of this many samples
        down = self._down
        self._hop = down * max(1, round(rate * HOP_S / down))
        self._min_lag = max(2, math.floor(rate / down / F0_MAX_HZ))  # in blocks
        self._max_lag = math.ceil(rate / down / F0_MIN_HZ)
        self._half = self._max_lag * 3 // 2  # half an f0 window (blocks): 3 lowest periods
        self._fft = 1 << (4 * self._half - 1).bit_length()
        self._window: NDArray[np.float64] = np.hanning(2 * self._half).astype(np.float64)
        self._window_ac = _autocorrelation(self._window[None, :], self._fft)[0]
        self._unvoiced = round(rate * UNVOICED_PERIOD_S)
        self._reach = max(self._max_lag * down, self._unvoiced) + 1  # a grain's half, at most
        self._x: NDArray[np.float64] = np.zeros(0)
        self._coarse: NDArray[np.float64] = np.zeros(0)  # block means of the whole blocks so far
        self._lags: list[float] = []  # per f0 frame: the period in samples, 0 where unvoiced
        self._marks: list[int] = []  # analysis marks: sample positions on the voice's cycles
        self._mean_known = False
        self._mean_log_f0: float | None = None  # None: no voiced frame in the basis
        self._next_synthesis = 0
        self._out: NDArray[np.float64] = np.zeros(0)
        self._weight: NDArray[np.float64] = np.zeros(0)
        self._released = 0

    def apply(self, samples: NDArray[np.float32], last: bool) -> NDArray[np.float32]:
        self._x = np.concatenate((self._x, samples.astype(np.float64)))
        size = len(self._x)
        self._frames(size, last)
        if not self._mean_known:
            count = self._basis_frames(size, last)
            if len(self._lags) < count:
                return np.zeros(0, dtype=np.float32)  # the basis has not all arrived
            voiced = [lag for lag in self._lags[:count] if lag > 0]
            if voiced:
                rate = self._shape.sample_rate
                self._mean_log_f0 = float(np.mean(np.log(rate / np.array(voiced))))
            self._mean_known = True
        self._analysis_marks(size, last)
        self._lay_grains(size, last)
        end = size if last else max(self._released, min(size, self._next_synthesis - self._reach))
        weight = np.maximum(self._weight[self._released : end], 0.05)
        released: NDArray[np.float32] = (self._out[self._released : end] / weight).astype(
            np.float32
        )
        self._released = end
        return released

    # -- f0 ------------------------------------------------------------------------------------
    def _frames(self, size: int, last: bool) -> None:
        """f0 frames whose whole window has arrived (all of them, zero-padded, at the end)."""
        down, half = self._down, self._half
        ready = len(self._lags)
        centres: list[int] = []  # in blocks
        while True:
            centre = (ready + len(centres)) * self._hop
            if centre >= size or (not last and centre + half * down > size):
                break
            centres.append(centre // down)
        if not centres:
            return
        whole_blocks = size // down
        if whole_blocks > len(self._coarse):  # only the blocks completed since the last piece
            done = len(self._coarse) * down
            fresh = self._x[done : whole_blocks * down].reshape(-1, down).mean(axis=1)
            self._coarse = np.concatenate((self._coarse, fresh))
        coarse = self._coarse
        if last and size % down:  # the sentence's last, partial block, zero-padded
            tail = np.zeros(down)
            tail[: size % down] = self._x[whole_blocks * down :]
            coarse = np.concatenate((coarse, [tail.mean()]))
        padded = np.concatenate((np.zeros(half), coarse, np.zeros(half)))
        frames = np.stack([padded[c : c + 2 * half] for c in centres])
        rms = np.sqrt(np.mean(frames**2, axis=1))
        frames = (frames - frames.mean(axis=1, keepdims=True)) * self._window
        ac = _autocorrelation(frames, self._fft)
        corrected = ac[:, : self._max_lag + 2] / np.maximum(ac[:, :1], 1e-20)
        corrected /= self._window_ac[: self._max_lag + 2] / self._window_ac[0]
        for row, level in zip(corrected, rms, strict=True):
            self._lags.append(self._lag(row) * down if level > SILENT_RMS else 0.0)

    def _lag(self, corrected: NDArray[np.float64]) -> float:
        low, high = self._min_lag, self._max_lag
        best = low + int(np.argmax(corrected[low : high + 1]))
        if corrected[best] < VOICED or best in (low, high):
            return 0.0
        before, at, after = corrected[best - 1 : best + 2]
        bend = before - 2 * at + after
        return best + (0.5 * (before - after) / bend if bend < 0 else 0.0)

    def _lag_at(self, position: int) -> float:
        return self._lags[min(len(self._lags) - 1, round(position / self._hop))]

    def _basis_frames(self, size: int, last: bool) -> int:
        """How many f0 frames lie within the sentence's first ``basis`` samples (the whole
        sentence when it is shorter): the frames its mean f0 is taken from."""
        end = min(self._shape.basis, size) if last else self._shape.basis
        return max(0, (end - self._half * self._down) // self._hop + 1)

    # -- marks and grains ----------------------------------------------------------------------
    def _analysis_marks(self, size: int, last: bool) -> None:
        """Marks a period apart, each put on the highest sample near where the last period
        ends (so that grains meet in phase); a fixed step where the voice has no pitch."""
        if not self._lags:
            return  # not one f0 frame yet (a piece shorter than half a window)
        if not self._marks:
            self._marks.append(0)
        while True:
            mark = self._marks[-1]
            lag = self._lag_at(mark)
            step = round(lag) if lag > 0 else self._unvoiced
            guess = mark + step
            if guess >= size:
                if not last or mark >= size:
                    return
                self._marks.append(guess)  # one past the end: the last samples' grains
                return
            if not self._frame_ready(guess, size, last):
                return
            if lag > 0 and self._lag_at(guess) > 0:
                low, high = guess - step // 4, guess + step // 4 + 1
                if high > size:
                    if not last:
                        return
                    high = size
                guess = low + int(np.argmax(self._x[low:high]))
            self._marks.append(max(guess, mark + 1))

    def _frame_ready(self, position: int, size: int, last: bool) -> bool:
        frame = round(position / self._hop)
        return frame < len(self._lags) and (
            last or frame * self._hop + self._half * self._down <= size
        )

    def _lay_grains(self, size: int, last: bool) -> None:
        """Synthesis marks a target period apart, each taking the grain of the analysis mark
        nearest to it; stops where a later analysis mark or sample is still to come."""
        needed = size + 2 * self._reach
        if len(self._out) < needed:
            grow = needed - len(self._out)
            self._out = np.concatenate((self._out, np.zeros(grow)))
            self._weight = np.concatenate((self._weight, np.zeros(grow)))
        marks = self._marks
        if not marks:
            return
        # At the end, grains go on past the last sample so that every sample is fully covered.
        while self._next_synthesis < size + (self._reach if last else 0):
            at = self._next_synthesis
            index = bisect_left(marks, at)
            if index >= len(marks) - 1 and not last:
                return  # the mark after this one has not been placed yet
            if index == len(marks) or (index > 0 and at - marks[index - 1] <= marks[index] - at):
                index -= 1
            mark = marks[index]
            lag = self._lag_at(mark)
            radius = round(lag) if lag > 0 else self._unvoiced
            if mark + radius > size and not last:
                return
            self._add_grain(mark, at, radius)
            following = marks[index + 1] if index + 1 < len(marks) else mark + radius
            self._next_synthesis = at + max(1, round((following - mark) / self._ratio(lag)))

    def _ratio(self, lag: float) -> float:
        """Target f0 over the voice's f0 at a mark (1 where it has none)."""
        if lag <= 0:
            return 1.0
        shape = self._shape
        ratio = shape.pitch
        if self._mean_log_f0 is not None and shape.intonation != 1.0:
            log_f0 = math.log(shape.sample_rate / lag)
            ratio *= math.exp((shape.intonation - 1.0) * (log_f0 - self._mean_log_f0))
        return min(RATIO_LIMITS[1], max(RATIO_LIMITS[0], ratio))

    def _add_grain(self, mark: int, at: int, radius: int) -> None:
        window = np.hanning(2 * radius + 1)
        source = self._x[max(0, mark - radius) : mark + radius + 1]
        offset = max(0, radius - mark)  # grain samples before the sentence's start
        grain = np.zeros(2 * radius + 1)
        grain[offset : offset + len(source)] = source
        start = at - radius
        cut = max(0, -start)
        self._out[start + cut : at + radius + 1] += (grain * window)[cut:]
        self._weight[start + cut : at + radius + 1] += window[cut:]


def _autocorrelation(frames: NDArray[np.floating[Any]], size: int) -> NDArray[np.float64]:
    spectrum = np.fft.rfft(frames, size, axis=1)
    ac: NDArray[np.float64] = np.fft.irfft(spectrum * spectrum.conj(), size, axis=1).real
    return ac
