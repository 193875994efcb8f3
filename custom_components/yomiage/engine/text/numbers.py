"""Digits to kanji numerals, as SBV2's normaliser does it (it calls num2words(..., lang="ja")).

"1,100" -> "千百", "52.34" -> "五十二点三四", "$5" -> "五ドル". Written out here so that the
engine needs no num2words. Two corners differ from num2words on purpose: decimals are read
exactly (num2words goes through a float and garbles digits beyond ~15 significant places), and a
number too large for the largest unit (>= 10**52, where num2words raises) is read digit by digit.

The readings rules (readings/) run before this and handle numbers with context (times, units);
this is the fallback for digits they leave alone.
"""

from __future__ import annotations

import re
from typing import Final

_DIGITS: Final = "零一二三四五六七八九"
# Units of 10**4k. num2words spells 10**24 as 秭; the rest are the usual 万進 units.
_GROUP_UNITS: Final = ("", "万", "億", "兆", "京", "垓", "秭", "穣", "溝", "澗", "正", "載", "極")
_CURRENCY_WORDS: Final = {"$": "ドル", "¥": "円", "£": "ポンド", "€": "ユーロ"}

_THOUSANDS_SEPARATED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_CURRENCY_AMOUNT = re.compile(r"([$¥£€])([0-9.]*[0-9])")
_NUMBER = re.compile(r"([0-9]+)(?:\.([0-9]+))?")


def digits_to_words(text: str) -> str:
    """Replace every number in ``text`` (ASCII digits, after NFKC) with its kanji reading."""
    text = _THOUSANDS_SEPARATED.sub(lambda m: m[0].replace(",", ""), text)
    text = _CURRENCY_AMOUNT.sub(lambda m: m[2] + _CURRENCY_WORDS[m[1]], text)
    return _NUMBER.sub(lambda m: number_words(m[1], m[2]), text)


def number_words(integer: str, fraction: str | None = None) -> str:
    """Kanji reading of ``integer[.fraction]`` (strings of ASCII digits)."""
    words = integer_words(int(integer))
    fraction = (fraction or "").rstrip("0")  # num2words reads the value: 2.50 is 二点五
    if fraction:
        words += "点" + "".join(_DIGITS[int(digit)] for digit in fraction)
    return words


def integer_words(value: int) -> str:
    """零, 一, 十一, 千百, 一万千, 一億二千三百四十五万六千七百八十九 ..."""
    if value == 0:
        return _DIGITS[0]
    if value >= 10 ** (4 * len(_GROUP_UNITS)):
        return "".join(_DIGITS[int(digit)] for digit in str(value))
    words = []
    for unit in _GROUP_UNITS:
        value, group = divmod(value, 10_000)
        if group:
            words.append(_below_10000(group) + unit)
        if not value:
            break
    return "".join(reversed(words))


def _below_10000(value: int) -> str:
    """1..9999: the digit 1 is silent before 千, 百 and 十 (千百十一), spoken alone (一)."""
    words = []
    for power, unit in ((1000, "千"), (100, "百"), (10, "十")):
        digit, value = divmod(value, power)
        if digit:
            words.append(("" if digit == 1 else _DIGITS[digit]) + unit)
    if value:
        words.append(_DIGITS[value])
    return "".join(words)
