"""BERT character tokenizer: text -> DeBERTa input ids, without transformers.

It mirrors transformers' ``BertJapaneseTokenizer`` with ``word_tokenizer_type="basic"`` and
``subword_tokenizer_type="character"`` (the tokenizer of ku-nlp/deberta-v2-large-japanese-char-wwm);
tests/tools/test_tokenizer_parity.py proves the ids equal. transformers would cost seconds of import
time and hundreds of MB inside Home Assistant, so the few rules are written out here:

1. the special-token strings ("[MASK]", ...) in the text stay whole and map to their ids;
2. the rest is cleaned: NUL, U+FFFD and control/format characters (Unicode category C*) are
   dropped, whitespace (space, tab, CR, LF, category Zs) becomes a separator;
3. NFC, then split on whitespace (``str.split``, so U+2028/U+2029 separate too) and around each
   punctuation character (ASCII symbols and category P*);
4. each piece is NFKC-normalised and split into characters: one id per character, [UNK] if the
   character is not in the vocabulary. NFKC may change the length ("…" -> "...", "ｶﾞ" -> "ガ",
   "㍻" -> "平成"), so one id per input character holds only for text that is already NFKC and
   free of whitespace and control characters; ``characters()`` shows what BERT really sees.

No lower-casing, no accent stripping (``do_lower_case`` is false in the published model). Unicode
tables are Python's, so characters assigned after the running Python's Unicode version count as
control characters (category Cn) and are dropped, as transformers on that Python would do.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray

from ..errors import BundleError

VOCAB_FILE = "vocab.txt"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"

DEFAULT_SPECIALS: Mapping[str, str] = MappingProxyType(
    {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    }
)
# What tokenizer_config.json must say for these rules to be the reference's rules.
REQUIRED_SETTINGS: Mapping[str, object] = MappingProxyType(
    {
        "word_tokenizer_type": "basic",
        "subword_tokenizer_type": "character",
        "do_lower_case": False,
        "do_word_tokenize": True,
        "do_subword_tokenize": True,
    }
)

# Every non-letter, non-digit ASCII character counts as punctuation (as in BERT's BasicTokenizer).
_ASCII_PUNCTUATION = frozenset(chr(cp) for cp in range(33, 127) if not chr(cp).isalnum())


@dataclass(frozen=True, slots=True)
class CharTokenizer:
    """Immutable, hence safe to share between threads. Build it with ``from_dir``."""

    vocab: Mapping[str, int]  # character (or special token) -> id
    specials: Mapping[str, str]  # "pad_token" / "unk_token" / ... -> token text
    _special_split: re.Pattern[str]

    @classmethod
    def from_dir(cls, folder: Path) -> CharTokenizer:
        """Read vocab.txt, tokenizer_config.json and, if present, special_tokens_map.json.

        Raises ``BundleError`` naming the file for a missing, unreadable or unsupported one.
        """
        if not folder.is_dir():
            raise BundleError(str(folder), "tokenizer folder not found")
        config = _read_config(folder / CONFIG_FILE)
        specials = _read_specials(folder / SPECIAL_TOKENS_FILE, config)
        vocab = _read_vocab(folder / VOCAB_FILE, specials.values())
        return cls.from_vocab(vocab, specials)

    @classmethod
    def from_vocab(
        cls, vocab: Mapping[str, int], specials: Mapping[str, str] = DEFAULT_SPECIALS
    ) -> CharTokenizer:
        """From an in-memory vocabulary (token -> id) that holds every special token."""
        missing = sorted(set(specials.values()) - set(vocab))
        if missing:
            raise ValueError(f"vocabulary lacks special tokens {missing}")
        # Longest first: the leftmost, longest special token wins, as in transformers' trie.
        ordered = sorted(set(specials.values()), key=len, reverse=True)
        pattern = re.compile("(" + "|".join(re.escape(token) for token in ordered) + ")")
        return cls(MappingProxyType(dict(vocab)), MappingProxyType(dict(specials)), pattern)

    @property
    def vocab_size(self) -> int:
        """Rows the BERT embedding must have: one past the largest id."""
        return max(self.vocab.values()) + 1

    @property
    def pad_id(self) -> int:
        return self.vocab[self.specials["pad_token"]]

    @property
    def unk_id(self) -> int:
        return self.vocab[self.specials["unk_token"]]

    @property
    def cls_id(self) -> int:
        return self.vocab[self.specials["cls_token"]]

    @property
    def sep_id(self) -> int:
        return self.vocab[self.specials["sep_token"]]

    def characters(self, text: str) -> list[str]:
        """What BERT sees of ``text`` (no [CLS]/[SEP]): characters, and special tokens whole."""
        tokens: list[str] = []
        for index, segment in enumerate(self._special_split.split(text)):
            if index % 2:  # re.split puts the captured special tokens at odd positions
                tokens.append(segment)
            else:
                tokens.extend(_characters(segment))
        return tokens

    def encode(self, text: str) -> list[int]:
        """[CLS] + one id per character of ``characters(text)`` ([UNK] if unknown) + [SEP]."""
        unk = self.unk_id
        ids = [self.vocab.get(token, unk) for token in self.characters(text)]
        return [self.cls_id, *ids, self.sep_id]

    def encode_batch(self, texts: Sequence[str]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(input_ids, attention_mask)``, int64 [len(texts), longest], padded on the right with
        [PAD] (mask 0). No texts give two [0, 0] arrays."""
        rows = [self.encode(text) for text in texts]
        width = max((len(row) for row in rows), default=0)
        input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(rows), width), dtype=np.int64)
        for index, row in enumerate(rows):
            input_ids[index, : len(row)] = row
            attention_mask[index, : len(row)] = 1
        return input_ids, attention_mask


