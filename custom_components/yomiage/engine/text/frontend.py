"""The text front end the engine uses: normalise, split into sentences, read with OpenJTalk.

Thread-safe: a Frontend holds no state, and every OpenJTalk call goes through one process-wide
lock (openjtalk.py), so any number of threads may share one.
"""

from __future__ import annotations

from ..errors import InvalidTextError
from . import openjtalk
from .g2p import g2p, spoken_words
from .kana import LONG_VOWEL
from .normalize import has_speakable, is_normalized, normalize
from .sequence import PhoneSequence, to_sequence
from .split import split_sentences
from .symbols import PAD, PUNCTUATIONS

__all__ = ["Frontend", "PhoneSequence", "katakana"]

_SILENT = PUNCTUATIONS | {PAD, LONG_VOWEL}
# How punctuation shows in a katakana reading (quotes and dashes are not shown).
_READING_MARKS = str.maketrans({",": "、", ".": "。", "!": "！", "?": "？", "'": None, "-": None})


class Frontend:
    """Text -> normalised sentences -> SBV2 JP-Extra phone sequences."""

    def sentences(self, text: str, *, required: bool = True) -> list[PhoneSequence]:
        """The sentences of ``text``, each normalised and read by OpenJTalk once: the split asks
        whether a piece is speakable by reading it, and a sentence that is such a piece keeps
        that reading. ``required``: raise InvalidTextError where nothing is speakable (else
        return [])."""
        readings: dict[str, PhoneSequence | None] = {}

        def read(piece: str) -> PhoneSequence | None:
            if piece not in readings:
                readings[piece] = _sequence(normalize(piece))
            return readings[piece]

        pieces = split_sentences(_checked(text), lambda piece: read(piece) is not None)
        sequences = [sequence for piece in pieces if (sequence := read(piece)) is not None]
        if not sequences and required:
            raise InvalidTextError(f"nothing speakable in {_shown(text)}")
        return sequences

    def analyse(self, normalized_text: str, add_blank: bool = True) -> PhoneSequence:
        """Phone ids, tones, languages and word2ph of one normalised sentence (or several)."""
        text = _checked(normalized_text)
        if not is_normalized(text):
            raise ValueError(f"analyse() wants normalised text (Frontend.normalize): {text!r}")
        sequence = _sequence(text, add_blank)
        if sequence is None:
            raise InvalidTextError(f"nothing speakable in {_shown(text)}")
        return sequence

    def load_dictionaries(self) -> None:
        """Map the dictionaries OpenJTalk's readings use (some only on first need) now."""
        openjtalk.load_dictionaries()

    def reading(self, text: str) -> list[str]:
        """Katakana reading of each sentence (punctuation as 、。！？)."""
        return [katakana(sentence.text) for sentence in self.sentences(text)]


def _checked(text: str) -> str:
    if not isinstance(text, str):
        raise InvalidTextError(f"text must be a string, not {type(text).__name__}")
    if not text.strip():
        raise InvalidTextError("text is empty")
    return text


def _sequence(normalized: str, add_blank: bool = True) -> PhoneSequence | None:
    """The phone sequence of normalised text, or None if OpenJTalk finds nothing to say in it."""
    if not has_speakable(normalized):
        return None
    reading = g2p(normalized)
    if all(phone in _SILENT for phone in reading.phones):
        return None
    return to_sequence(normalized, reading, add_blank)


def katakana(sentence: str) -> str:
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
