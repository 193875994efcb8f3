"""Fractions: "1/2", "3/4" → 二分の一, 四分の三 (Japanese says the denominator first).

Runs after the date rule, so a slash between two numbers that is still here is a fraction
(1/2, 2/3, 5/40 …); "24/7" and the like read as fractions too, which is rare in messages.
"""

from __future__ import annotations

import re

from . import numerals

_FRACTION = re.compile(r"(?<![A-Za-z0-9./:])(\d+)/(\d+)(?![\d/.]|[A-Za-z])")


def _fraction(match: re.Match[str]) -> str:
    numerator, denominator = (numerals.number("", part, None) for part in match.groups())
    if not match.group(2).strip("0"):  # "5/0" is no fraction; say what is written
        return f"{numerator}割る{denominator}"
    return f"{denominator}分の{numerator}"


def read_fractions(text: str) -> str:
    """Rewrite N/M between numbers as M分のN."""
    return _FRACTION.sub(_fraction, text) if "/" in text else text
