"""Property tests for rewrite(): mixed Japanese, ASCII, template fragments and emoji."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import example, given, settings
from hypothesis import strategies as st

from custom_components.yomiage.engine.text.readings import RULES, rewrite

_KANA_KANJI = re.compile(r"[\u3040-\u309f\u30a0-\u30ff\u4e00-\u9fff\u3400-\u4dbf\u3005]")
# The one documented exception: a counter after digits that the counter rule writes as its
# katakana reading (5分 → ゴフン, because 五分 would read ごぶ).
_SPELLED_COUNTER = re.compile(r"(?<=\d)(?:分間|分|位|頭|号)")
# What the pictograph rule drops first (variation selectors, joiners, the keycap mark, tags): a
# keycap digit is a digit to the counter rule (1️⃣分 → イップン).
_INVISIBLE_MARKS = re.compile(
    "[\ufe00-\ufe0f\u200d\u20e3\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)

# Pieces that exercise the rules: what templates print, and what breaks naive regexes.
_FRAGMENTS = [
    "7:30",
    "12:00 AM",
    "25:61",
    "-3℃",
    "1,200円",
    "¥1,200",
    "$5.99",
    "11/29(日)",
    "2026-11-29",
    "10〜20分",
    "10-20",
    "-5〜-3℃",
    "090-1234-5678",
    "〒123-4567",
    "1/2",
    "3.14",
    "2.4GHz",
    "CO2 800ppm",
    "PM2.5",
    "5G",
    "Wi-Fi",
    "Home Assistant",
    "iPhone15",
    "USB-C",
    "Mr.",
    "https://example.com/a?b=1",
    "a@b.co",
    "⚠️",
    "👨\u200d👩\u200d👧",
    "1️⃣",
    "🇯🇵",
    "™",
    "℃",
    "%",
    "(",
    ")",
    "「",
    "」",
    "。",
    "、",
    "!",
    "?",
    "〜",
    "~",
    "-",
    ":",
    "/",
    ".",
    ",",
    " ",
    "\n",
]
_JAPANESE = st.text(
    alphabet="あいうえおかがきゃっんアイウエオカガキャッンー日本月火水分時度円人窓開", max_size=6
)
_ASCII = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=6)
_ANY = st.text(max_size=4)
_MESSAGE = st.lists(
    st.one_of(st.sampled_from(_FRAGMENTS), _JAPANESE, _ASCII, _ANY), max_size=12
).map("".join)


def _kana_kanji(text: str) -> list[str]:
    return _KANA_KANJI.findall(unicodedata.normalize("NFKC", text))


def _kana_kanji_to_keep(text: str) -> list[str]:
    visible = _INVISIBLE_MARKS.sub("", unicodedata.normalize("NFKC", text))
    return _kana_kanji(_SPELLED_COUNTER.sub("", visible))


def _is_subsequence(needle: list[str], haystack: str) -> bool:
    remaining = iter(haystack)
    return all(char in remaining for char in needle)


@settings(max_examples=400, deadline=None)
@given(_MESSAGE)
def test_no_rule_raises(text: str) -> None:
    """Each rule on its own never raises (rewrite()'s safety net would hide a crash)."""
    for rule in RULES:
        text = rule(text)


@settings(max_examples=400, deadline=None)
@given(_MESSAGE)
@example("1️⃣分")
def test_kana_and_kanji_are_kept(text: str) -> None:
    out = rewrite(text)
    if _kana_kanji(text):
        assert _kana_kanji(out), (text, out)
    assert _is_subsequence(_kana_kanji_to_keep(text), out), (text, out)


@settings(max_examples=400, deadline=None)
@given(_MESSAGE)
@example("7:307:30'A0A")  # letters and digits after an apostrophe were left behind
def test_no_ascii_letter_or_digit_survives(text: str) -> None:
    """Latin words become katakana and digits kanji, so the normaliser has nothing to guess."""
    out = rewrite(text)
    assert not re.search(r"[A-Za-z0-9]", out), (text, out)


@settings(max_examples=300, deadline=None)
@given(_MESSAGE)
@example("7:307:30'A0A")
def test_rewrite_is_idempotent(text: str) -> None:
    once = rewrite(text)
    assert rewrite(once) == once, (text, once)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="。、！？!?.,「」()『』", min_size=1, max_size=8), _MESSAGE)
def test_sentence_punctuation_is_kept(punctuation: str, text: str) -> None:
    """Sentence punctuation after a Japanese word comes out unchanged (NFKC aside)."""
    out = rewrite(f"窓{punctuation}")
    assert out == unicodedata.normalize("NFKC", f"窓{punctuation}")
    assert rewrite(text + "。").endswith("。")
