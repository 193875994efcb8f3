"""Normalised text -> phones, tones and word2ph exactly as SBV2 JP-Extra's ``g2p`` makes them.

Two OpenJTalk views of the text are combined:
- the words with their katakana readings keep the punctuation, which becomes phones of its own
  (",", ".", "!", "?", "'", "-"); kana.py turns the readings into phones;
- the full-context labels carry the accent, but no punctuation; prosody.py reads the tones.
The phones of the first view take their tones from the second (punctuation gets tone 0).
word2ph spreads each word's phones over its characters, the first characters taking one more
when it does not divide evenly; "_" pads both ends (one phone each, one word2ph entry each).

Where SBV2 would stop with an error, this goes on (differences on purpose):
- OpenJTalk sometimes rewrites a word's surface (numerals: 二〇二四 -> 二千二十四; 𠮷 -> 吉), and
  SBV2's word2ph then no longer matches the text. Here characters are matched to words by
  sequence alignment, and a word left without characters hands its phones to its neighbour.
- readings whose phones disagree with the labels (SBV2: "Unexpected phone") are aligned the same
  way; a phone without a label counterpart gets tone 0. Where SBV2 succeeds both give its result.
- punctuation whose reading OpenJTalk gives as a full-width mark ("！", pyopenjtalk-plus) is the
  mark itself, as SBV2 treats the "、" reading that other OpenJTalk builds give.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

from . import openjtalk
from .kana import UNREADABLE, lengthen, reading_to_phones
from .normalize import map_punctuation
from .prosody import PhoneTone, phone_tones
from .symbols import PAD, PUNCTUATIONS

_KATAKANA_READING: Final = re.compile(r"[\u30a0-\u30ff]+")


@dataclass(frozen=True)
class Reading:
    """SBV2's g2p result: phone symbols and tones (0/1) padded with "_", word2ph per character
    with an entry for each pad ([CLS] and [SEP] for BERT)."""

    phones: list[str]
    tones: list[int]
    word2ph: list[int]


@dataclass(frozen=True)
class SpokenWord:
    """An OpenJTalk word as spoken: its phones with leading ー resolved (``kana.lengthen``)."""

    surface: str  # normalised like the text
    reading: str  # OpenJTalk's katakana
    phones: list[str]


def g2p(normalized: str) -> Reading:
    """Phones, tones and word2ph of text already passed through ``normalize``."""
    ojt_words, labels = openjtalk.analyse(normalized)
    words = spoken_words(ojt_words)
    phones = [phone for word in words for phone in word.phones]
    tones = _align_tones(phones, phone_tones(labels))
    word2ph = _word2ph(normalized, words)
    return Reading(phones=[PAD, *phones, PAD], tones=[0, *tones, 0], word2ph=[1, *word2ph, 1])


def word_phones(word: openjtalk.Word) -> list[str]:
    """Phones of one word; a leading "ー" is left for ``lengthen``."""
    surface = map_punctuation(word.surface)
    if _KATAKANA_READING.fullmatch(word.reading):
        return reading_to_phones(word.reading)
    if all(char in PUNCTUATIONS for char in surface):
        return list(surface)  # punctuation speaks as itself (also "" -> no phones)
    return [UNREADABLE] * len(surface)  # SBV2: what OpenJTalk cannot read becomes "'"


def spoken_words(ojt_words: Sequence[openjtalk.Word]) -> list[SpokenWord]:
    words: list[SpokenWord] = []
    previous: list[str] = []
    for ojt_word in ojt_words:
        phones = lengthen(word_phones(ojt_word), previous)
        surface = map_punctuation(unicodedata.normalize("NFKC", ojt_word.surface))
        words.append(SpokenWord(surface, ojt_word.reading, phones))
        previous = phones or previous
    return words


def _align_tones(phones: list[str], spoken: list[PhoneTone]) -> list[int]:
    """Tone of each phone, from the label phone it aligns with (punctuation and strays: 0).

    When the spoken phones of the readings equal the label phones (the normal case), the
    alignment is one to one, which is SBV2's result.
    """
    tones = [0] * len(phones)
    positions = [index for index, phone in enumerate(phones) if phone not in PUNCTUATIONS]
    matcher = SequenceMatcher(
        None, [phones[i] for i in positions], [item.phone for item in spoken], autojunk=False
    )
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            tones[positions[block.a + offset]] = spoken[block.b + offset].tone
    return tones


def _word2ph(text: str, words: Sequence[SpokenWord]) -> list[int]:
    phone_counts = [len(word.phones) for word in words]
    char_counts = _chars_per_word(text, [word.surface for word in words])
    if not any(char_counts):  # OpenJTalk found no words: whatever there is goes to the start
        return distribute(sum(phone_counts), 1) + [0] * (len(text) - 1) if text else []
    phone_counts = _give_away_charless(phone_counts, char_counts)
    return [
        share
        for phones, chars in zip(phone_counts, char_counts, strict=True)
        for share in distribute(phones, chars)
    ]


def distribute(phones: int, chars: int) -> list[int]:
    """Spread ``phones`` over ``chars`` characters as evenly as possible, the first ones first."""
    if chars == 0:
        return []
    base, extra = divmod(phones, chars)
    return [base + 1] * extra + [base] * (chars - extra)


def _chars_per_word(text: str, surfaces: Sequence[str]) -> list[int]:
    """How many characters of ``text`` each word covers (sums to ``len(text)``)."""
    if "".join(surfaces) == text:
        return [len(surface) for surface in surfaces]
    owner = [index for index, surface in enumerate(surfaces) for _ in surface]
    counts = [0] * len(surfaces)
    matcher = SequenceMatcher(None, "".join(surfaces), text, autojunk=False)
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        for char in range(b_start, b_end):
            if tag in ("equal", "replace"):
                # spread the text characters over the replaced surface characters
                source = a_start + (char - b_start) * (a_end - a_start) // (b_end - b_start)
            else:  # "insert": text characters no word has; the word before (or after) takes them
                source = max(a_start - 1, 0)
            if owner:
                counts[owner[min(source, len(owner) - 1)]] += 1
    return counts


def _give_away_charless(phone_counts: list[int], char_counts: list[int]) -> list[int]:
    """Phone counts after each word without characters handed its phones to the nearest earlier
    word that has some (at the start: the first later one), so that no phone is lost."""
    phones = list(phone_counts)
    owners = [index for index, chars in enumerate(char_counts) if chars]
    for index, chars in enumerate(char_counts):
        if chars == 0 and phones[index]:
            target = owners[max(bisect_left(owners, index) - 1, 0)]
            phones[target], phones[index] = phones[target] + phones[index], 0
    return phones
