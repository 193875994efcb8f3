"""What synthesis returns: audio chunks per sentence and a report of each."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class AudioChunk:
    """One sentence of audio, the pause before it already at its start (digital silence)."""

    pcm: NDArray[np.int16]  # [samples], mono
    sample_rate: int
    text: str  # the normalised sentence
    pause_before_s: float
    compute_s: float

    @property
    def audio_s(self) -> float:
        return self.pcm.shape[0] / self.sample_rate


@dataclass(frozen=True)
class SentenceReport:
    text: str
    pause_before_s: float
    audio_s: float  # the sentence's own audio, without the pause
    compute_s: float


@dataclass(frozen=True)
class Synthesis:
    audio: NDArray[np.int16]  # [samples], mono 16-bit
    sample_rate: int
    sentences: list[SentenceReport] = field(default_factory=list)

    @property
    def audio_s(self) -> float:
        return self.audio.shape[0] / self.sample_rate

    @property
    def compute_s(self) -> float:
        return sum(report.compute_s for report in self.sentences)

    @classmethod
    def from_chunks(cls, chunks: list[AudioChunk], sample_rate: int) -> Synthesis:
        audio = np.concatenate([c.pcm for c in chunks]) if chunks else np.zeros(0, np.int16)
        reports = [
            SentenceReport(c.text, c.pause_before_s, c.audio_s - c.pause_before_s, c.compute_s)
            for c in chunks
        ]
        return cls(audio=audio, sample_rate=sample_rate, sentences=reports)
