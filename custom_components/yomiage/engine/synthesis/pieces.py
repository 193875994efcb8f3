"""How a sentence's latent frames are cut into decoder pieces, and the pieces decoded.

Whole-file synthesis decodes a sentence in one run (in equal pieces only past
``MAX_DECODE_FRAMES``). Streaming sends a first piece early; ``DecodeSpeed`` sizes it from how fast
this machine decodes, so that the player has audio until the rest of the sentence is ready.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .turns import RunGate, run_plainly

if TYPE_CHECKING:
    from .voice import SentenceInput, Voice

# Smallest first piece of a streamed sentence: 48 frames = 0.56 s of audio at hop 512 / 44.1 kHz.
# DecodeSpeed grows it until the rest of the sentence is decoded before it has finished playing.
FIRST_PIECE_FRAMES = 48
# Headroom on the measured decoding speed when sizing the first piece (the machine is shared).
_SPEED_MARGIN = 1.3
# Weight of the newest run in the decoding speed (the machine's load changes).
_SMOOTHING = 0.3
# The first piece of a stream never takes longer than this to decode. Where decoding is slower
# than real time (a Pi), no first piece avoids a wait later, and an early start matters more:
# voice satellites give up after ~5 s of silence.
FIRST_AUDIO_BUDGET_S = 1.5
# The decoder's activations grow with the frames it decodes at once (~0.3 MB per frame at full
# size): a 17 s sentence in one run would take ~450 MB of arena on a Pi. Longer sentences are
# decoded in pieces of at most this many frames (8.9 s); each piece costs 2 x context (16) frames
# of overlap, under 5 % of its work.
MAX_DECODE_FRAMES = 768


class DecodeSpeed:
    """How fast this machine decodes, learnt from the decoder's own runs. It sizes a streamed
    sentence's first piece: large enough that the rest of the sentence is decoded before that
    piece has played, so that playback never waits in the middle of a word (a wait between
    sentences only lengthens a pause). It also learns what a whole sentence costs per frame
    (front and decoder runs), which sizes a smooth start (smooth_start.py)."""

    def __init__(self, frame_s: float) -> None:
        self.frame_s = frame_s  # seconds of audio per latent frame
        self._seconds_per_frame: float | None = None
        self._sentence_s_per_frame: float | None = None
        self._last_sentence_s_per_frame: float | None = None
        self._lock = threading.Lock()

    def record(self, frames: int, seconds: float) -> None:
        if frames > 0:
            with self._lock:
                self._seconds_per_frame = _smoothed(self._seconds_per_frame, seconds / frames)

    def record_sentence(self, frames: int, seconds: float) -> None:
        """A sentence's front and decoder runs took ``seconds``, decoding ``frames``."""
        if frames > 0:
            with self._lock:
                self._sentence_s_per_frame = _smoothed(self._sentence_s_per_frame, seconds / frames)
                self._last_sentence_s_per_frame = seconds / frames

    def sentence_s_per_frame(self) -> float | None:
        """Seconds a sentence's synthesis (front and decoder) takes per latent frame; None
        before any sentence."""
        with self._lock:
            return self._sentence_s_per_frame

    def sentence_s_per_frame_now(self) -> float | None:
        """The learnt cost, or the last sentence's where it was higher: the average lags a box
        whose load has just grown, and a pause sized on it comes up short."""
        with self._lock:
            learnt, last = self._sentence_s_per_frame, self._last_sentence_s_per_frame
        return None if learnt is None or last is None else max(learnt, last)

    def expected_s(self, frames: int) -> float:
        """How long decoding ``frames`` (its overlap included) is expected to take, with the
        headroom the first piece is sized with; before any run, as long as their audio."""
        with self._lock:
            cost = self._seconds_per_frame
        return frames * (self.frame_s if cost is None else cost * _SPEED_MARGIN)

    def first_piece(
        self, frames: int, context: int, minimum: int, lead_s: float | None, pause_s: float = 0.0
    ) -> int:
        """Frames f of the first piece such that the player never waits inside the sentence.

        Nothing playing yet (``lead_s`` None): the rest, frames - f + context, must decode while
        f plays: f >= (frames + context) * cost / (cost + frame_s), but f + context decodes
        within ``FIRST_AUDIO_BUDGET_S``. Already playing, ``lead_s`` seconds ahead: the whole
        sentence (2 x context of overlap) must decode within that lead, the pause and f:
        f >= ((frames + 2 context) * cost - lead_s - pause_s) / frame_s; no split when the whole
        sentence decodes within the lead. Before any run, cost = frame_s.
        """
        with self._lock:
            cost = self._seconds_per_frame
        cost = self.frame_s if cost is None else cost * _SPEED_MARGIN
        if lead_s is None:
            unbroken = (frames + context) * cost / (cost + self.frame_s)
            wanted = min(unbroken, FIRST_AUDIO_BUDGET_S / cost - context)
        elif frames * cost <= lead_s:
            return frames
        else:
            wanted = ((frames + 2 * context) * cost - lead_s - pause_s) / self.frame_s
        return min(frames, max(minimum, math.ceil(wanted)))


