"""The text front end the engine uses: normalise, split into sentences, read with OpenJTalk.

Thread-safe: a Frontend holds no state, and every OpenJTalk call goes through one process-wide
lock (openjtalk.py), so any number of threads may share one.
"""

from __future__ import annotations

from ..errors import InvalidTextError
from . import openjtalk
from .g2p import g2p, spoken_words, word_phones
from .kana import LONG_VOWEL
from .normalize import has_speakable, is_normalized, normalize
from .sequence import PhoneSequence, to_sequence
from .split import split_sentences
from .symbols import PAD, PUNCTUATIONS

__all__ = ["Frontend", "PhoneSequence"]

_SILENT = PUNCTUATIONS | {PAD, LONG_VOWEL}
# How punctuation shows in a katakana reading (quotes and dashes are not shown).
_READING_MARKS = str.maketrans({",": "、", ".": "。", "!": "！", "?": "？", "'": None, "-": None})


class Frontend:
    """Text -> normalised sentences -> SBV2 JP-Extra phone sequences."""

    def normalize(self, text: str) -> str:
        """``text`` as SBV2 normalises it (see normalize.py)."""
        return normalize(_checked(text))

    def split(self, text: str) -> list[str]:
        """Normalised sentences of ``text``, each with something speakable in it."""
        pieces = split_sentences(_checked(text), self.is_speakable)
        if not pieces or (len(pieces) == 1 and not self.is_speakable(pieces[0])):
            raise InvalidTextError(f"nothing speakable in {_shown(text)}")
        return [normalize(piece) for piece in pieces]

    def analyse(self, normalized_text: str, add_blank: bool = True) -> PhoneSequence:
        """Phone ids, tones, languages and word2ph of one normalised sentence (or several)."""
        text = _checked(normalized_text)
        if not is_normalized(text):
            raise ValueError(f"analyse() wants normalised text (Frontend.normalize): {text!r}")
        reading = g2p(text)
        if all(phone in _SILENT for phone in reading.phones):
            raise InvalidTextError(f"nothing speakable in {_shown(text)}")
        return to_sequence(text, reading, add_blank)

    def reading(self, text: str) -> list[str]:
        """Katakana reading of each sentence (punctuation as 、。！？)."""
        return [_katakana(sentence) for sentence in self.split(text)]

    def is_speakable(self, text: str) -> bool:
        """Whether OpenJTalk finds anything to say in ``text`` (raw or normalised)."""
        normalized = normalize(text) if isinstance(text, str) else ""
        if not has_speakable(normalized):
            return False
        return any(
            phone not in _SILENT
            for word in openjtalk.words(normalized)
            for phone in word_phones(word)
        )


def _checked(text: str) -> str:
    if not isinstance(text, str):
        raise InvalidTextError(f"text must be a string, not {type(text).__name__}")
    if not text.strip():
        raise InvalidTextError("text is empty")
    return text


def _katakana(sentence: str) -> str:
    """Spoken words by their reading (a ー that lengthens the word before, as in デショー,
    included), punctuation by its mark."""
    parts = []
    for word in spoken_words(openjtalk.words(sentence)):
        if any(phone not in _SILENT for phone in word.phones):
            parts.append(word.reading)
        else:
            parts.append(word.surface.translate(_READING_MARKS))
    return "".join(parts)


def _shown(text: str, limit: int = 40) -> str:
    """The text for an error message: one line, shortened."""
    one_line = " ".join(text.split())
    return repr(one_line if len(one_line) <= limit else one_line[: limit - 1] + "…")
