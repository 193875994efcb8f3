"""Readings for templated Home Assistant text (times, numbers with units, dates, English words).

``rewrite(text)`` runs before the SBV2-style normaliser and OpenJTalk. It turns what templates
print ("7:30", "-3℃", "1,200円", "11/29(日)", "10〜20分", "CO2 800ppm", "Wi-Fi", "⚠️") into kana
and kanji that OpenJTalk reads as a person would. Each rule family lives in its own module and is
one function ``str -> str``; the order below matters (see each step's comment).

Contract: never raises; keeps every kana and kanji (the one exception: a counter after digits
that OpenJTalk would misread as kanji is written as its katakana reading, 5分 → ゴフン); keeps
sentence punctuation and brackets (they are prosody boundaries). No ASCII letter or digit
survives, so the normaliser's own number handling never sees one.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable

from .clock import read_clock_times
from .counters import read_counters
from .currency import read_currency
from .dates import read_dates
from .english import read_english
from .fraction import read_fractions
from .links import read_links
from .pictographs import drop_pictographs
from .plain_numbers import read_plain_numbers
from .ranges import mark_ranges
from .units import read_units

__all__ = ["RULES", "rewrite"]

_LOGGER = logging.getLogger(__name__)


def _nfkc(text: str) -> str:
    """One spelling for digits, Latin letters and unit symbols (１２ → 12, ℃ → °C, ～ → ~)."""
    return unicodedata.normalize("NFKC", text)


RULES: tuple[Callable[[str], str], ...] = (
    drop_pictographs,  # before NFKC, which would turn ™ into letters
    _nfkc,
    read_links,  # before anything reads the digits and letters inside an address
    mark_ranges,  # before the number rules: afterwards "10-20" looks like "10" and "-20"
    read_dates,  # before clock times and fractions, which also use "/" and "-"
    read_clock_times,
    read_currency,
    read_units,
    read_counters,  # "5分" → ゴフン, before kanji numerals turn it into 五分 (ごぶ)
    read_fractions,
    read_english,  # after units ("2.4GHz"), before plain numbers ("iPhone15", "CO2")
    read_plain_numbers,  # last: whatever digits are left
)


def rewrite(text: str) -> str:
    """Rewrite ``text`` so that OpenJTalk reads it as a person would. Never raises.

    A rule that fails is skipped (and logged), and the message is still spoken.
    """
    if not isinstance(text, str):
        return ""
    for rule in RULES:
        try:
            text = rule(text)
        except Exception:  # one broken rule must not silence an alarm message
            _LOGGER.exception("reading rule %s failed; skipped", rule.__name__)
    return text
