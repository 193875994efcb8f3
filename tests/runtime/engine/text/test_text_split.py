"""Sentence splitting: boundaries, the length budget, round trips and the streaming accumulator."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from custom_components.yomiage.engine.text import normalize as normalize_module
from custom_components.yomiage.engine.text.frontend import Frontend
from custom_components.yomiage.engine.text.normalize import (
    CLOSING_MARKS,
    LINE_BREAKS,
    has_speakable,
    normalize,
)
from custom_components.yomiage.engine.text.split import (
    MAX_SENTENCE_CHARS,
    SentenceAccumulator,
    split_sentences,
)

_PIECES = [*"あいうかきゃっんーアイカッン今日天気雨、。！？!?,.「」』）)…〜 \n\t　"]
TEXT = st.lists(
    st.sampled_from([*_PIECES, "😀", "12", "1,000", "3.5", "ABC", "x", "\r\n"]), max_size=60
).map("".join)


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The readings rules off, so the round-trip properties test this module alone."""
    monkeypatch.setattr(normalize_module, "rewrite", lambda text: text)


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("晴れ。雨！曇り？", ["晴れ。", "雨！", "曇り？"]),
        ("本当?!うそ!!", ["本当?!", "うそ!!"]),
        ("彼は「行く。」と言った。", ["彼は「行く。」", "と言った。"]),  # closers stay
        ("『はい！』（笑）次", ["『はい！』", "（笑）次"]),
        ("一行目\n二行目\r\n\n三行目", ["一行目\n", "二行目\r\n\n", "三行目"]),
        (
            "終わり。  \n 次",
            ["終わり。  \n ", "次"],
        ),  # the whitespace goes with the sentence before
        ("3.14と1,000。次", ["3.14と1,000。", "次"]),  # no cut at "." or inside numbers
        ("はい。😀。次です", ["はい。😀。", "次です"]),  # nothing speakable: joins the one before
        ("！！。こんにちは。", ["！！。こんにちは。"]),  # ... or the next, at the start
        ("😀", ["😀"]),  # nothing speakable at all: one piece, for the caller to refuse
        (" \n\t ", []),
        ("", []),
    ],
)
def test_boundaries(text: str, pieces: list[str]) -> None:
    assert split_sentences(text) == pieces


def test_long_sentence_is_cut_after_commas_then_spaces_then_between_kana() -> None:
    clause = "今日はとても良い天気なので、"
    long_text = clause * 12 + "散歩に行きます。"
    pieces = split_sentences(long_text)
    assert len(pieces) > 1 and "".join(pieces) == long_text
    assert all(piece.endswith(("、", "。")) for piece in pieces)
    assert all(len(normalize(piece)) <= MAX_SENTENCE_CHARS for piece in pieces)

    words = "word " * 40
    assert all(piece.endswith(" ") for piece in split_sentences(words))

    kana = "あいうえお" * 40 + "ん" + "っか" * 30
    pieces = split_sentences(kana)
    assert "".join(pieces) == kana and len(pieces) > 2
    assert all(len(normalize(piece)) <= MAX_SENTENCE_CHARS for piece in pieces)
    assert not any(piece.startswith(("ん", "っ")) for piece in pieces)  # they belong before


def test_numbers_with_commas_are_never_cut() -> None:
    text = "、".join(["1,234,567円"] * 12)
    pieces = split_sentences(text, budget=30)
    assert "".join(pieces) == text
    assert all(piece.rstrip("、").count(",") % 2 == 0 for piece in pieces)


@pytest.mark.usefixtures("plain")
@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(min_value=4, max_value=MAX_SENTENCE_CHARS))
def test_round_trip(text: str, budget: int) -> None:
    pieces = split_sentences(text, budget=budget)
    if not text.strip():
        assert pieces == []
        return
    assert "".join(pieces) == text
    assert "".join(normalize(piece) for piece in pieces) == normalize(text)
    if len(pieces) > 1:
        assert all(has_speakable(normalize(piece)) for piece in pieces)


def _lost_nothing(text: str, sentences: list[str]) -> None:
    """The sentences give the text back, but for whitespace at its end (nothing to speak)."""
    joined = "".join(sentences)
    assert text.startswith(joined) and not text[len(joined) :].strip(), (text, sentences)


def _handed_out_complete(sentence: str) -> bool:
    """What one feed hands out before the stream ends (a sentence, or the parts an over-long
    one is cut into): an end mark or a line break, then perhaps closing marks, spaces and
    line breaks ('あ。\n」': a bracket closed on the next line goes with its sentence)."""
    tail = sentence.rstrip(CLOSING_MARKS + " \t\u3000")
    if tail[-1:] and tail[-1] in LINE_BREAKS:
        return True
    return tail[-1:] in tuple("。｡！？!?")


