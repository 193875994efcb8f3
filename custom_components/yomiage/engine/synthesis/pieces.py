"""How a sentence's latent frames are cut into decoder pieces, and the pieces decoded.

Whole-file synthesis decodes a sentence in one run (in equal pieces only past
``MAX_DECODE_FRAMES``). Streaming sends a first piece early; ``DecodeSpeed`` (decode_speed.py)
sizes it from how fast this machine decodes, so that the player has audio until the rest of the
sentence is ready.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .clock import MONOTONIC, Clock
from .graphs import decode_window
from .turns import RunGate, run_plainly
from .voice import SentenceInput, Voice

# Smallest first piece of a streamed sentence: 48 frames = 0.56 s of audio at hop 512 / 44.1 kHz.
# DecodeSpeed grows it until the rest of the sentence is decoded before it has finished playing.
FIRST_PIECE_FRAMES = 48
# The decoder's activations grow with the frames it decodes at once (~0.3 MB per frame at full
# size): a 17 s sentence in one run would take ~450 MB of arena on a Pi. Longer sentences are
# decoded in pieces of at most this many frames (8.9 s); each piece costs 2 x context (16) frames
# of overlap, under 5 % of its work.
MAX_DECODE_FRAMES = 768


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
    clock: Clock = MONOTONIC,
) -> Generator[DecodedPiece]:
    """The sentence's audio as it is decoded: an early first piece of at least
    ``first_frames`` latent frames (more where decoding the rest would outlast its playing;
    ``lead``: seconds of audio the player has yet to play, None before it starts, and the pause
    before the sentence; see ``DecodeSpeed``), then the rest in pieces of at most
    ``MAX_DECODE_FRAMES``: together the samples of one whole run. One piece where the voice
    runs whole, or the sentence is short and ``first_frames`` is None. ``gate`` starts the
    decoder runs (turns.py: a stream's may be cut short). What the sentence is learnt to cost,
    per frame decoded (a piece's overlap included: a sentence decoded in one run, as a smooth
    start decodes it, has none), is the time of its front and decoder calls on ``clock``, the
    turns they gave to other requests included (a busy engine is a slower box to its
    listeners), not the caller's between pieces."""
    speed = voice.decode_speed
    started = clock()
    fronted = voice.front(sentence)
    if fronted is None:
        samples = voice.synthesize(sentence)
        speed.record_sentence(samples.shape[0] // voice.hop, clock() - started)
        yield DecodedPiece(samples, last=True)
        return
    spent, decoded = clock() - started, 0
    if first_frames is not None:
        first_frames = speed.first_piece(fronted.frames, fronted.context, first_frames, *lead)
    for span in decode_spans(fronted.frames, first_frames, fronted.context, MAX_DECODE_FRAMES):
        started = clock()
        samples = voice.decode(fronted, span, gate)
        spent += clock() - started
        low, high = decode_window(span, fronted.frames, fronted.context)
        decoded += high - low
        last = span[1] == fronted.frames
        if last:
            speed.record_sentence(decoded, spent)
        yield DecodedPiece(samples, last)
