"""Clock times: "7:30", "07:05:09", "午後7:30", "7:30 PM", "7pm" → 七時サンジュップン, 午後七時 ….

Hours 0–24 with two-digit minutes are times; anything else with a colon ("25:61", "3:2") is left
alone. Twelve-hour times follow the Japanese convention: 12 AM is 午前零時 and 12 PM 午後零時.
Hour zero is 零時 (れいじ), the usual reading of midnight; a zero minute is not spoken. Minutes
come in katakana from the counter rule (see counters.py: 七時五分 would read しちじごぶ).
"""

from __future__ import annotations

import re

from . import numerals
from .counters import spoken_count

# "am", "PM", "a.m." — a final dot at the end of a line is left: it also ends the sentence.
_MERIDIEM = r"(?:[AaPp]\.?[Mm](?:\.(?![ \t]*$))?)"
_TIME = re.compile(
    rf"(?:(午前|午後|(?<![A-Za-z]){_MERIDIEM})[ \t]*)?"
    r"(?<![\d:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:]|\.\d)"
    rf"(?:[ \t]*({_MERIDIEM})(?![A-Za-z]))?"
)
# "7pm", "11 a.m.": an hour with a twelve-hour marker and no minutes.
_HOUR_MERIDIEM = re.compile(rf"(?<![A-Za-z0-9.:])(\d{{1,2}})[ \t]*({_MERIDIEM})(?![A-Za-z])")

_LAST_HOUR = 24


def _prefix(marker: str | None) -> str:
    """午後 for 午後, pm or P.M.; 午前 for 午前, AM or a.m.; nothing without a marker."""
    if not marker:
        return ""
    if marker in ("午前", "午後"):
        return marker
    return "午後" if marker[0] in "Pp" else "午前"


def _hour(hour: int) -> str:
    return "零時" if hour == 0 else f"{numerals.integer(hour)}時"


def _twelve_hour(hour: int) -> int | None:
    """The hour to speak after 午前/午後 (12 → 零), or None when it is no twelve-hour hour."""
    if not 0 <= hour <= 12:
        return None
    return 0 if hour == 12 else hour


def _spoken(prefix: str, hour: int, minute: int, second: int) -> str:
    spoken = prefix + _hour(hour)
    if minute or second:
        spoken += spoken_count(str(minute), "分")  # 五分 would read ごぶ
    if second:
        spoken += f"{numerals.integer(second)}秒"
    return spoken


def _time(match: re.Match[str]) -> str:
    before, hour_text, minute_text, second_text, after = match.groups()
    hour, minute, second = int(hour_text), int(minute_text), int(second_text or 0)
    if hour > _LAST_HOUR or minute > 59 or second > 59 or (hour == _LAST_HOUR and minute + second):
        return match.group(0)
    marker = after or before
    if marker and marker not in ("午前", "午後"):
        twelve = _twelve_hour(hour)
        if twelve is None:
            return match.group(0)
        hour = twelve
    return _spoken(_prefix(marker), hour, minute, second)


def _hour_meridiem(match: re.Match[str]) -> str:
    twelve = _twelve_hour(int(match.group(1)))
    if twelve is None:
        return match.group(0)
    return _prefix(match.group(2)) + _hour(twelve)


def read_clock_times(text: str) -> str:
    """Rewrite H:MM(:SS) times, with or without 午前/午後/AM/PM, and "7pm"-style hours."""
    if ":" in text:
        text = _TIME.sub(_time, text)
    return _HOUR_MERIDIEM.sub(_hour_meridiem, text)