@pytest.mark.usefixtures("plain")
@settings(max_examples=200, deadline=None)
@given(TEXT, st.integers(min_value=4, max_value=MAX_SENTENCE_CHARS))
def test_accumulator_fed_character_by_character_loses_and_repeats_nothing(
    text: str, budget: int
) -> None:
    accumulator = SentenceAccumulator(budget=budget)
    handed_out = [accumulator.feed(char) for char in text]
    assert all(_handed_out_complete("".join(out)) for out in handed_out if out), handed_out
    sentences = [sentence for out in handed_out for sentence in out]
    _lost_nothing(text, sentences + accumulator.flush())


@pytest.mark.usefixtures("plain")
@settings(max_examples=100, deadline=None)
@given(TEXT, st.randoms(use_true_random=False))
def test_accumulator_fed_random_chunks_loses_and_repeats_nothing(
    text: str, rng: random.Random
) -> None:
    accumulator = SentenceAccumulator()
    handed_out: list[list[str]] = []
    start = 0
    while start < len(text):
        end = start + rng.randint(1, 12)
        handed_out.append(accumulator.feed(text[start:end]))
        start = end
    assert all(_handed_out_complete("".join(out)) for out in handed_out if out), handed_out
    sentences = [sentence for out in handed_out for sentence in out]
    _lost_nothing(text, sentences + accumulator.flush())


@pytest.mark.usefixtures("plain")
@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_a_text_that_arrives_whole_gives_the_split(text: str) -> None:
    text += "終わり。"  # its last sentence is speakable: nothing waits for what follows
    accumulator = SentenceAccumulator()
    assert accumulator.feed(text) + accumulator.flush() == split_sentences(text)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("詳しくは https://example.com/a?b=1 を見てください。", None),
        (
            "www.example.com/#!/faq を読んで。次です。",
            ["www.example.com/#!/faq を読んで。", "次です。"],
        ),
        ("本当に https://example.com? はい。", ["本当に https://example.com? ", "はい。"]),
    ],
)
def test_a_web_address_never_splits_a_sentence(text: str, sentences: list[str] | None) -> None:
    """Its ? and ! belong to it, whole or streamed; one that ends the address ends a sentence."""
    expected = sentences or [text]
    assert split_sentences(text) == expected
    accumulator = SentenceAccumulator()
    streamed = [sentence for char in text for sentence in accumulator.feed(char)]
    assert streamed + accumulator.flush() == expected


def test_a_sentence_is_handed_out_as_soon_as_it_ends() -> None:
    """An LLM that pauses after its first sentence must not hold it back; what comes after a
    sentence already handed out goes with the next one, never with it again."""
    accumulator = SentenceAccumulator()
    assert accumulator.feed("おはよう") == []
    assert accumulator.feed("ございます。") == ["おはようございます。"]
    assert accumulator.feed("」") == []
    assert accumulator.feed("😀") == []
    assert accumulator.feed("今日は「晴れ。") == [], "a bracket it opened is still open"
    assert accumulator.feed("」です！") == ["」😀今日は「晴れ。」", "です！"]
    assert accumulator.feed("\n") == []  # a line break after an end mark: nothing new
    assert accumulator.feed("明日は雨\n") == ["\n明日は雨\n"]
    assert accumulator.feed("晴れ") == []
    assert accumulator.flush() == ["晴れ"]
    assert accumulator.flush() == []


def test_accumulator_with_openjtalk_speakability_matches_frontend_split() -> None:
    frontend = Frontend()
    text = "おはよう。々。今日は、晴れです！「本当？」\n明日も\n\n晴れるかな"
    accumulator = SentenceAccumulator(
        lambda piece: bool(piece.strip()) and bool(frontend.sentences(piece, required=False))
    )
    sentences = [sentence for char in text for sentence in accumulator.feed(char)]
    sentences += accumulator.flush()
    assert "".join(sentences) == text
    # 々 alone is unreadable: whole, it joins the sentence before; streamed, that one has been
    # handed out already, so it goes with the next.
    assert sentences[:2] == ["おはよう。", "々。今日は、晴れです！"]
    assert [normalize(sentence) for sentence in sentences[2:]] == [
        sentence.text for sentence in frontend.sentences(text)[2:]
    ]


@pytest.mark.parametrize(
    "text",
    [
        "おはようございます。今日は11月29日(土)、最高気温は12.5℃の予報です。",
        "リビングの温度は23.4°Cです！湿度は45%。\nCO2は800ppmです。",
        "7:30に起きて、8:15に出発します。到着は9時の予定です？",
    ],
)
def test_round_trip_with_the_readings_rules(text: str) -> None:
    pieces = split_sentences(text)
    assert "".join(pieces) == text
    assert "".join(normalize(piece) for piece in pieces) == normalize(text)
