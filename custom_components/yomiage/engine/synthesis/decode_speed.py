"""What decoding costs on this box, learnt from the decoder's own runs: it sizes a streamed
sentence's first piece (pieces.py) and a smooth start (smooth_start.py)."""

from __future__ import annotations

import math
import threading

# Headroom on the measured decoding speed when sizing the first piece (the machine is shared).
_SPEED_MARGIN = 1.3
# Weight of the newest run in the decoding speed (the machine's load changes).
_SMOOTHING = 0.3
# The first piece of a stream never takes longer than this to decode. Where decoding is slower
# than real time (a Pi), no first piece avoids a wait later, and an early start matters more:
# voice satellites give up after ~5 s of silence.
FIRST_AUDIO_BUDGET_S = 1.5


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
            # A run timed at nothing (a coarse clock) leaves the budget unbounded.
            budget = FIRST_AUDIO_BUDGET_S / cost - context if cost > 0 else math.inf
            wanted = min(unbroken, budget)
        elif frames * cost <= lead_s:
            return frames
        else:
            wanted = ((frames + 2 * context) * cost - lead_s - pause_s) / self.frame_s
        return min(frames, max(minimum, math.ceil(wanted)))


def _smoothed(known: float | None, observed: float) -> float:
    return observed if known is None else known + _SMOOTHING * (observed - known)
