"""SBV2's phone symbol table, tone offset and language id for Japanese.

Published voices index their phone embedding by these ids, so the table must be SBV2's exactly:
the pad "_", then the sorted union of SBV2's Chinese, Japanese and English phone lists, then the
punctuation symbols and "SP", "UNK". A JP-Extra model uses only the Japanese part, but the ids of
its phones depend on the others through the sorting.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

PAD: Final = "_"

# The phone lists of SBV2's three languages (its nlp/symbols.py), in any order: only their sorted
# union matters.
_ZH_PHONES: Final = (  # noqa: SIM905 (a compact copy of the table)
    "E En a ai an ang ao b c ch d e ei en eng er f g h i i0 ia ian iang iao ie in ing iong ir "
    "iu j k l m n o ong ou p q r s sh t u ua uai uan uang ui un uo v van ve vn w x y z zh AA EE "
    "OO"
).split()
JP_PHONES: Final = (  # noqa: SIM905 (a compact copy of the table)
    "N a a: b by ch d dy e e: f g gy h hy i i: j k ky m my n ny o o: p py q r ry s sh t ts ty u "
    "u: w y z zy"
).split()
_EN_PHONES: Final = (  # noqa: SIM905 (a compact copy of the table)
    "aa ae ah ao aw ay b ch d dh eh er ey f g hh ih iy jh k l m n ng ow oy p r s sh t th uh uw "
    "V w y z zh"
).split()

# Punctuation that survives normalisation and is spoken as a phone of its own (pauses, rises).
PUNCTUATION_SYMBOLS: Final = ("!", "?", "…", ",", ".", "'", "-")
PUNCTUATIONS: Final = frozenset(PUNCTUATION_SYMBOLS)

SYMBOLS: Final = (
    PAD,
    *sorted(set(_ZH_PHONES) | set(JP_PHONES) | set(_EN_PHONES)),
    *PUNCTUATION_SYMBOLS,
    "SP",
    "UNK",
)
SYMBOL_TO_ID: Final = MappingProxyType({symbol: index for index, symbol in enumerate(SYMBOLS)})

PAD_ID: Final = SYMBOL_TO_ID[PAD]  # also the blank interleaved by add_blank
JP_TONE_START: Final = 6  # SBV2 numbers Chinese tones 0-5 first, Japanese 0/1 become 6/7
JP_LANGUAGE_ID: Final = 1  # SBV2's language ids: ZH 0, JP 1, EN 2
SENTENCE_END_IDS: Final = frozenset(SYMBOL_TO_ID[mark] for mark in (".", "!", "?"))
PUNCTUATION_IDS: Final = frozenset(SYMBOL_TO_ID[mark] for mark in PUNCTUATION_SYMBOLS)
