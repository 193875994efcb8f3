"""Phones and accent tones (0 low, 1 high) from OpenJTalk full-context labels.

Punctuation leaves no phone in the labels (only pauses), so this gives the spoken phones alone;
g2p.py puts the punctuation back. Per accent phrase the pitch starts at level 0, rises after the
first mora when the second is high, and falls after the accent nucleus; the levels of a phrase are
then shifted so the lowest is 0 (a phrase that starts high and falls, -1/0, becomes 1/0). This is
the ESPnet/r9y9 prosody-mark reading of the labels that SBV2 uses, written as levels directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_PHONE: Final = re.compile(r"-(.+?)\+")
# /A:a1+a2+a3/ — a1: mora position relative to the accent nucleus, a2: mora position in the
# accent phrase (from 1), a3: the same counted from the phrase end. /F:f1_ — morae in the phrase.
_ACCENT: Final = re.compile(r"/A:(-?\d+|xx)\+(\d+|xx)\+(\d+|xx)/")
_PHRASE_MORAE: Final = re.compile(r"/F:(\d+|xx)_")
_MORA_ENDS: Final = frozenset(("a", "i", "u", "e", "o", "N", "q"))  # a mora ends in one of these
_DEVOICED: Final = frozenset("AIUEO")
_SILENCE: Final = "sil"
_PAUSE: Final = "pau"


@dataclass(frozen=True)
class _LabelPhone:
    phone: str
    to_nucleus: int | None  # a1
    position: int | None  # a2
    from_end: int | None  # a3
    phrase_morae: int | None  # f1


@dataclass(frozen=True)
class PhoneTone:
    phone: str
    tone: int


def phone_tones(labels: list[str]) -> list[PhoneTone]:
    """Spoken phones (devoiced vowels as plain vowels, っ as "q") with their tones."""
    parsed = [_parse(label) for label in labels]
    result: list[PhoneTone] = []
    phrase: list[PhoneTone] = []
    level = 0
    for index, current in enumerate(parsed):
        following = parsed[index + 1] if index + 1 < len(parsed) else None
        if current.phone in (_SILENCE, _PAUSE):
            result += _settled(phrase)
            phrase, level = [], 0
            continue
        phrase.append(PhoneTone(_spoken(current.phone), level))
        next_position = following.position if following else None
        if _ends_phrase(current, next_position):
            result += _settled(phrase)
            phrase, level = [], 0
        elif _falls_after(current, next_position):
            level -= 1
        elif current.position == 1 and next_position == 2:
            level += 1
    return result + _settled(phrase)


def _parse(label: str) -> _LabelPhone:
    phone = _PHONE.search(label)
    accent = _ACCENT.search(label)
    morae = _PHRASE_MORAE.search(label)
    if phone is None:
        raise ValueError(f"not an OpenJTalk full-context label: {label!r}")
    a1, a2, a3 = accent.groups() if accent else ("xx", "xx", "xx")
    return _LabelPhone(
        phone=phone[1],
        to_nucleus=_number(a1),
        position=_number(a2),
        from_end=_number(a3),
        phrase_morae=_number(morae[1]) if morae else None,
    )


def _number(field: str) -> int | None:
    return None if field == "xx" else int(field)


def _spoken(phone: str) -> str:
    if phone in _DEVOICED:  # devoiced vowel: SBV2 has no separate phone for it
        return phone.lower()
    return "q" if phone == "cl" else phone


def _ends_phrase(current: _LabelPhone, next_position: int | None) -> bool:
    return current.from_end == 1 and next_position == 1 and _spoken(current.phone) in _MORA_ENDS


def _falls_after(current: _LabelPhone, next_position: int | None) -> bool:
    """After the nucleus mora's last phone, unless the nucleus ends the phrase."""
    return (
        current.to_nucleus == 0
        and current.position is not None
        and next_position == current.position + 1
        and current.position != current.phrase_morae
    )


def _settled(phrase: list[PhoneTone]) -> list[PhoneTone]:
    """Shift a phrase's levels so the lowest is 0; SBV2 knows only two tones."""
    if not phrase:
        return []
    lowest = min(item.tone for item in phrase)
    return [PhoneTone(item.phone, min(item.tone - lowest, 1)) for item in phrase]
