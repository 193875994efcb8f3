"""Arabic numbers written as kanji numerals, the form every later stage reads the same way.

Kanji numerals are used instead of digits because the SBV2-style normaliser that runs after
``rewrite()`` has its own (different) digit handling, while OpenJTalk reads kanji numerals with
the right counter sound changes (三本 → サンボン, 六階 → ロッカイ). Zero is written ゼロ: OpenJTalk
reads 零 as レー in most positions.
"""

from __future__ import annotations

import re

ZERO = "ゼロ"
_DIGITS = ("", "一", "二", "三", "四", "五", "六", "七", "八", "九")
_SMALL_UNITS = ((1000, "千"), (100, "百"), (10, "十"))
# Myriad groups, largest first; numbers at or above 10^20 are read digit by digit.
_LARGE_UNITS = ((10**16, "京"), (10**12, "兆"), (10**8, "億"), (10**4, "万"))
_MAX_NUMBER = 10**20
_MAX_DIGITS = 20

# A number as templates print it: optional sign, digits with optional thousands separators,
# optional decimal part. Group 1 is the sign, group 2 the integer part, group 3 the fraction.
NUMBER = r"([-+−±]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"

_NUMBER_RE = re.compile(NUMBER)
_SIGNS = {"-": "マイナス", "−": "マイナス", "+": "プラス", "±": "プラスマイナス", "": ""}


def _below_10000(n: int) -> str:
    """1 ≤ n < 10000 → 千二百三十四 (no 一 before 十, 百, 千)."""
    out = []
    for value, unit in _SMALL_UNITS:
        count, n = divmod(n, value)
        if count:
            out.append(("" if count == 1 else _DIGITS[count]) + unit)
    out.append(_DIGITS[n])
    return "".join(out)


def integer(n: int) -> str:
    """A non-negative integer as kanji numerals: 1200 → 千二百, 0 → ゼロ."""
    if n == 0:
        return ZERO
    if n >= _MAX_NUMBER:
        return digits(str(n))
    out = []
    for value, unit in _LARGE_UNITS:
        count, n = divmod(n, value)
        if count:
            out.append(_below_10000(count) + unit)
    if n:
        out.append(_below_10000(n))
    return "".join(out)


def digits(text: str) -> str:
    """Digit by digit, as phone numbers and codes are read: "090" → ゼロ九ゼロ."""
    return "".join(_DIGITS[int(d)] if d != "0" else ZERO for d in text if d.isdigit())


def _integer_part(text: str) -> str:
    """An integer written by a template; leading zeros ("007") mean a code, read digit by digit."""
    plain = text.replace(",", "")
    if (len(plain) > 1 and plain.startswith("0")) or len(plain) > _MAX_DIGITS:
        return digits(plain)
    return integer(int(plain))


def number(sign: str, whole: str, fraction: str | None) -> str:
    """The three groups of ``NUMBER`` as words: ("-", "3", "5") → マイナス三点五."""
    spoken = _SIGNS.get(sign, "") + _integer_part(whole)
    if fraction:
        spoken += "点" + digits(fraction)
    return spoken


def from_match(match: re.Match[str], first_group: int = 1) -> str:
    """Words for a ``NUMBER`` embedded in a larger pattern, starting at ``first_group``."""
    sign, whole, fraction = match.group(first_group, first_group + 1, first_group + 2)
    return number(sign or "", whole, fraction)


def parse(text: str) -> str:
    """Words for a string that is exactly one ``NUMBER`` (used by rules with their own regexes)."""
    match = _NUMBER_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a number: {text!r}")
    return from_match(match)
