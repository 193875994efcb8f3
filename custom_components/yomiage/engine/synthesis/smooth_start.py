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

The engine hands a smooth start its plan and a ``Stage``: it runs the models and makes the
chunks, a smooth start decides how much silence goes where and when.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from .clock import Clock
from .decode_speed import DecodeSpeed
from .results import AudioChunk

# Over the predicted lateness: the duration pass draws its own noise (frames differ by a few
# per cent from the synthesizer's), and the learnt cost is an average, learnt partly from
# sentences decoded in pieces, which a CPU quota runs a little faster per frame than whole ones
# (docs/PERFORMANCE.md, "Smooth start": 1.1 left an Assist reply up to 1.1 s of waits there).
LEAD_MARGIN = 1.15
# A plan of several pause windows (a long text) sends silence between them once it has run this
# long, so that no player gives up on a stream that has not started.
_KEEP_ALIVE_AFTER_S = 1.0

S = TypeVar("S")  # a sentence as the engine decodes it (text, BERT features): opaque here


@dataclass(frozen=True)
class PlannedSentence(Generic[S]):
    sentence: S
    frames: float  # latent frames the duration pass predicts for it
    pause_before_s: float  # silence sent before it (0 for the first: the lead is its pause)


def needs_smooth_start(sentence_s_per_frame: float | None, frame_s: float) -> bool:
    """Whether this box synthesizes slower than real time (a sentence costs more than it
    plays); unknown before any sentence, taken as not."""
    return sentence_s_per_frame is not None and sentence_s_per_frame > frame_s


def smooth_lead_s(
    sentences: Iterable[PlannedSentence[Any]], sentence_s_per_frame: float, frame_s: float
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


@dataclass(frozen=True)
class Stage(Generic[S]):
    """What a smooth start uses of the engine for one message: the engine runs the models and
    makes the chunks (``silence``, ``speech``), each queued on the playback whose lead
    ``player_lead_s`` reads."""

    sentences: int  # in the message: the plan is done when it holds them all
    lead_silence_s: float  # asked for: it counts toward the lead
    speed: DecodeSpeed  # the voice's, as learnt
    clock: Clock
    player_lead_s: Callable[[], float | None]  # None before playing starts
    silence: Callable[[S, float, bool], AudioChunk]  # seconds ahead of a sentence, opening it?
    speech: Callable[[S], Iterator[AudioChunk]]  # decoded in one run, its pause sent already


def smooth_start(
    plan: Iterable[list[PlannedSentence[S]]], stage: Stage[S]
) -> Generator[AudioChunk]:
    """The plan (each pause window's sentences new to it, made as it is asked for), then the
    lead of silence, then each sentence's pause sent ahead of it (longer where the box runs
    slower than learnt) and the sentence. A plan of several windows sends silence between them
    once it has run ``_KEEP_ALIVE_AFTER_S``: it counts toward the lead. The lead opens the first
    sentence, as its pause (the lead silence asked for counts toward it)."""
    lead = _Lead(stage)
    planned: list[PlannedSentence[S]] = []
    for window in plan:
        planned.extend(window)
        if len(planned) < stage.sentences:
            yield from lead.keep_alive(planned[0].sentence, _KEEP_ALIVE_AFTER_S)
    speed = stage.speed
    cost = speed.sentence_s_per_frame()
    assert cost is not None  # needs_smooth_start said the box is slower than real time
    needed = smooth_lead_s(planned, cost, speed.frame_s)
    yield from lead.until_speech(planned[0].sentence, needed, stage.lead_silence_s)
    for index, sentence in enumerate(planned):
        if index:
            cost = speed.sentence_s_per_frame_now() or cost
            pause = stretched_pause_s(
                sentence.pause_before_s, stage.player_lead_s() or 0.0, sentence.frames, cost
            )
            yield stage.silence(sentence.sentence, pause, True)
        yield from stage.speech(sentence.sentence)


class _Lead(Generic[S]):
    """The silence a smooth start sends before its ``first`` sentence's speech: while the plan
    runs (keeping the player from giving up) and after it, until speech is due."""

    def __init__(self, stage: Stage[S]) -> None:
        self._stage = stage
        self._started = stage.clock()
        self._sent_s = 0.0
        self._first_sent_at: float | None = None
        self._last_sent_at: float | None = None

    def keep_alive(self, first: S, after_s: float) -> Iterator[AudioChunk]:
        """Silence for twice the time since the last was sent, where that is ``after_s`` or
        more: the player stays ahead while the plan goes on."""
        now = self._stage.clock()
        since = now - (self._last_sent_at or self._started)
        if since >= after_s:
            yield self._send(first, 2 * since, now)

    def until_speech(self, first: S, needed_s: float, at_least_s: float) -> Iterator[AudioChunk]:
        """The rest of the lead: speech ``needed_s`` from now, and ``at_least_s`` of silence
        in all (the lead silence asked for)."""
        now = self._stage.clock()
        if self._first_sent_at is None:
            more = needed_s
        else:  # what was sent plays from when it was first sent
            more = now + needed_s - (self._first_sent_at + self._sent_s)
        more = max(more, at_least_s - self._sent_s)
        if more > 0 or self._first_sent_at is None:
            yield self._send(first, max(more, 0.0), now)

    def _send(self, first: S, seconds: float, now: float) -> AudioChunk:
        opens = self._first_sent_at is None
        if opens:
            self._first_sent_at = now
        self._last_sent_at = now
        chunk = self._stage.silence(first, seconds, opens)
        self._sent_s += chunk.audio_s
        return replace(chunk, compute_s=now - self._started)
