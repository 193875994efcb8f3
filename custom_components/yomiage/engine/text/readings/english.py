"""English words, names and acronyms in Japanese text → katakana (Wi-Fi → ワイファイ).

OpenJTalk spells unknown Latin words letter by letter (ホームエーエスエスアイエスティー…), and the
SBV2 normaliser deletes Latin letters outright, so every Latin word is rewritten here. Per word:

1. the user dictionary, then the lexicon (exact spelling first, then lowercase; short
   all-capital words only by exact spelling, so that "IT" and "US" stay acronyms),
2. CamelCase is split into its parts ("SwitchBot", "ESPHome", "ChatGPT"),
3. all-capital words and words without a vowel are acronyms, spelled (LED → エルイーディー),
4. anything else goes to the e2k model (english_model.py); without it, the word is spelled.

Digits inside a word are read as Japanese numbers ("iPhone15" → アイフォーン十五). Words next to
each other are joined without a space, so that OpenJTalk reads one compound.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping

from . import numerals
from .english_lexicon import EXACT, LETTERS, WORDS
from .english_model import guess_katakana

_PART = r"[A-Za-z0-9]+(?:['’][A-Za-z][A-Za-z0-9]*)*"
_WORD = rf"{_PART}(?:[-.&+]{_PART})*"
# Runs of words separated by blanks; a run is only touched when it contains a Latin letter.
_PHRASE = re.compile(rf"(?<![A-Za-z0-9])(?:{_WORD})(?:[ \t]+{_WORD})*")
# Digits, letter runs (hyphenated ones kept whole for the lexicon: "Wi-Fi6"), separators.
_PIECES = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+(?:['’-][A-Za-z]+)*|[-.&+]")
# Abbreviations whose dot would otherwise end the sentence for the normaliser.
_ABBREVIATIONS = re.compile(r"(?<![A-Za-z])(Mrs|Mr|Ms|Dr|vs|etc)\.(?=[ \t]|$)")
_ABBREVIATION_READINGS = {
    "Mr": "ミスター",
    "Mrs": "ミセス",
    "Ms": "ミズ",
    "Dr": "ドクター",
    "vs": "バーサス",
    "etc": "エトセトラ",
}
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+(?:['’][a-z]+)*|[A-Z]+|['’]")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")
_LATIN = re.compile(r"[A-Za-z]")
_SEPARATORS = {"&": "アンド", "+": "プラス", "-": "", ".": ""}
_LONGEST_ACRONYM_THAT_IS_SPELLED = 3


class _UserWords:
    """Readings from the user dictionary (user_dict.py), swapped in whole so readers never lock."""

    def __init__(self) -> None:
        self.exact: Mapping[str, str] = types.MappingProxyType({})
        self.folded: Mapping[str, str] = types.MappingProxyType({})

    def replace(self, words: Mapping[str, str]) -> None:
        exact = {" ".join(surface.split()): reading for surface, reading in words.items()}
        folded = {surface.lower(): reading for surface, reading in exact.items()}
        self.exact, self.folded = types.MappingProxyType(exact), types.MappingProxyType(folded)

    def get(self, text: str) -> str | None:
        text = " ".join(text.split())
        return self.exact.get(text) or self.folded.get(text.lower())


_USER_WORDS = _UserWords()


def set_user_words(words: Mapping[str, str]) -> None:
    """Latin surface → katakana from the user dictionary; they win over the built-in lexicon."""
    _USER_WORDS.replace(words)


def spell(word: str) -> str:
    """Letter by letter: "LED" → エルイーディー (non-letters are dropped)."""
    return "".join(LETTERS.get(c.lower(), "") for c in word)


def _lexicon(word: str) -> str | None:
    user = _USER_WORDS.get(word)
    if user is not None:
        return user
    if word in EXACT:
        return EXACT[word]
    if word.isupper() and len(word) <= _LONGEST_ACRONYM_THAT_IS_SPELLED:
        return None
    return WORDS.get(word.lower())


def _camel_parts(word: str) -> list[str]:
    """ "SwitchBot" → [Switch, Bot]; "ESPHome" → [ESP, Home]; "iPhone" → [i, Phone]."""
    return [part for part in _CAMEL.findall(word) if part not in ("'", "’")]


def _is_acronym(word: str) -> bool:
    return (word.isupper() and len(word) > 1) or not _VOWEL.search(word) or len(word) == 1


def _letters_reading(word: str, split_camel: bool = True) -> str:
    """Katakana for one run of letters (with apostrophes)."""
    known = _lexicon(word)
    if known is not None:
        return known
    parts = _camel_parts(word) if split_camel else [word]
    if len(parts) > 1:
        return "".join(_letters_reading(part, split_camel=False) for part in parts)
    if _is_acronym(word):
        return spell(word)
    return guess_katakana(word) or spell(word)


def _piece_reading(piece: str) -> str:
    if piece in _SEPARATORS:
        return _SEPARATORS[piece]
    if piece[0].isdigit():
        whole, _, fraction = piece.partition(".")
        return numerals.number("", whole, fraction or None)
    if "-" in piece and _lexicon(piece) is None:
        return "".join(_letters_reading(part) for part in piece.split("-"))
    return _letters_reading(piece)


def word_reading(word: str) -> str:
    """Katakana (and kanji numerals) for one word: "Wi-Fi", "USB-C", "PM2.5", "Zigbee3.0"."""
    known = _lexicon(word)
    if known is not None:
        return known
    return "".join(_piece_reading(piece) for piece in _PIECES.findall(word))


def _phrase(match: re.Match[str]) -> str:
    phrase = match.group(0)
    if not _LATIN.search(phrase):
        return phrase
    user = _USER_WORDS.get(phrase)
    if user is not None:
        return user
    return "".join(word_reading(word) for word in phrase.split())


def read_english(text: str) -> str:
    """Rewrite every run of Latin words in ``text`` as katakana."""
    if not _LATIN.search(text):
        return text
    text = _ABBREVIATIONS.sub(lambda m: _ABBREVIATION_READINGS[m.group(1)], text)
    return _PHRASE.sub(_phrase, text)
