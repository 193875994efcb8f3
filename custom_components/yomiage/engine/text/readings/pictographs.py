"""Emoji and pictographs dropped: OpenJTalk cannot read them, and BERT would see noise.

A dropped pictograph leaves a space, so that "晴れ☀️気温" does not glue two words together
(the normaliser removes whitespace later, after sentence splitting has seen it).
"""

from __future__ import annotations

import re

# Whole blocks that hold only pictographs, plus the invisible characters emoji sequences are made
# of (variation selectors, zero-width joiner, keycap, tag characters). ○ (read マル), arrows used as
# text and math symbols are left for OpenJTalk and the normaliser.
_PICTOGRAPH_RANGES = (
    # mahjong … enclosed alphanumerics (flags), then pictographs … extended-A (skin tones too);
    # not the enclosed ideographs 🈚 🈵 in between: NFKC turns them into readable kanji (無, 満)
    "\U0001f000-\U0001f1ff\U0001f300-\U0001faff",
    "\u2600-\u27bf",  # miscellaneous symbols, dingbats (⚠ ☀ ✅ ❌)
    "\u2b00-\u2bff",  # miscellaneous symbols and arrows (⭐ ⬆)
    "\u231a\u231b\u2328\u23cf\u23e9-\u23fa",  # watch, hourglass, keyboard, media and clock emoji
    "\u25a0-\u25c9\u25cc-\u25ff",  # geometric shapes except ○ (U+25CB) and ◎ (U+25CE)
    "\u2190-\u21ff",  # arrows
    "\u00a9\u00ae\u2122\u2120",  # © ® ™ ℠ (NFKC would turn ™ into the letters TM)
    "\u3030\u303d",  # wavy dash, part alternation mark (not ㊗ ㊙: NFKC makes them 祝 and 秘)
)
_INVISIBLE = "\ufe00-\ufe0f\u200d\u20e3\U000e0020-\U000e007f\U000e0100-\U000e01ef"

_PICTOGRAPHS = re.compile(f"[{''.join(_PICTOGRAPH_RANGES)}]+")
_INVISIBLES = re.compile(f"[{_INVISIBLE}]+")
_SPACES = re.compile(r"[ \t]{2,}")


def drop_pictographs(text: str) -> str:
    """Replace each run of pictographs with one space and remove emoji joiners/selectors."""
    text = _INVISIBLES.sub("", text)
    if not _PICTOGRAPHS.search(text):
        return text
    text = _PICTOGRAPHS.sub(" ", text)
    return _SPACES.sub(" ", text).strip(" ")