# --- the reference's text rules (transformers' BasicTokenizer + CharacterTokenizer) --------------


def _characters(segment: str) -> Iterator[str]:
    """Characters of a text segment that holds no special token."""
    cleaned = "".join(char for char in segment if _is_kept(char))
    # str.split() separates on every Unicode whitespace (all of category Zs, tab, CR, LF, U+2028,
    # ...): the reference first maps Zs/tab/CR/LF to " ", which NFC and this split make moot.
    for word in unicodedata.normalize("NFC", cleaned).split():
        for piece in _split_punctuation(word):
            yield from unicodedata.normalize("NFKC", piece)


def _is_kept(char: str) -> bool:
    if char in "\t\n\r":
        return True
    return char != "\ufffd" and not unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def _split_punctuation(word: str) -> Iterator[str]:
    """Each punctuation character alone, the runs between them whole (NFKC applies per piece)."""
    run_start = 0
    for index, char in enumerate(word):
        if _is_punctuation(char):
            if run_start < index:
                yield word[run_start:index]
            yield char
            run_start = index + 1
    if run_start < len(word):
        yield word[run_start:]


# --- files ----------------------------------------------------------------------------------------


def _read_json_object(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(str(path), "file missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BundleError(str(path), f"not readable as JSON ({err})") from None
    if not isinstance(data, dict):
        raise BundleError(str(path), "expected a JSON object")
    return data


def _read_config(path: Path) -> dict[str, object]:
    """tokenizer_config.json, checked to describe the tokenizer this module mirrors."""
    config = _read_json_object(path)
    kind = config.get("tokenizer_class", "BertJapaneseTokenizer")
    if kind != "BertJapaneseTokenizer":
        raise BundleError(str(path), f"tokenizer_class {kind!r} is not a BertJapaneseTokenizer")
    for key, wanted in REQUIRED_SETTINGS.items():
        value = config.get(key, wanted)
        if value != wanted:
            raise BundleError(str(path), f"{key} is {value!r}; only {wanted!r} is supported")
    return config


def _read_specials(path: Path, config: Mapping[str, object]) -> dict[str, str]:
    """Special token texts: defaults, then tokenizer_config.json, then special_tokens_map.json."""
    specials = dict(DEFAULT_SPECIALS)
    sources: list[tuple[Path, Mapping[str, object]]] = [(path.with_name(CONFIG_FILE), config)]
    if path.exists():
        sources.append((path, _read_json_object(path)))
    for source, data in sources:
        for role in DEFAULT_SPECIALS:
            if data.get(role) is not None:
                specials[role] = _token_text(source, role, data[role])
    return specials


def _token_text(path: Path, role: str, value: object) -> str:
    """A special token is a string or, in newer files, an object with a "content" string."""
    if isinstance(value, dict):
        value = value.get("content")
    if not isinstance(value, str) or not value:
        raise BundleError(str(path), f"{role} is not a token string")
    return value


def _read_vocab(path: Path, specials: Iterable[str]) -> dict[str, int]:
    """vocab.txt: one token per line, id = line number (a repeated token keeps its last line)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BundleError(str(path), "file missing") from None
    except OSError as err:
        raise BundleError(str(path), f"not readable ({err.strerror})") from None
    text = _decode_vocab(path, raw)
    # Line splitting as transformers' load_vocab does it (readlines in text mode: \n, \r\n, \r).
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    vocab = {token: index for index, token in enumerate(lines)}
    missing = [token for token in specials if token not in vocab]
    if missing:
        raise BundleError(str(path), f"special tokens missing: {', '.join(missing)}")
    return vocab


def _decode_vocab(path: Path, raw: bytes) -> str:
    if not raw.strip():
        raise BundleError(str(path), "empty vocabulary")
    if b"\x00" in raw:
        raise BundleError(str(path), "binary data (NUL bytes), not a vocabulary")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BundleError(str(path), f"not UTF-8 text (byte {err.start})") from None
