"""Dates: "2026/11/29", "2026-11-29", "11/29(日)" → 二千二十六年十一月二十九日, …(日曜日).

A bare "M/D" is read as a date when it is a valid month and day, except the common fractions
1/2, 1/3, 2/3, 1/4 and 3/4 without a weekday after them: templates print those as amounts more
often than as 2 or 3 January (the fraction rule reads them).
"""

from __future__ import annotations

import re

from . import numerals

_WEEKDAY_KANJI = "月火水木金土日"
_WEEKDAY_ENGLISH = {
    "mon": "月",
    "tue": "火",
    "wed": "水",
    "thu": "木",
    "fri": "金",
    "sat": "土",
    "sun": "日",
}
_WEEKDAY = (
    r"[(\[]\s*([月火水木金土日]|(?i:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?)"
    r"\s*(?:[・,、/]\s*(祝))?\s*[)\]]"
)
_COMMON_FRACTIONS = frozenset({(1, 2), (1, 3), (2, 3), (1, 4), (3, 4)})

# Year, month and day with the same separator twice; no digit, dot or separator glued on.
_FULL_DATE = re.compile(r"(?<![\d./\-])(?<!\d:)(\d{4})([/.\-])(\d{1,2})\2(\d{1,2})(?![\d/.:]|-\d)")
_MONTH_DAY = re.compile(rf"(?<![\d./\-])(?<!\d:)(\d{{1,2}})/(\d{{1,2}})(?![\d/.])(\s*{_WEEKDAY})?")
# A weekday in brackets right after a day written in Japanese: "29日(日)", "3日（月・祝）".
_WEEKDAY_AFTER_DAY = re.compile(rf"(?<=日)\s*{_WEEKDAY}")


def _is_valid(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31


def _month_day(month: int, day: int) -> str:
    return f"{numerals.integer(month)}月{numerals.integer(day)}日"


def _weekday(day: str, holiday: str | None) -> str:
    """ "日" or "Sun" → "(日曜日)"; with 祝 → "(日曜日・祝日)"."""
    kanji = day if day in _WEEKDAY_KANJI else _WEEKDAY_ENGLISH[day[:3].lower()]
    return f"({kanji}曜日{'・祝日' if holiday else ''})"


def _full_date(match: re.Match[str]) -> str:
    year, month, day = int(match.group(1)), int(match.group(3)), int(match.group(4))
    if not _is_valid(month, day):
        return match.group(0)
    return f"{numerals.integer(year)}年{_month_day(month, day)}"


def _bare_month_day(match: re.Match[str]) -> str:
    month, day = int(match.group(1)), int(match.group(2))
    has_weekday = match.group(3) is not None
    if not _is_valid(month, day) or (not has_weekday and (month, day) in _COMMON_FRACTIONS):
        return match.group(0)
    weekday = _weekday(match.group(4), match.group(5)) if has_weekday else ""
    return _month_day(month, day) + weekday


def _weekday_after_day(match: re.Match[str]) -> str:
    return _weekday(match.group(1), match.group(2))


def read_dates(text: str) -> str:
    """Rewrite numeric dates and the weekday in brackets that often follows them."""
    if "/" in text or "-" in text or "." in text:
        text = _FULL_DATE.sub(_full_date, text)
    if "/" in text:
        text = _MONTH_DAY.sub(_bare_month_day, text)
    return _WEEKDAY_AFTER_DAY.sub(_weekday_after_day, text)
