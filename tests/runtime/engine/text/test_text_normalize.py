"""The normaliser: SBV2 parity (golden data from hayakoe), our own rules, and output invariants."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from custom_components.yomiage.engine.synthesis.tokenizer import DEFAULT_SPECIALS, CharTokenizer
from custom_components.yomiage.engine.text import normalize as normalize_module
from custom_components.yomiage.engine.text.normalize import (
    ends_sentence,
    has_speakable,
    is_normalized,
    map_punctuation,
    normalize,
)
from custom_components.yomiage.engine.text.numbers import digits_to_words, integer_words
from custom_components.yomiage.engine.text.symbols import PUNCTUATIONS
from tests.runtime.conftest import FIXTURES

GOLDEN: dict[str, Any] = json.loads((FIXTURES / "g2p_golden.json").read_text(encoding="utf-8"))
# Where hayakoe (the oracle) is not SBV2: it spells English words in katakana. SBV2 keeps the
# letters (OpenJTalk spells them); in Yomiage the readings rules own English words.
HAYAKOE_ONLY = {"ＡＢＣとabc": "ABCとabc"}

# Text like Home Assistant messages and then some: kana, kanji, marks, digits, emoji, spaces.
TEXT = st.text(
    alphabet=st.sampled_from(
        list("あいうかきゃっんーアイカッンヴァ今日天気雨。、！？!?,.「」『』（）()…~〜〆々〇")
        + list("0123456789０１ABCabcａｂαβ $¥€-—―‐%#😀🎉\u3099\u309b\u3000\t\n\r")
    ),
    max_size=60,
)


BERT_CHARACTERS = CharTokenizer.from_vocab(
    {token: index for index, token in enumerate(DEFAULT_SPECIALS.values())}
)


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The readings rules off: what is left is SBV2's normaliser and our differences."""
    monkeypatch.setattr(normalize_module, "rewrite", lambda text: text)


@pytest.mark.usefixtures("plain")
@pytest.mark.parametrize("case", GOLDEN["normalize"], ids=[c["input"] for c in GOLDEN["normalize"]])
def test_equals_sbv2(case: dict[str, str]) -> None:
    expected = HAYAKOE_ONLY.get(case["input"], case["text"])
    assert normalize(case["input"]) == expected


def test_readings_rules_run_first(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def rewrite(text: str) -> str:
        seen.append(text)
        return "ＡＢ　12～"  # full width, digits, a tilde: all still normalised afterwards

    monkeypatch.setattr(normalize_module, "rewrite", rewrite)
    assert normalize("元の文") == "AB十二ー"
    assert seen == ["元の文"]


@pytest.mark.usefixtures("plain")
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("一行目\n二行目", "一行目.二行目"),  # a line break ends a sentence
        ("一行目。\n二行目", "一行目.二行目"),  # ... once: SBV2 made this ".."
        ("「はい！」\r\n\n  次", "'はい!'次"),  # already ended, behind a closing bracket
        ("[MASK]と[CLS]", "'MASK'と'CLS'"),  # BERT's special tokens cannot survive
        ("\n\n  始まり", "始まり"),  # nothing before it
        ("終わり\n", "終わり."),
        ("12.\n1,000", "十二.千"),  # the dropped line break still separates the numbers
        ("なるほど…\n次", "なるほど...次"),
        ("二〇二四年", "二〇二四年"),  # 〇 kept (SBV2 drops it)
        ("1.50と2.500", "一点五と二点五"),
        ("3.14159265358979323846", "三点一四一五九二六五三五八九七九三二三八四六"),  # exact
        ("1" + "0" * 52, "一" + "零" * 52),  # beyond the largest unit: digit by digit
    ],
)
def test_our_rules(text: str, expected: str) -> None:
    assert normalize(text) == expected


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, "零"),
        (10, "十"),
        (11, "十一"),
        (1000, "千"),
        (1100, "千百"),
        (10_000, "一万"),
        (11_000, "一万千"),
        (10_000_000, "千万"),
        (123_456_789, "一億二千三百四十五万六千七百八十九"),
        (10**16, "一京"),
        (10**24, "一秭"),
        (10**48, "一極"),
    ],
)
def test_integer_words(value: int, words: str) -> None:
    assert integer_words(value) == words


def test_digits_to_words_handles_separators_currency_and_leading_zeros() -> None:
    assert digits_to_words("1,234,567円") == "百二十三万四千五百六十七円"
    assert digits_to_words("$5と€1.5と£20と¥300") == "五ドルと一点五ユーロと二十ポンドと三百円"
    assert digits_to_words("007") == "七"
    assert digits_to_words("12,34") == "十二,三十四"  # not a thousands separator


def test_map_punctuation_maps_to_sbv2_marks_and_drops_the_rest() -> None:
    assert map_punctuation("「あ」（い）、う。え！お？…・・・") == "'あ''い',う.え!お?......"
    assert map_punctuation("ジョン・スミス") == "ジョン,スミス"
    assert map_punctuation("A—B―C−D") == "A-B-C-D"
    assert map_punctuation("😀#%&＠a") == "a"


def test_helpers() -> None:
    assert has_speakable("あ.") and not has_speakable("!?..,'-") and not has_speakable("")
    assert ends_sentence("はい。」 ") and ends_sentence("え？") and not ends_sentence("はい、")
    assert (
        is_normalized("今日は晴れ.") and not is_normalized("今日は 晴れ") and not is_normalized("1")
    )


@pytest.mark.usefixtures("plain")
@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_output_is_what_bert_and_openjtalk_expect(text: str) -> None:
    result = normalize(text)
    assert not any(char.isspace() for char in result)
    assert unicodedata.normalize("NFKC", result) == result
    assert BERT_CHARACTERS.characters(result) == list(result)  # one BERT token per character
    assert not any(char.isdigit() for char in result)
    assert all(char in PUNCTUATIONS or char.isalpha() or char in "ー々〇" for char in result)
    assert is_normalized(result)
    assert normalize(result) == result
