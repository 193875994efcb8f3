"""The user dictionary as the options form holds it: text, one ``surface,reading,accent`` a line.

Kept as the text the user typed (comments and order survive the next edit) and parsed here;
the engine's ``make_word`` decides what a valid word is, so the form and the engine agree.
"""

from __future__ import annotations

import csv
from typing import Final

from .engine.text.readings.user_dict import UserDictionary, WordError, make_word

FIELDS: Final = ("surface", "reading", "accent")
# Japanese keyboards type a full-width comma just as easily.
_FULL_WIDTH_COMMA: Final = str.maketrans({"，": ","})


class UserWordsError(Exception):
    """A line of the text is not a word: ``key`` is a strings.json error, ``placeholders`` say
    which line and the fields its text names."""

    def __init__(self, key: str, line: int, detail: str, **values: str) -> None:
        super().__init__(f"line {line}: {detail}")
        self.key = key
        self.placeholders = {"line": str(line), **values}


def parse_user_words(text: str) -> UserDictionary:
    """Every word of ``text``; blank lines, ``#`` comments and a header line are skipped."""
    words = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = _fields(line)
        if fields is None:
            continue
        if len(fields) != len(FIELDS):
            count = str(len(fields))
            raise UserWordsError("dictionary_fields", number, f"{count} fields", count=count)
        try:
            words.append(make_word(*fields))
        except WordError as err:
            raise UserWordsError(
                f"dictionary_{err.problem}", number, str(err), **err.values
            ) from None
    return UserDictionary(words)


def _fields(line: str) -> list[str] | None:
    """The comma-separated fields of a word line, None for a line that holds no word."""
    stripped = line.strip().translate(_FULL_WIDTH_COMMA)
    if not stripped or stripped.startswith("#"):
        return None
    fields = next(csv.reader([stripped]))
    if tuple(field.strip().lower() for field in fields) == FIELDS:
        return None
    return fields
