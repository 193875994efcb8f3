"""User dictionary: words with their reading and accent, for names OpenJTalk gets wrong.

File format (CSV, UTF-8; chosen over JSON because people edit it in a text editor or a
spreadsheet, one word a line)::

    # surface,reading,accent      <- lines starting with # and blank lines are ignored
    surface,reading,accent        <- an optional header line
    読上,ヨミアゲ,0
    Yomiage,よみあげ,0

``reading`` is katakana or hiragana; ``accent`` is the accent nucleus: 0 for a flat word, n for a
fall after the n-th mora (1 ≤ n ≤ number of morae).

Japanese surfaces go into an OpenJTalk user dictionary (compiled with ``mecab_dict_index``,
applied with ``update_global_jtalk_with_user_dict``, reading protected from pyopenjtalk-plus's
later corrections). Latin surfaces ("Yomiage", "Home Assistant") never reach OpenJTalk as such,
because ``rewrite()`` turns Latin words into katakana first: they are registered with the English
rule instead, and their katakana reading is added to the OpenJTalk dictionary to carry the accent.

Applying a dictionary changes process-wide state (pyopenjtalk's global OpenJTalk and the English
rule). ``fingerprint`` identifies the content, for TTS cache keys.
"""

from __future__ import annotations

import csv
import hashlib
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args

from ...errors import YomiageError
from . import english

_HEADER = ("surface", "reading", "accent")
_FORMAT_VERSION = "yomiage-user-dict-1"
_KATAKANA = re.compile(r"[\u30a1-\u30fa\u30fc]+")
_SMALL_KANA = frozenset("ァィゥェォャュョヮ")
_LATIN_SURFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 .'&+\-]*")
_HAS_LATIN = re.compile(r"[A-Za-z]")
_FORBIDDEN_IN_SURFACE = re.compile(r"[,\"\s]")
_HIRAGANA_TO_KATAKANA = {code: code + 0x60 for code in range(0x3041, 0x3097)}
# A cost far below the system dictionary's (thousands) so that the user's word wins.
_WORD_COST = 1


class UserDictionaryError(YomiageError):
    """A user dictionary file or entry is unusable; the message names the file and line."""

    translation_key = "user_dictionary_error"


@dataclass(frozen=True)
class UserWord:
    """One entry: ``surface`` as written, ``reading`` in katakana, ``accent`` nucleus (0 = flat)."""

    surface: str
    reading: str
    accent: int

    @property
    def morae(self) -> int:
        return sum(1 for kana in self.reading if kana not in _SMALL_KANA)

    @property
    def is_latin(self) -> bool:
        return _HAS_LATIN.search(self.surface) is not None


def _to_katakana(reading: str) -> str:
    return reading.strip().translate(_HIRAGANA_TO_KATAKANA)


# The rules a word can break, each a text of its own where the integration says it.
WordProblem = Literal[
    "empty_surface",
    "surface_characters",
    "surface_mixed",
    "reading",
    "accent_number",
    "accent_range",
]
WORD_PROBLEMS: Final = get_args(WordProblem)


class WordError(ValueError):
    """An entry that is not a word: ``problem`` names the rule it breaks, ``values`` the fields
    it concerns (for a caller that says it in another language); the message in one line."""

    def __init__(self, problem: WordProblem, message: str, **values: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.values = values


def make_word(surface: str, reading: str, accent: str | int) -> UserWord:
    """Validate and build one entry; raises ``WordError``."""
    surface = surface.strip()
    if not surface:
        raise WordError("empty_surface", "empty surface")
    if _FORBIDDEN_IN_SURFACE.search(surface) and not _LATIN_SURFACE.fullmatch(surface):
        raise WordError(
            "surface_characters",
            f"surface {surface!r} contains a comma, quote or space",
            surface=surface,
        )
    if _HAS_LATIN.search(surface) and not _LATIN_SURFACE.fullmatch(surface):
        raise WordError(
            "surface_mixed",
            f"surface {surface!r} mixes Latin letters with other characters",
            surface=surface,
        )
    katakana = _to_katakana(reading)
    if not _KATAKANA.fullmatch(katakana):
        raise WordError(
            "reading", f"reading {reading!r} is not katakana or hiragana", reading=reading
        )
    try:
        nucleus = int(str(accent).strip())
    except ValueError:
        raise WordError(
            "accent_number", f"accent {accent!r} is not a whole number", accent=str(accent)
        ) from None
    word = UserWord(surface, katakana, nucleus)
    if not 0 <= nucleus <= word.morae:
        raise WordError(
            "accent_range",
            f"accent {nucleus} is outside 0..{word.morae} (morae of {katakana})",
            accent=str(nucleus),
            morae=str(word.morae),
            reading=katakana,
        )
    return word


def _data_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) for each line that is not blank, a comment or the header."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UserDictionaryError(f"{path}: cannot read user dictionary ({err})") from err
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if tuple(field.strip().lower() for field in row) == _HEADER:
            continue
        yield number, row


