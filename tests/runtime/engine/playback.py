"""A stream as a player hears it: one that starts with the first chunk and plays each chunk as
it comes, waiting where the next is not there yet. Its time is the engine's (box.py: modelled),
so that what it hears is exact."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from custom_components.yomiage.engine.synthesis.clock import Clock
from custom_components.yomiage.engine.synthesis.results import AudioChunk

from .common import SAMPLE_RATE

# How late a chunk may come before the player counts it as a wait: rounding only (sums of
# chunk lengths in float seconds), the time being modelled.
JITTER_S = 1e-9


@dataclass(frozen=True)
class Heard:
    """A stream as a player starting with its first chunk hears it."""

    arrivals: list[float]  # seconds from the request to each chunk
    chunks: list[AudioChunk]

    @property
    def first_audio_s(self) -> float:
        return self.arrivals[0]

    @property
    def lead_s(self) -> float:
        """Silence at the start, before the first speech sample."""
        audio = np.concatenate([chunk.pcm for chunk in self.chunks])
        return int(np.flatnonzero(audio)[0]) / SAMPLE_RATE

    def lateness_s(self) -> list[float]:
        """For each chunk, how late it came against a player that started with the first chunk
        and never waited (negative: early)."""
        position, late = 0.0, []
        for arrived, chunk in zip(self.arrivals, self.chunks, strict=True):
            late.append(arrived - (self.arrivals[0] + position))
            position += chunk.audio_s
        return late

    def waits_s(self) -> float:
        """Seconds the player waited in all, each wait delaying what follows."""
        played_until, waits = self.arrivals[0], 0.0
        for arrived, chunk in zip(self.arrivals, self.chunks, strict=True):
            waits += max(0.0, arrived - played_until - JITTER_S)
            played_until = max(played_until, arrived) + chunk.audio_s
        return waits

    def least_lead_s(self) -> float:
        """The least silence at the start that would have left no wait: the lead there was,
        less the earliest any speech chunk came before it was due."""
        first_speech = next(i for i, c in enumerate(self.chunks) if np.any(c.pcm))
        return max(0.0, self.lead_s + max(self.lateness_s()[first_speech:]))


def heard(chunks: Iterator[AudioChunk], clock: Clock, started: float) -> Heard:
    arrivals, kept = [], []
    for chunk in chunks:
        arrivals.append(clock() - started)
        kept.append(chunk)
    return Heard(arrivals, kept)


def listen(start: Callable[[], Iterator[AudioChunk]], clock: Clock) -> Heard:
    """The stream ``start`` gives, heard on ``clock`` from the moment it is asked for."""
    started = clock()
    return heard(start(), clock, started)
