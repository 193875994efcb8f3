"""Ranges between two quantities: "10〜20分", "7:00-9:00", "10℃~20℃" → "10から20分" ….

Only the separator is rewritten (to から); the quantities on either side are left for the rules
that follow (clock times, dates, units, numbers), so "10℃〜20℃" reads 十度から二十度. This rule
runs before those rules because afterwards a hyphen between two numbers can no longer be told
apart from a minus sign.
"""

from __future__ import annotations

import re

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


def _join(match: re.Match[str]) -> str:
    return f"{match.group(1)}から{match.group(2)}"


def mark_ranges(text: str) -> str:
    """Replace the separator of each quantity range with から."""
    return _RANGE.sub(_join, text)
