"""The runtime CharTokenizer gives the ids of transformers' BertJapaneseTokenizer (tiny vocabulary).

The engine cannot import transformers at run time, so this is where the hand-written rules
(custom_components/yomiage/engine/synthesis/tokenizer.py) are proven equal to the reference.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer, BertJapaneseTokenizer
from yomiage_engine.synthesis.tokenizer import CharTokenizer

from tools.bert_export import build_vocab, write_tokenizer

CORPUS = [
    "",
    "こんにちは。",
    "今日は良い天気ですね、散歩に行きましょう！",
    "カタカナとひらがなと漢字。",
    "ｶﾀｶﾅ ﾊﾝｶｸ ｶﾞｷﾞｸﾞ",  # half-width katakana: NFKC joins sound marks
    "Hello, world! 123 + 456 = 579?",
    "ＦＵＬＬ　ｗｉｄｔｈ　１２３！？",  # full-width ASCII and the ideographic space
    "  leading, trailing and  double  spaces  ",
    "tabs\tand\nnew\r\nlines",
    "e\t\u0301 e\u0301",  # a tab separates a mark from its base; without it NFC composes é
    "「括弧」『二重』【隅付き】（丸）〈山〉",
    "三点リーダー…と波ダッシュ〜と中黒・",
    "㍻と㌔と①と½と™",  # NFKC expands these into several characters
    "絵文字😀👍🏻と家族👨‍👩‍👧",  # unknown characters, zero-width joiner (Cf, dropped)
    "異体字葛󠄀と組み合わせ文字か\u3099",  # variation selector, combining voiced mark
    "e\u0301 versus é, and ¨ alone",  # NFC composes; NFKC of ¨ starts with a space
    "control\x00\x07\x1b\u200b\u200e\ufeff\ufffdchars",
    "line\u2028separator\u2029paragraph\u0085next",
    "Straße, naïve, ÆØÅ, Ελληνικά, русский, 한국어, 中文简体",
    "[CLS] inside [SEP] text [MASK] with [UNK] and [PAD]",
    "glued[MASK]tokens[SEP]and [mask] lower case",
    "記号!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "数字123と漢数字百二十三と小数3.14と負数-5",
    "ヴァイオリン、ゐゑ、ヶ月、々、〆",
    "\u3000\u3000全角スペースで始まる",
    "a=\u0338b<\u0338c",  # NFC composes = + U+0338 into ≠ before the punctuation split
    "x‗\u0338y",  # U+2017 is punctuation: NFKC sees it apart from U+0338 (see the wide vocab)
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer(folder, build_vocab())  # the tiny preset's vocabulary
    return folder


@pytest.fixture(scope="module")
def reference(folder: Path) -> BertJapaneseTokenizer:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert isinstance(tokenizer, BertJapaneseTokenizer)
    return tokenizer


@pytest.fixture(scope="module")
def ours(folder: Path) -> CharTokenizer:
    return CharTokenizer.from_dir(folder)


@pytest.mark.parametrize("text", CORPUS)
def test_same_ids(text: str, ours: CharTokenizer, reference: BertJapaneseTokenizer) -> None:
    assert ours.encode(text) == reference(text)["input_ids"]


def test_same_ids_when_spaces_and_combining_marks_are_in_the_vocabulary(tmp_path: Path) -> None:
    """Such a vocabulary makes visible where the text is cut before NFKC (the tiny one hides it).

    NFKC("‗") = " " + U+0333; normalised together with a following U+0338 the two marks swap
    (canonical order), normalised apart (the reference splits at punctuation) they do not.
    """
    marks = [chr(cp) for cp in range(0x300, 0x370)]
    write_tokenizer(tmp_path, [*build_vocab(), " ", *marks])
    reference = AutoTokenizer.from_pretrained(tmp_path)
    ours = CharTokenizer.from_dir(tmp_path)
    for text in [*CORPUS, "‗\u0338", "a‗\u0338‗\u0338b", "¨\u0323 ´\u0301"]:
        assert ours.encode(text) == reference(text)["input_ids"], repr(text)


def test_characters_are_the_reference_tokens(
    ours: CharTokenizer, reference: BertJapaneseTokenizer
) -> None:
    unk = ours.specials["unk_token"]
    for text in CORPUS:
        expected = reference.tokenize(text)
        seen = [char if char in ours.vocab else unk for char in ours.characters(text)]
        assert seen == expected, text


def test_corpus_exercises_unknowns_and_normalisation(
    ours: CharTokenizer, reference: BertJapaneseTokenizer
) -> None:
    """Guards the corpus itself: it must reach the rules that can go wrong."""
    ids = [i for text in CORPUS for i in reference(text)["input_ids"]]
    assert ids.count(ours.unk_id) > 10
    assert ours.characters("ｶﾞ…") == ["ガ", ".", ".", "."]
    assert ours.characters("a [MASK] b") == ["a", "[MASK]", "b"]


def test_padded_batch(ours: CharTokenizer, reference: BertJapaneseTokenizer) -> None:
    texts = ["短い", "", "これは少し長めの文です。", "Mixed 英語 text!"]
    input_ids, attention_mask = ours.encode_batch(texts)
    expected = reference(texts, padding=True, return_tensors="np")
    np.testing.assert_array_equal(input_ids, expected["input_ids"])
    np.testing.assert_array_equal(attention_mask, expected["attention_mask"])
    assert input_ids.dtype == attention_mask.dtype == np.int64


def random_text(rng: random.Random, vocab: list[str]) -> str:
    """Mostly vocabulary characters, salted with every kind of character the rules treat apart."""
    pools = [
        lambda: rng.choice(vocab[5:]),
        lambda: rng.choice(" \t\n\r\u3000\u00a0\u2028\x00\x1f\u200d\ufffd"),
        lambda: rng.choice(["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[", "]"]),
        lambda: chr(rng.randrange(0x300, 0x370)),  # combining marks
        lambda: chr(rng.randrange(0xFF00, 0xFFF0)),  # full- and half-width forms
        lambda: chr(rng.randrange(0x2000, 0x3400)),  # punctuation, symbols, CJK compatibility
        lambda: chr(rng.randrange(0x110000)),  # anything, surrogates and unassigned included
    ]
    weights = [20, 3, 1, 2, 3, 3, 3]
    return "".join(rng.choices(pools, weights)[0]() for _ in range(rng.randrange(0, 25)))


def test_same_ids_on_random_texts(ours: CharTokenizer, reference: BertJapaneseTokenizer) -> None:
    rng = random.Random(20261129)
    vocab = build_vocab()
    for _ in range(3000):
        text = random_text(rng, vocab)
        assert ours.encode(text) == reference(text)["input_ids"], repr(text)
