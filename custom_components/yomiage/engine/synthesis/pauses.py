"""Natural pauses between sentences, from the duration predictor's frames for the punctuation.

The duration predictor runs over a window of sentences around each boundary: the whole text when
it fits ``PAUSE_WINDOW_CHARS``, so that its relative attention (quadratic in phones) never costs
more than a text of that size. The pause after a sentence is the time it predicts for the
sentence's trailing punctuation (and the blank just before it), converted with
frames x hop / sample rate, never below ``MIN_PAUSE_S``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..text.symbols import PUNCTUATIONS

MIN_PAUSE_S = 0.08
BLANK_ID = 0
# Characters of normalised text in one duration-predictor run: the bench's long text (eight
# sentences, ~200 characters) fits in one, as almost every message does.
PAUSE_WINDOW_CHARS = 300


def pause_windows(lengths: Sequence[int], budget: int = PAUSE_WINDOW_CHARS) -> list[range]:
    """Runs of consecutive sentences (by their ``lengths``) for the pause pass: each holds two
    sentences or more and, past two, fits ``budget``; each next one starts at the last sentence
    of the one before, so every boundary lies inside exactly one window."""
    windows: list[range] = []
    start = 0
    while start < len(lengths) - 1:
        stop = start + 2
        size = sum(lengths[start:stop])
        while stop < len(lengths) and size + lengths[stop] <= budget:
            size += lengths[stop]
            stop += 1
        windows.append(range(start, stop))
        start = stop - 1
    return windows


def boundary_pauses(
    sentence_texts: Sequence[str],
    durations: NDArray[np.float32],
    phones: NDArray[np.int64],
    word2ph: NDArray[np.int64],
    seconds_per_frame: float,
    pause_scale: float = 1.0,
) -> list[float]:
    """Pause before each sentence (the first gets 0) for the whole text made of ``sentence_texts``.

    ``durations``/``phones`` cover the whole text; ``word2ph`` is the whole text's (with its
    [CLS] and [SEP] entries), so character ``c`` owns phones
    ``[first_phone[c + 1], first_phone[c + 2])``.
    """
    first_phone = np.concatenate(([0], np.cumsum(word2ph)))
    pauses = [0.0]
    end = 0
    for text in sentence_texts[:-1]:
        end += len(text)
        start = end - _trailing_punctuation(text)
        frames = _frames(durations, phones, first_phone[start + 1], first_phone[end + 1])
        pauses.append(_pause_seconds(frames, seconds_per_frame, pause_scale))
    return pauses


def sentence_frames(
    sentence_texts: Sequence[str], durations: NDArray[np.float32], word2ph: NDArray[np.int64]
) -> list[float]:
    """Frames the duration pass predicts for each sentence of the whole text made of
    ``sentence_texts`` (``durations`` and ``word2ph`` as for ``boundary_pauses``), as each is
    synthesized alone: its characters' phones, and the padding phones the whole text has once
    at either end and each sentence alone has too."""
    first_phone = np.concatenate(([0], np.cumsum(word2ph)))
    padding = float(durations[: first_phone[1]].sum() + durations[first_phone[-2] :].sum())
    frames: list[float] = []
    start = 0
    for text in sentence_texts:
        end = start + len(text)
        own = float(durations[first_phone[start + 1] : first_phone[end + 1]].sum())
        frames.append(own + padding)
        start = end
    return frames


def trailing_pause(
    text: str,
    durations: NDArray[np.float32],
    phones: NDArray[np.int64],
    word2ph: NDArray[np.int64],
    seconds_per_frame: float,
    pause_scale: float = 1.0,
) -> float:
    """The pause after one sentence analysed alone (streamed input: no whole text exists)."""
    return boundary_pauses([text, ""], durations, phones, word2ph, seconds_per_frame, pause_scale)[
        1
    ]


def _trailing_punctuation(text: str) -> int:
    count = 0
    for char in reversed(text):
        if char not in PUNCTUATIONS:
            break
        count += 1
    return count


def _frames(
    durations: NDArray[np.float32], phones: NDArray[np.int64], start: int, end: int
) -> float:
    if end <= start:
        return 0.0
    if start > 0 and phones[start - 1] == BLANK_ID:
        start -= (
            1  # the blank between the last spoken phone and the punctuation belongs to the pause
        )
    return float(durations[start:end].sum())


def _pause_seconds(frames: float, seconds_per_frame: float, pause_scale: float) -> float:
    return max(MIN_PAUSE_S, frames * seconds_per_frame * pause_scale)
