"""Currency symbols before an amount: "¥1,200", "$5.99", "€10" → 千二百円, 五点九九ドル, 十ユーロ.

"US$" reads as plain ドル (OpenJTalk reads 米ドル as ベードル). Amounts written with 円 after
them ("1,200円") need no rule: the plain number rule reads the number and OpenJTalk reads 円.
"""

from __future__ import annotations

import re

from . import numerals

_CURRENCIES = {"¥": "円", "$": "ドル", "€": "ユーロ", "£": "ポンド", "₩": "ウォン"}
_AMOUNT = re.compile(
    r"(?<![A-Za-z0-9])(US|[-−])?([¥$€£₩])[ \t]?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\d.]\d)"
)


def _amount(match: re.Match[str]) -> str:
    sign = "-" if match.group(1) in ("-", "−") else ""
    amount = numerals.number(sign, match.group(3), match.group(4))
    word = _CURRENCIES[match.group(2)]
    return amount + word


def read_currency(text: str) -> str:
    """Rewrite amounts that start with a currency symbol."""
    return _AMOUNT.sub(_amount, text)
