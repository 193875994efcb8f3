"""Sentence splitting of whole texts (``split_sentences``) and of streamed text.

A sentence ends after 。！？!? (with any further end marks, closing brackets 」』）… and spaces that
follow) or at a line break (the whitespace around it goes with the sentence before). A sentence
whose normalised text is longer than ``MAX_SENTENCE_CHARS`` is cut again after 、 and commas,
then at spaces, then (last resort) between two kana/kanji. A piece with nothing speakable in it
(punctuation, emoji) joins the piece before it, or the next one at the start of the text.

Nothing is dropped or reordered: the pieces concatenate to the input, and normalising each piece
gives the normalised text cut into parts (cuts fall where normalisation is local: after end marks,
commas and whitespace, never inside a number). Line breaks inside a piece are resolved by
``normalize`` (a line break ends a sentence: "." unless one already ends there).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from .normalize import CLOSING_MARKS, LINE_BREAKS, has_speakable, normalize
from .readings.links import URL

# Budget for one sentence, in characters of normalised text (= BERT tokens, the unit the engine
# batches). 80 characters are ~100-130 morae, 13-17 s of speech at a natural ~7.5 morae/s: more
# than almost any sentence people write or voices are trained on, so it cuts only run-ons; and
# short enough that the first sentence of a long text is ready soon on a Raspberry Pi (the engine
# speaks sentence by sentence) and that BERT's attention (quadratic in length) stays cheap.
MAX_SENTENCE_CHARS: Final = 80

_TERMINATORS: Final = "。｡！？!?"
# Straight quotes are left out of the closing marks: after "!" they as often open the next quote.
_CLOSERS: Final = CLOSING_MARKS.replace('"', "").replace("'", "")
_OPENERS: Final = "「『（(【《〈〔［[｛{“‘"
_BOUNDARY: Final = re.compile(
    rf"[{_TERMINATORS}][{_TERMINATORS}{re.escape(_CLOSERS)}\s]*|\s*[{LINE_BREAKS}]\s*"
)
_ENDS_AT_BOUNDARY: Final = re.compile(rf"(?:{_BOUNDARY.pattern})\Z")
_LINK_MARK_AT_END: Final = re.compile(rf"(?:{URL.pattern})[?!]\Z", URL.flags)
# Clause ends: 、 always; a comma unless a digit follows ("1,000" is one number).
_CLAUSE_END: Final = re.compile(r"(?:、|[,，](?![0-9０-９]))\s*")
_WORD_END: Final = re.compile(r"\s+")
# Characters between which a hard cut changes nothing but the cut: kana and kanji, but not
# small kana, ー, っ/ッ or ん/ン, which belong to the character before them.
_CUTTABLE: Final = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff\u3400-\u4dbf]")
_BOUND_TO_PREVIOUS: Final = frozenset("ぁぃぅぇぉっゃゅょゎゕゖんァィゥェォッャュョヮヵヶンー")

Speakable = Callable[[str], bool]


def is_speakable_text(text: str) -> bool:
    """Default test for a raw piece: its normalised text has more than punctuation in it."""
    return has_speakable(normalize(text))


def split_sentences(
    text: str, is_speakable: Speakable = is_speakable_text, budget: int = MAX_SENTENCE_CHARS
) -> list[str]:
    """Raw sentences of ``text``; [] for text with only whitespace, [text] if nothing in it is
    speakable."""
    return [
        piece
        for group in _groups(_raw_sentences(text), is_speakable)
        for piece in _fit(group, is_speakable, budget)
    ]


class SentenceAccumulator:
    """Collects streamed text and hands out the sentences that are complete.

    A sentence is complete once the text after it has started, or as soon as its end mark (or
    a line break) has arrived and it leaves no bracket open: an LLM that pauses after its
    first sentence (a tool call, a slow model) must not hold that sentence back. What arrives
    after a sentence already handed out (a closing bracket, an emoji, another end mark) is
    spoken with the next sentence, where it changes nothing, never again with this one. Fed
    in any pieces, the sentences concatenate to the text; a text that arrives in one piece
    gives the sentences ``split_sentences`` gives.
    """

    def __init__(
        self, is_speakable: Speakable = is_speakable_text, budget: int = MAX_SENTENCE_CHARS
    ) -> None:
        self._buffer = ""
        self._budget = budget
        self._known: dict[str, bool] = {}
        self._test = is_speakable

    def feed(self, piece: str) -> list[str]:
        """Add ``piece``; return the sentences completed by it (raw text)."""
        self._buffer += piece
        pieces = _raw_sentences(self._buffer)
        complete = len(pieces) if pieces and _ends_closed(pieces[-1]) else len(pieces) - 1
        groups = _groups(pieces[:complete], self._is_speakable) if complete > 0 else []
        if not groups or not self._is_speakable(groups[-1]):
            return []  # only marks so far: they go with the sentence that follows
        self._buffer = "".join(pieces[complete:])
        self._known = {}
        return [part for group in groups for part in self._fit(group)]

    def flush(self) -> list[str]:
        """The rest of the text as sentences (the stream has ended)."""
        text, self._buffer, self._known = self._buffer, "", {}
        return split_sentences(text, self._is_speakable, self._budget)

    def _fit(self, sentence: str) -> list[str]:
        return _fit(sentence, self._is_speakable, self._budget)

    def _is_speakable(self, text: str) -> bool:
        # Pieces before the last stay the same between feeds; test each only once.
        if text not in self._known:
            self._known[text] = self._test(text)
        return self._known[text]


def _ends_closed(sentence: str) -> bool:
    """Whether a raw sentence ends at a sentence boundary with every bracket it opened closed
    (straight quotes, which open and close alike, are not counted), and not with a ? or ! right
    after a web address, which may be the address going on (…/a?b=1)."""
    if _ENDS_AT_BOUNDARY.search(sentence) is None or _LINK_MARK_AT_END.search(sentence):
        return False
    depth = 0
    for char in sentence:
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth = max(depth - 1, 0)
    return depth == 0


def _raw_sentences(text: str) -> list[str]:
    """``text`` cut after each sentence boundary outside a web address (whose ? and ! belong to
    it: the address is read as one word, links.py)."""
    return _cut_after(_BOUNDARY, text, [match.span() for match in URL.finditer(text)])


def _cut_after(
    boundary: re.Pattern[str], text: str, keep: list[tuple[int, int]] | None = None
) -> list[str]:
    """``text`` cut after every match of ``boundary`` that starts outside the spans ``keep``
    (the pieces concatenate to ``text``)."""
    pieces, start = [], 0
    for match in boundary.finditer(text):
        if keep and any(low <= match.start() < high for low, high in keep):
            continue
        if match.end() > start:
            pieces.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _groups(pieces: list[str], is_speakable: Speakable) -> list[str]:
    """Join each unspeakable piece to the one before (leading ones to the first speakable)."""
    groups: list[str] = []
    leading = ""
    for piece in pieces:
        if not is_speakable(piece):
            if groups:
                groups[-1] += piece
            else:
                leading += piece
        else:
            groups.append(leading + piece)
            leading = ""
    if not groups and leading.strip():
        groups.append(leading)
    return groups


def _fit(sentence: str, is_speakable: Speakable, budget: int) -> list[str]:
    """Cut an over-long sentence: at clauses, then words, then between kana/kanji."""
    pieces = [sentence]
    for cut in (_clauses, _words, _kana_cuts):
        pieces = [
            part
            for piece in pieces
            for part in (_pack(cut(piece), budget) if _too_long(piece, budget) else [piece])
        ]
    return _groups(pieces, is_speakable) if len(pieces) > 1 else pieces


def _too_long(piece: str, budget: int) -> bool:
    return len(normalize(piece)) > budget


def _pack(parts: list[str], budget: int) -> list[str]:
    """Greedily join consecutive parts while the normalised result fits the budget."""
    packed: list[str] = []
    current = ""
    for part in parts:
        if current and _too_long(current + part, budget):
            packed.append(current)
            current = part
        else:
            current += part
    return [*packed, current] if current else packed


def _clauses(text: str) -> list[str]:
    return _cut_after(_CLAUSE_END, text)


def _words(text: str) -> list[str]:
    return _cut_after(_WORD_END, text)


def _kana_cuts(text: str) -> list[str]:
    """Single characters (or runs that must stay together) between which a cut is harmless."""
    parts: list[str] = []
    for index, char in enumerate(text):
        cuttable = (
            index > 0
            and _CUTTABLE.fullmatch(char) is not None
            and char not in _BOUND_TO_PREVIOUS
            and _CUTTABLE.fullmatch(text[index - 1]) is not None
        )
        if cuttable or not parts:
            parts.append(char)
        else:
            parts[-1] += char
    return parts
