"""SBV2 JP-Extra model inputs for a sentence: ids, tones, languages, word2ph (int64 arrays)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .g2p import Reading
from .symbols import JP_LANGUAGE_ID, JP_TONE_START, PAD_ID, SYMBOL_TO_ID

# OpenJTalk phones SBV2's table lacks (クヮ, グヮ; SBV2 fails on them): the nearest it has.
_SUBSTITUTES = {"kw": "k", "gw": "g"}


@dataclass(frozen=True, eq=False)
class PhoneSequence:
    """One sentence ready for BERT and the synthesizer.

    text: the normalised sentence (what BERT reads, one token per character).
    phones, tones, languages: int64 [P] (blanks interleaved when add_blank).
    word2ph: int64 [len(text) + 2], phones per character with [CLS] first and [SEP] last;
    sums to P.
    """

    text: str
    phones: NDArray[np.int64]
    tones: NDArray[np.int64]
    languages: NDArray[np.int64]
    word2ph: NDArray[np.int64]


def to_sequence(text: str, reading: Reading, add_blank: bool = True) -> PhoneSequence:
    """SBV2's ``cleaned_text_to_sequence`` and, when ``add_blank``, its blank interleaving."""
    phones = [SYMBOL_TO_ID[_SUBSTITUTES.get(phone, phone)] for phone in reading.phones]
    tones = [tone + JP_TONE_START for tone in reading.tones]
    languages = [JP_LANGUAGE_ID] * len(phones)
    word2ph = list(reading.word2ph)
    if add_blank:
        phones, tones, languages = (_interleave(values) for values in (phones, tones, languages))
        word2ph = [count * 2 for count in word2ph]
        word2ph[0] += 1  # the leading blank belongs to [CLS]
    return PhoneSequence(
        text=text,
        phones=_array(phones),
        tones=_array(tones),
        languages=_array(languages),
        word2ph=_array(word2ph),
    )


def _interleave(values: list[int]) -> list[int]:
    """[a, b] -> [0, a, 0, b, 0] (SBV2's blank is id 0 for phones, tones and languages alike)."""
    result = [PAD_ID] * (2 * len(values) + 1)
    result[1::2] = values
    return result


def _array(values: list[int]) -> NDArray[np.int64]:
    array = np.array(values, dtype=np.int64)
    array.flags.writeable = False  # shared between threads and callers: keep it frozen
    return array
