"""Ranges between two quantities: "10〜20分", "7:00-9:00", "10℃~20℃" → "10分から20分" ….

The separator becomes から, and a bare number before it takes the counter or unit of the number
after it, as Japanese says a range: "3〜5日" → 3日から5日 (みっかからいつか), "10〜20分" →
10分から20分 (じゅっぷんからにじゅっぷん), "2-3人" → 2人から3人 (ふたりからさんにん). The
quantities are then left for the rules that follow (clock times, dates, units, numbers), so
"10℃〜20℃" reads 十度から二十度. This rule runs before those rules because afterwards a hyphen
between two numbers can no longer be told apart from a minus sign.
"""

from __future__ import annotations

import re

from .units import UNITS

# A quantity as it appears in a template: optional sign and currency, a digit, then digits and the
# separators of times, dates and decimals, then up to four unit characters (Latin letters, degree,
# percent, or Japanese counters such as 時, 人, 円). Possessive quantifiers stop the engine from
# backtracking into a shorter quantity, which would let "2026-11-29" pass for a range.
_QUANTITY = (
    r"[-+−]?[¥$€£]?\d[\d,.:/]*+"
    r"(?:[A-Za-z°℃%/²³]|[\u3040-\u30ff\u4e00-\u9fff]){0,4}+"
)
# Both hyphen forms and the dashes count, but a hyphen chain ("090-1234-5678", "2026-11-29") is
# a code or a date, never a range; the left side may not be glued to a Latin word or a
# separator.
_RANGE = re.compile(
    rf"(?<![A-Za-z0-9.\-/:−〒])({_QUANTITY})[ \t]*[〜~–—\-][ \t]*({_QUANTITY})(?![\-/]\d)"
)


# Counters a range shares (longest first, so that 時間 wins over 時); the units of units.py too.
_COUNTERS = (
    "日間", "週間", "か月", "ヶ月", "カ月", "時間", "分間", "秒間", "年間",
    "日", "分", "秒", "時", "人", "名", "度", "回", "個", "本", "枚", "年", "月", "歳", "才",
    "円", "階", "匹", "件", "台", "点", "倍", "位", "番", "杯", "冊", "歩", "泊", "代", "割",
)  # fmt: skip
_SHARED = re.compile(
    "|".join(re.escape(c) for c in sorted((*_COUNTERS, *UNITS), key=len, reverse=True))
)
_BARE_NUMBER = re.compile(r"[-+−]?\d[\d,.]*")
_NUMBER_PART = re.compile(r"[-+−]?[¥$€£]?\d[\d,.:/]*")


def _join(match: re.Match[str]) -> str:
    low, high = match.group(1), match.group(2)
    if _BARE_NUMBER.fullmatch(low):
        number = _NUMBER_PART.match(high)
        counter = number and _SHARED.match(high, number.end())
        if counter:
            low += counter.group()
    return f"{low}から{high}"


def mark_ranges(text: str) -> str:
    """Replace the separator of each quantity range with から."""
    return _RANGE.sub(_join, text)
