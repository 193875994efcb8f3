"""Katakana for English words the lexicon does not know, from the e2k character model.

Why e2k (C2K, "turbo" variant): measured on 40 Home-Assistant-ish words (home, bluetooth,
thermostat, nanoleaf, switchbot, dishwasher, notification …) against hand-written katakana:

    e2k 0.8.1 C2K base    exact 34/40, within one edit 38/40, 14 ms/word, weights 4.4 MB
    e2k 0.8.1 C2K turbo   exact 34/40, within one edit 38/40,  5 ms/word, weights 1.1 MB
    alkana 0.0.3          exact 14/40, within one edit 21/40, no answer for 14 words

e2k is pure Python + numpy with its weights inside the wheel (py3-none-any, so cp313/cp314 on
x86_64 and aarch64 alike), never downloads anything, loads in ~10 ms after a ~170 ms import, and is
public domain (Unlicense). alkana is a plain dictionary (1.8 MB), misses brand names and most
HA words, and is GPL-2.0, which an Apache-2.0 integration cannot depend on. Turbo scores the same
as base at a third of the time, which matters on a Raspberry Pi.

The model is loaded on first use (most messages never need it) and answers are cached. If e2k is
not installed or fails, callers fall back to spelling the word letter by letter.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from typing import Protocol

_LOGGER = logging.getLogger(__name__)
_KATAKANA = re.compile(r"[\u30a1-\u30fc]+")
_MODEL_INPUT = re.compile(r"[a-z']+")
# Words longer than this are not names or loanwords in a message; the model's output is capped
# at a similar length anyway.
_MAX_WORD_LENGTH = 24


class _Transliterator(Protocol):
    def __call__(self, word: str) -> str: ...


class _Model:
    """Loads e2k once, on first use, from any thread; remembers a failed import."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._transliterate: _Transliterator | None = None
        self._unavailable = False

    def _load(self) -> _Transliterator | None:
        try:
            from e2k import C2K

            model: _Transliterator = C2K(model="turbo")
        except Exception as err:  # missing package or unreadable weights: spell instead
            _LOGGER.warning("English-to-katakana model unavailable (%s); spelling words", err)
            self._unavailable = True
            return None
        return model

    def katakana(self, word: str) -> str | None:
        with self._lock:
            if self._transliterate is None and not self._unavailable:
                self._transliterate = self._load()
            if self._transliterate is None:
                return None
            return self._transliterate(word)


_MODEL = _Model()


@functools.lru_cache(maxsize=2048)
def guess_katakana(word: str) -> str | None:
    """The model's katakana for one lowercase English word, or None when it has no good answer."""
    word = word.lower().replace("’", "'")
    if not _MODEL_INPUT.fullmatch(word) or len(word) > _MAX_WORD_LENGTH:
        return None
    try:
        reading = _MODEL.katakana(word)
    except Exception as err:  # a model bug must not take the message down with it
        _LOGGER.debug("e2k failed on %r: %s", word, err)
        return None
    if reading is None or not _KATAKANA.fullmatch(reading):
        return None
    return reading
