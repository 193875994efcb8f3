"""Text normalisation as SBV2 JP-Extra does it, so that BERT and OpenJTalk see what the voices saw.

Steps: readings rules (readings/) -> NFKC -> line breaks -> digits to kanji -> "~" as a long vowel
-> punctuation mapped to SBV2's set (! ? , . ' -) -> every character OpenJTalk cannot read
removed -> combining (han)dakuten removed. The result holds only kana, kanji, 々, 〇, Latin and
Greek letters and those six marks: no whitespace, and NFKC-stable, so BERT's character tokenizer
gives exactly one token per character.

Differences from SBV2, on purpose:
- a line break ends a sentence: it becomes "." unless the text before it already ends one
  (。.!? possibly followed by closing brackets or quotes) or nothing precedes it; SBV2 turns every
  line break into "." (so "。\n" became "..").
- 〇 is kept (SBV2 deletes it, turning 二〇二四年 into 二二四年; OpenJTalk reads 二〇二四 as 2024).
- numbers: see numbers.py (exact decimals, digit by digit beyond 10**52 instead of an error).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from .numbers import digits_to_words
from .readings import rewrite
from .symbols import PUNCTUATION_SYMBOLS, PUNCTUATIONS

# Punctuation -> SBV2's marks. Longer keys first so "・・・" wins over "・". Full-width forms are
# listed although NFKC removes most of them from the text: OpenJTalk's word strings use them.
_PUNCTUATION_MAP: Final = {
    "…": "...",
    "···": "...",
    "・・・": "...",
    **dict.fromkeys("：；，、·・", ","),
    **dict.fromkeys("。．$", "."),
    "！": "!",
    "？": "?",
    **dict.fromkeys('“”"‘’（）()《》【】[]「」', "'"),
    # Dashes and minus signs; "~" and "〜" are long vowels (below), not dashes.
    **dict.fromkeys("\u02d7\u2010\u2012\u2013\u2014\u2015\u2043\u2212", "-"),
    **dict.fromkeys("\u23af\u23e4\u2500\u2501\u2e3a\u2e3b", "-"),
}
_PUNCTUATION_PATTERN: Final = re.compile(
    "|".join(re.escape(key) for key in sorted(_PUNCTUATION_MAP, key=len, reverse=True))
)
# Everything OpenJTalk gets a reading for, plus SBV2's punctuation; the rest is deleted.
_UNREADABLE: Final = re.compile(
    "[^"
    "\u3040-\u309f\u30a0-\u30ff\u4e00-\u9fff\u3400-\u4dbf\u3005\u3007"  # kana, kanji, 々, 〇
    "A-Za-z\uff21-\uff3a\uff41-\uff5a"  # Latin letters, half and full width
    "\u0370-\u03ff\u1f00-\u1fff" + re.escape("".join(PUNCTUATION_SYMBOLS)) + "]+"  # Greek
)
_LONG_VOWEL_MARKS: Final = str.maketrans({"~": "ー", "～": "ー", "〜": "ー"})
_COMBINING_VOICING: Final = str.maketrans({"\u3099": None, "\u309a": None})

LINE_BREAKS: Final = "\n\r\u2028\u2029\x0b\x0c\x1c\x1d\x1e\x85"
_LINE_BREAK_RUN: Final = re.compile(rf"\s*[{LINE_BREAKS}]\s*")
SENTENCE_ENDS: Final = "。｡.!?！？．…‥"
CLOSING_MARKS: Final = "」』）)】》〉〕］]｝}”’\"'"


def normalize(text: str) -> str:
    """Normalise ``text`` for BERT and OpenJTalk (see the module docstring)."""
    text = unicodedata.normalize("NFKC", rewrite(text))
    text = _resolve_line_breaks(text)
    return _cleaned(digits_to_words(text))


def is_normalized(text: str) -> bool:
    """Whether ``text`` is already normalised text (no whitespace, digits, unmapped marks)."""
    return text == _cleaned(unicodedata.normalize("NFKC", text))


def _cleaned(text: str) -> str:
    text = map_punctuation(text.translate(_LONG_VOWEL_MARKS))
    return text.translate(_COMBINING_VOICING)


def map_punctuation(text: str) -> str:
    """Punctuation to SBV2's marks, then every character OpenJTalk cannot read deleted."""
    text = _PUNCTUATION_PATTERN.sub(lambda match: _PUNCTUATION_MAP[match[0]], text)
    return _UNREADABLE.sub("", text)


def has_speakable(normalized: str) -> bool:
    """Whether normalised text holds anything besides punctuation (cheap; no OpenJTalk)."""
    return any(char not in PUNCTUATIONS for char in normalized)


def ends_sentence(text: str) -> bool:
    """Whether ``text`` ends with sentence-final punctuation, closing brackets and spaces aside."""
    stripped = text.rstrip().rstrip(CLOSING_MARKS + " \t\u3000")
    return stripped.endswith(tuple(SENTENCE_ENDS))


def _resolve_line_breaks(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        before = text[: match.start()]
        if not before.strip() or ends_sentence(before):
            return " "  # deleted later; until then it keeps "1.\n2" from reading as 1.2
        return "。"

    return _LINE_BREAK_RUN.sub(replace, text)
