"""The only module that calls pyopenjtalk: typed words and labels, one process-wide lock.

pyopenjtalk keeps one global OpenJTalk instance (dictionary, Sudachi, the 何 model), so every call
in the process goes through ``_LOCK``, whichever Frontend makes it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyopenjtalk

if TYPE_CHECKING:  # pyopenjtalk-plus ships types; other OpenJTalk builds (tools/peer) do not
    from pyopenjtalk.types import NJDFeature

_LOCK = threading.Lock()
_DEVOICING_MARK = "’"  # OpenJTalk marks a devoiced mora in readings (デス’); phones ignore it
# A kanji of several readings (風: かぜ, ふう; also 時, 上, 方, 人...) sends pyopenjtalk-plus to
# Sudachi, whose dictionary it maps the first time: ~75 MB of file pages, 0.08 s on x86, ~0.3 s
# of a Pi 4B's CPU (docs/PERFORMANCE.md).
_SEVERAL_READINGS = "風。"


@dataclass(frozen=True)
class Word:
    """One OpenJTalk word: its surface (OpenJTalk writes it full-width) and katakana reading.

    ``reading`` is "、" for punctuation and for what OpenJTalk cannot read, and may be a
    full-width mark ("？", "！") for those marks.
    """

    surface: str
    reading: str


def analyse(text: str) -> tuple[list[Word], list[str]]:
    """Words and full-context labels of ``text`` (one OpenJTalk run)."""
    with _LOCK:
        features = pyopenjtalk.run_frontend(text)
        labels: list[str] = pyopenjtalk.make_label(features)
    return [_word(feature) for feature in features], labels


def words(text: str) -> list[Word]:
    """Words of ``text`` without labels (enough for readings)."""
    with _LOCK:
        features = pyopenjtalk.run_frontend(text)
    return [_word(feature) for feature in features]


def load_dictionaries() -> None:
    """Map every dictionary the readings use now, not in the first request that needs one."""
    words(_SEVERAL_READINGS)


def _word(feature: NJDFeature) -> Word:
    return Word(str(feature["string"]), str(feature["pron"]).replace(_DEVOICING_MARK, ""))
