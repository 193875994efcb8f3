"""Whether text came whole: one piece then the end at once (a message Home Assistant or a
Wyoming client has whole), or pieces (an LLM's reply), which must not wait on the first."""

from __future__ import annotations

import threading
import time

from custom_components.yomiage.engine import ArrivingText
from custom_components.yomiage.engine.synthesis.arriving import WHOLE_WITHIN_S

TEXT = "おはようございます。七時です。"


def test_one_piece_then_the_end_is_whole_and_still_gives_its_sentences() -> None:
    text = ArrivingText()
    text.add(TEXT)
    text.finish()
    assert text.whole() == TEXT
    assert list(text) == ["おはようございます。", "七時です。"]


def test_two_pieces_are_not_whole_and_nothing_waits() -> None:
    text = ArrivingText()
    text.add("おはよう")
    text.add("ございます。七時")
    started = time.monotonic()
    assert text.whole() is None
    assert time.monotonic() - started < 0.05
    text.add("です。")
    text.finish()
    assert list(text) == ["おはようございます。", "七時です。"]


def test_a_first_sentence_followed_by_silence_goes_on_after_the_short_wait() -> None:
    """An LLM that stops after its first sentence (a tool call) until it has been heard."""
    text = ArrivingText()
    text.add("おはようございます。")
    heard: list[str] = []
    started = time.monotonic()
    reader = threading.Thread(target=lambda: heard.extend(text))
    reader.start()
    deadline = started + 5
    while not heard and time.monotonic() < deadline:
        time.sleep(0.01)
    waited = time.monotonic() - started
    assert heard == ["おはようございます。"]
    assert WHOLE_WITHIN_S * 0.9 <= waited < WHOLE_WITHIN_S + 0.5
    assert text.whole() is None
    text.add("七時です。")
    text.finish()
    reader.join(5)
    assert heard == ["おはようございます。", "七時です。"]


def test_a_text_that_fails_after_its_first_piece_is_not_whole() -> None:
    text = ArrivingText()
    text.add("おはようございます。七時")
    text.finish(unfinished=False)
    assert text.whole() is None
    assert list(text) == ["おはようございます。"]


def test_a_cancelled_text_is_not_whole() -> None:
    text = ArrivingText()
    text.add(TEXT)
    text.cancel()
    assert text.whole() is None
    assert list(text) == []
