"""Smooth start: a message known whole, on a box that synthesizes slower than real time, opens
with just enough silence that no sentence is late once speech has begun.

After the plan (every sentence's BERT features, pauses and predicted frames, engine.py), the
sentences are synthesized one after the other: sentence k is ready when its runs and those
before it are done, sum of frames_j x the learnt cost per frame (DecodeSpeed) for j <= k.
It is due when the player reaches it: after the lead, the audio of the sentences before it and
the pauses up to its own (a pause is sent ahead of its sentence, so it plays while the sentence
is synthesized). The lead is the greatest lateness, with a margin for a frame count the duration
pass only predicts and a box whose load changes. Where the box still runs slower than learnt,
the pause before the next sentence grows by what is missing (``stretched_pause_s``): a longer
pause, never a player run dry in the middle of the message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Over the predicted lateness: the duration pass draws its own noise (frames differ by a few
# per cent from the synthesizer's), and the learnt cost is an average, learnt partly from
# sentences decoded in pieces, which a CPU quota runs a little faster per frame than whole ones
# (docs/PERFORMANCE.md, "Smooth start": 1.1 left an Assist reply up to 1.1 s of waits there).
LEAD_MARGIN = 1.15


@dataclass(frozen=True)
class PlannedSentence:
    frames: float  # latent frames the duration pass predicts for it
    pause_before_s: float  # silence sent before it (0 for the first: the lead is its pause)


def needs_smooth_start(sentence_s_per_frame: float | None, frame_s: float) -> bool:
    """Whether this box synthesizes slower than real time (a sentence costs more than it
    plays); unknown before any sentence, taken as not."""
    return sentence_s_per_frame is not None and sentence_s_per_frame > frame_s


def smooth_lead_s(
    sentences: Iterable[PlannedSentence], sentence_s_per_frame: float, frame_s: float
) -> float:
    """Seconds of silence from now until the first sentence's speech such that every sentence
    is ready when due; 0 where none would be late."""
    ready_s = due_s = late_s = 0.0
    for sentence in sentences:
        due_s += sentence.pause_before_s
        ready_s += sentence.frames * sentence_s_per_frame
        late_s = max(late_s, ready_s - due_s)
        due_s += sentence.frames * frame_s
    return late_s * LEAD_MARGIN


def stretched_pause_s(
    pause_s: float, lead_s: float, frames: float, sentence_s_per_frame: float
) -> float:
    """The pause to send before a sentence of ``frames`` predicted frames, the player having
    ``lead_s`` in hand: longer than planned where the two would not cover its synthesis."""
    return max(pause_s, frames * sentence_s_per_frame * LEAD_MARGIN - lead_s)