def _smoothed(known: float | None, observed: float) -> float:
    return observed if known is None else known + _SMOOTHING * (observed - known)


def decode_window(span: tuple[int, int], frames: int, context: int) -> tuple[int, int]:
    """The frames a decoder run reads for ``span``: ``context`` more on each side (its receptive
    field), within the sentence's ``frames``."""
    start, stop = span
    return max(0, start - context), min(frames, stop + context)


def decode_spans(
    frames: int, first_frames: int | None, context: int, max_frames: int = MAX_DECODE_FRAMES
) -> list[tuple[int, int]]:
    """The frame spans to decode one after the other: an early first piece when asked for and
    the sentence is longer than it and its overlap, then the rest in equal pieces of at most
    ``max_frames`` (equal, so that no piece is a sliver that costs mostly overlap)."""
    spans: list[tuple[int, int]] = []
    start = 0
    if first_frames is not None and frames > first_frames + context:
        spans.append((0, first_frames))
        start = first_frames
    count = math.ceil((frames - start) / max_frames)
    size = math.ceil((frames - start) / max(1, count))
    spans.extend((low, min(frames, low + size)) for low in range(start, frames, max(1, size)))
    return spans or [(0, frames)]


class DecodedPiece(NamedTuple):
    samples: NDArray[np.float32]  # float32 [samples] in [-1, 1]
    last: bool  # the sentence ends with it


def decode_in_pieces(
    voice: Voice,
    sentence: SentenceInput,
    first_frames: int | None,
    lead: tuple[float | None, float] = (None, 0.0),
    gate: RunGate = run_plainly,
) -> Generator[DecodedPiece]:
    """The sentence's audio as it is decoded: an early first piece of at least
    ``first_frames`` latent frames (more where decoding the rest would outlast its playing;
    ``lead``: seconds of audio the player has yet to play, None before it starts, and the pause
    before the sentence; see ``DecodeSpeed``), then the rest in pieces of at most
    ``MAX_DECODE_FRAMES``: together the samples of one whole run. One piece where the voice
    runs whole, or the sentence is short and ``first_frames`` is None. ``gate`` starts the
    decoder runs (turns.py: a stream's may be cut short). The runs' time, not the caller's
    between pieces, is what the sentence is learnt to cost, per frame decoded (a piece's
    overlap included: a sentence decoded in one run, as a smooth start decodes it, has none)."""
    speed = voice.decode_speed
    started = time.perf_counter()
    fronted = voice.front(sentence)
    if fronted is None:
        samples = voice.synthesize(sentence)
        speed.record_sentence(samples.shape[0] // voice.hop, time.perf_counter() - started)
        yield DecodedPiece(samples, last=True)
        return
    spent, decoded = time.perf_counter() - started, 0
    if first_frames is not None:
        first_frames = speed.first_piece(fronted.frames, fronted.context, first_frames, *lead)
    for span in decode_spans(fronted.frames, first_frames, fronted.context, MAX_DECODE_FRAMES):
        started = time.perf_counter()
        samples = voice.decode(fronted, span, gate)
        spent += time.perf_counter() - started
        low, high = decode_window(span, fronted.frames, fronted.context)
        decoded += high - low
        last = span[1] == fronted.frames
        if last:
            speed.record_sentence(decoded, spent)
        yield DecodedPiece(samples, last)
