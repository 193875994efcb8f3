"""Every number no other rule claimed: signs, decimals, thousands separators, digit codes.

"-3" → マイナス三, "3.14" → 三点一四, "1,200" → 千二百, "090-1234-5678" → ゼロ九ゼロの一二三四の…
Runs last among the number rules, so that afterwards no ASCII digit is left for the normaliser's
own number handling (which reads 五分 as ごぶ; see counters.py).
"""

from __future__ import annotations

import re

from . import numerals

# Three or more hyphenated digit groups (phone numbers) and postcodes ("〒123-4567") are codes:
# read digit by digit, with の between the groups as Japanese reads them. The postal mark is
# read as what it means (OpenJTalk has no reading for it).
_CODE = re.compile(r"(?<![A-Za-z0-9.\-])\d+(?:-\d+){2,}(?![\d.]|-\d)")
_POSTCODE = re.compile(r"〒[ \t]*(\d{3}-\d{4})(?![\d.]|-\d)")
# A sign counts only where it cannot be a hyphen or an operator between two words or numbers.
_NUMBER = re.compile(
    r"(?:(?<![A-Za-z0-9)\].,])([-+−±])(?=\d))?(?<![0-9])"
    r"(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(\d+))?"
)


def _code_digits(code: str) -> str:
    return "の".join(numerals.digits(group) for group in code.split("-"))


def read_plain_numbers(text: str) -> str:
    """Rewrite every remaining run of ASCII digits as kanji numerals."""
    if not any(c.isdigit() for c in text):
        return text
    text = _POSTCODE.sub(lambda m: "郵便番号" + _code_digits(m.group(1)), text)
    text = _CODE.sub(lambda m: _code_digits(m.group(0)), text)
    return _NUMBER.sub(lambda m: numerals.from_match(m), text)
