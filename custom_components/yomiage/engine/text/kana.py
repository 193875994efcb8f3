"""Katakana readings to SBV2 JP-Extra phones: "キョー" -> ["ky", "o", "o"], "ン" -> ["N"].

The mora inventory is OpenJTalk's (the phones its labels use), with ッ written "q" and ン "N" as
SBV2 does. A long-vowel mark repeats the phone before it; marks at the very start of a reading are
returned as "ー" for the caller, who knows the previous word (``lengthen``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from types import MappingProxyType
from typing import Final

LONG_VOWEL: Final = "ー"
DASH: Final = "-"  # a ー with nothing to lengthen was meant as a dash; SBV2 speaks it as "-"
UNREADABLE: Final = "'"  # SBV2's phone for what OpenJTalk cannot read
# What a word-initial ー may lengthen: a vowel, ン, or ッ (OpenJTalk's labels hold ッー as "q q").
_LENGTHENABLE: Final = frozenset("aiueoNq")

# Consonant rows of the syllabary: kana for the vowels a i u e o ("_" = the cell is irregular).
_ROWS: Final = {
    "": "アイウエオ",
    "k": "カキクケコ",
    "g": "ガギグゲゴ",
    "s": "サ_スセソ",
    "z": "ザ_ズゼゾ",
    "t": "タ__テト",
    "d": "ダ__デド",
    "n": "ナニヌネノ",
    "h": "ハヒ_ヘホ",
    "b": "バビブベボ",
    "p": "パピプペポ",
    "m": "マミムメモ",
    "y": "ヤ_ユ_ヨ",
    "r": "ラリルレロ",
    "w": "ワ____",
}
# i-column kana that combine with small ャ ュ ェ ョ, and their palatal consonant.
_PALATAL: Final = {
    "キ": "ky", "ギ": "gy", "シ": "sh", "ジ": "j", "チ": "ch", "ニ": "ny",
    "ヒ": "hy", "ビ": "by", "ピ": "py", "ミ": "my", "リ": "ry",
}  # fmt: skip
# Everything else, "kana consonant vowel" (consonant "-" = none): irregular cells, loanword
# combinations, and small kana standing alone. There is no デェ: OpenJTalk reads it "de e".
_OTHERS: Final = """
シ sh i  ジ j i  チ ch i  ツ ts u  ヂ j i  ヅ z u  フ f u  ヲ - o  ヰ - i  ヱ - e
ン - N  ッ - q  ヴ v u  ヶ k e
ヴァ v a  ヴィ v i  ヴェ v e  ヴォ v o  ヴャ by a  ヴュ by u  ヴョ by o
ファ f a  フィ f i  フェ f e  フォ f o  ツァ ts a  ツィ ts i  ツェ ts e  ツォ ts o
ティ t i  テャ ty a  テュ ty u  テョ ty o  ディ d i  デャ dy a  デュ dy u  デョ dy o
トゥ t u  ドゥ d u  スィ s i  ズィ z i  ウィ w i  ウェ w e  ウォ w o  イェ y e
クヮ kw a  グヮ gw a
ァ - a  ィ - i  ゥ - u  ェ - e  ォ - o  ャ y a  ュ y u  ョ y o  ヮ w a
"""


def _morae() -> Iterator[tuple[str, tuple[str, ...]]]:
    for consonant, kanas in _ROWS.items():
        for kana, vowel in zip(kanas, "aiueo", strict=True):
            if kana != "_":
                yield kana, (consonant, vowel) if consonant else (vowel,)
    for kana, consonant in _PALATAL.items():
        for small, vowel in zip("ャュェョ", "aueo", strict=True):
            yield kana + small, (consonant, vowel)
    fields = _OTHERS.split()
    for kana, consonant, vowel in zip(fields[::3], fields[1::3], fields[2::3], strict=True):
        yield kana, (vowel,) if consonant == "-" else (consonant, vowel)


MORAE: Final = MappingProxyType(dict(_morae()))
# Longest kana first, so that キャ is one mora and not キ + ャ.
_MORA_PATTERN: Final = re.compile(
    "|".join(sorted(MORAE, key=len, reverse=True)) + f"|{LONG_VOWEL}|."
)


def reading_to_phones(reading: str) -> list[str]:
    """Phones of a katakana reading; ー after a mora repeats its last phone, leading ー stay."""
    phones: list[str] = []
    for match in _MORA_PATTERN.finditer(reading):
        token = match[0]
        if token == LONG_VOWEL:
            phones.append(phones[-1] if phones else LONG_VOWEL)
        else:
            phones.extend(MORAE.get(token, (UNREADABLE,)))
    return phones


def lengthen(phones: list[str], previous: Sequence[str]) -> list[str]:
    """Resolve the leading ー of one word's phones against the previous word's phones.

    A leading ー repeats the previous word's last phone when that is a vowel, ン or ッ; otherwise
    (start of text, after punctuation or a consonant) it was a dash and becomes "-". Further
    leading marks repeat whatever the first became.
    """
    resolved = list(phones)
    for index, phone in enumerate(resolved):
        if phone != LONG_VOWEL:
            break
        if index:
            resolved[index] = resolved[index - 1]
        elif previous and previous[-1] in _LENGTHENABLE:
            resolved[index] = previous[-1]
        else:
            resolved[index] = DASH
    return resolved