def _mecab_row(surface: str, word: UserWord) -> str:
    """One naist-jdic CSV line (MeCab assigns the context ids for empty id fields)."""
    full_width = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in surface)
    return (
        f"{full_width},,,{_WORD_COST},名詞,固有名詞,一般,*,*,*,{full_width},"
        f"{word.reading},{word.reading},{word.accent}/{word.morae},*"
    )


class UserDictionary:
    """A validated list of user words that can be compiled, applied and fingerprinted."""

    def __init__(self, words: Iterable[UserWord]) -> None:
        # The last entry for a surface wins, as it would when a person edits a file top to bottom.
        self.words: tuple[UserWord, ...] = tuple({w.surface: w for w in words}.values())

    @classmethod
    def from_file(cls, path: str | Path) -> UserDictionary:
        """Read a CSV user dictionary; errors name the file and line."""
        path = Path(path)
        words = []
        for number, row in _data_rows(path):
            if len(row) != len(_HEADER):
                raise UserDictionaryError(
                    f"{path}:{number}: expected 3 fields (surface,reading,accent), got {len(row)}"
                )
            try:
                words.append(make_word(*row))
            except ValueError as err:
                raise UserDictionaryError(f"{path}:{number}: {err}") from None
        return cls(words)

    @classmethod
    def from_entries(cls, entries: Sequence[tuple[str, str, int | str]]) -> UserDictionary:
        """Build from (surface, reading, accent) tuples, e.g. from integration options."""
        words = []
        for number, entry in enumerate(entries, start=1):
            try:
                words.append(make_word(*entry))
            except (TypeError, ValueError) as err:
                raise UserDictionaryError(f"user dictionary entry {number}: {err}") from None
        return cls(words)

    @property
    def fingerprint(self) -> str:
        """16 hex digits that change whenever an entry does (order does not matter)."""
        lines = sorted(f"{w.surface}\t{w.reading}\t{w.accent}" for w in self.words)
        digest = hashlib.sha256("\n".join([_FORMAT_VERSION, *lines]).encode("utf-8"))
        return digest.hexdigest()[:16]

    def _mecab_rows(self) -> list[str]:
        rows = []
        for word in self.words:
            # A Latin word reaches OpenJTalk as its katakana reading (see the module docstring).
            rows.append(_mecab_row(word.reading if word.is_latin else word.surface, word))
        return list(dict.fromkeys(rows))

    def compile(self, dest: str | Path) -> Path:
        """Compile to an OpenJTalk user dictionary file ``dest`` (.dic); returns its path."""
        dest = Path(dest)
        rows = self._mecab_rows()
        if not rows:
            raise UserDictionaryError(f"{dest}: the user dictionary has no entries to compile")
        if not dest.parent.is_dir():
            raise UserDictionaryError(f"{dest}: directory {dest.parent} does not exist")
        import pyopenjtalk

        with tempfile.TemporaryDirectory(dir=dest.parent) as scratch:
            source = Path(scratch) / "user_dict.csv"
            source.write_text("\n".join(rows) + "\n", encoding="utf-8")
            try:
                pyopenjtalk.mecab_dict_index(str(source), str(dest))
            except (RuntimeError, OSError) as err:
                problem = f"{dest}: OpenJTalk could not compile it ({err})"
                raise UserDictionaryError(problem) from err
        return dest

    def apply(self, cache_dir: str | Path | None = None) -> None:
        """Make OpenJTalk and ``rewrite()`` use these words (process-wide).

        The compiled file is kept in ``cache_dir`` (default: the system temp directory) under the
        fingerprint, so applying the same dictionary again does not recompile it.
        """
        latin = {word.surface: word.reading for word in self.words if word.is_latin}
        if not self.words:
            reset()
            return
        directory = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()) / "yomiage"
        directory.mkdir(parents=True, exist_ok=True)
        compiled = directory / f"user-{self.fingerprint}.dic"
        if not compiled.is_file():
            self.compile(compiled)
        import pyopenjtalk
        from pyopenjtalk.types import UserDictionaryEntry

        entry: UserDictionaryEntry = {"dic_path": str(compiled), "is_reading_protected": True}
        pyopenjtalk.update_global_jtalk_with_user_dict([entry])
        english.set_user_words(latin)

    def __len__(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:
        return f"UserDictionary({len(self.words)} words, fingerprint={self.fingerprint})"


def reset() -> None:
    """Back to OpenJTalk's own dictionary and the built-in English lexicon."""
    import pyopenjtalk

    pyopenjtalk.unset_user_dict()
    english.set_user_words({})
