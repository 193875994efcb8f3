"""What synthesis returns: audio chunks (whole sentences or pieces of one) and a report of each
sentence."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class AudioChunk:
    """Audio of one sentence, or a piece of it when streaming sends its start early. The first
    piece of a sentence carries the pause before it, already at its start (digital silence); a
    smooth start sends the pause as pieces of their own (silence only) ahead of the speech."""

    pcm: NDArray[np.int16]  # [samples], mono
    sample_rate: int
    text: str  # the normalised sentence this audio belongs to
    pause_before_s: float  # the silence at its start that is the sentence's pause
    compute_s: float
    starts_sentence: bool = True
    ends_sentence: bool = True

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
    def collect(cls, chunks: Iterable[AudioChunk], sample_rate: int) -> Synthesis:
        """The chunks' audio in one array, each chunk's samples appended to one buffer as it
        comes: a long text's audio is held once, not once in chunks and again joined."""
        samples = bytearray()
        reports: list[SentenceReport] = []
        for chunk in chunks:
            samples += chunk.pcm.tobytes()
            _add_to_reports(reports, chunk)
        audio = np.frombuffer(samples, dtype=np.int16)
        return cls(audio=audio, sample_rate=sample_rate, sentences=reports)


def sentence_reports(chunks: Iterable[AudioChunk]) -> list[SentenceReport]:
    """One report per sentence, however many pieces it came in."""
    reports: list[SentenceReport] = []
    for chunk in chunks:
        _add_to_reports(reports, chunk)
    return reports


def _add_to_reports(reports: list[SentenceReport], chunk: AudioChunk) -> None:
    own_audio_s = chunk.audio_s - chunk.pause_before_s
    if chunk.starts_sentence or not reports:
        reports.append(
            SentenceReport(chunk.text, chunk.pause_before_s, own_audio_s, chunk.compute_s)
        )
        return
    last = reports[-1]
    reports[-1] = SentenceReport(
        last.text,
        last.pause_before_s + chunk.pause_before_s,
        last.audio_s + own_audio_s,
        last.compute_s + chunk.compute_s,
    )
