"""Numbers before counters whose kanji form OpenJTalk misreads: "5分" → ゴフン, not 五分 (ごぶ).

Written as kanji numerals, some number + counter pairs are also dictionary words with another
reading: 五分 (ごぶ, "half"), 十二分 (じゅうにぶん, "ample"), 十分 (じゅうぶん), 四位 (しい),
九頭 (くず). OpenJTalk's own digit reader gets these right ("5分" → ゴフン), so for these counters
the reading is taken from OpenJTalk's digit path and written in katakana. Other counters (本, 匹,
人, 回, 階, 時, 円, 度 …) read correctly as kanji numerals and are left to the number rule.

The measurement behind the list: every integer 0–24 and a few larger ones before 45 counters, in
12 contexts, kanji numerals versus digits; only these counters differed in a harmful way.
"""

from __future__ import annotations

import functools
import re

from . import numerals

# Longest first, so that 分間 wins over 分; 分の is a fraction ("5分の1"), not minutes.
_RISKY_COUNTERS = r"分間|分(?!の)|位|頭|号"
_COUNTED = re.compile(
    rf"(?<![A-Za-z0-9.,])(\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.(\d+))?({_RISKY_COUNTERS})"
)
_KATAKANA_READING = re.compile(r"[\u30a1-\u30fa\u30fc]+")
# OpenJTalk says はちふん for "8分" but はっぷん for "8分間"; はっぷん is the usual clock reading.
_PREFERRED = (("ハチフン", "ハップン"),)


@functools.lru_cache(maxsize=1024)
def spoken_count(number: str, counter: str) -> str:
    """Katakana for ``number`` + ``counter`` from OpenJTalk's digit reader ("5", "分" → ゴフン).

    Falls back to kanji numerals when OpenJTalk is unavailable or answers with something that is
    not a plain katakana word.
    """
    whole, _, fraction = number.partition(".")
    fallback = numerals.number("", whole, fraction or None) + counter
    try:
        import pyopenjtalk

        reading = str(pyopenjtalk.g2p(number.replace(",", "") + counter, kana=True))
    except Exception:  # no OpenJTalk (tools venv) or a broken dictionary: kanji still reads
        return fallback
    if not _KATAKANA_READING.fullmatch(reading):
        return fallback
    for said, preferred in _PREFERRED:
        reading = reading.replace(said, preferred)
    return reading


def _counted(match: re.Match[str]) -> str:
    whole, fraction, counter = match.groups()
    number = whole + (f".{fraction}" if fraction else "")
    return spoken_count(number, counter)


def read_counters(text: str) -> str:
    """Rewrite numbers before the counters that OpenJTalk misreads after kanji numerals."""
    return _COUNTED.sub(_counted, text)
