"""Whether text came whole: one piece then the end at once (a message Home Assistant or a
Wyoming client has whole), or pieces (an LLM's reply), which must not wait on the first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from custom_components.yomiage.engine import ArrivingText
from custom_components.yomiage.engine.synthesis.arriving import WHOLE_WITHIN_S

from ..box import ModelledTime

TEXT = "おはようございます。七時です。"


def test_one_piece_then_the_end_is_whole_and_still_gives_its_sentences() -> None:
    text = ArrivingText()
    text.add(TEXT)
    text.finish()
    assert text.whole() == TEXT
    assert list(text) == ["おはようございます。", "七時です。"]


def test_two_pieces_are_not_whole_and_nothing_waits() -> None:
    """The text's clock stands still: a ``whole`` that waited for it would never return."""
    text = ArrivingText(ModelledTime())
    text.add("おはよう")
    text.add("ございます。七時")
    answers: list[str | None] = []
    asking = threading.Thread(target=lambda: answers.append(text.whole()))
    asking.start()
    asking.join(5)
    assert answers == [None]
    text.add("です。")
    text.finish()
    assert list(text) == ["おはようございます。", "七時です。"]


def test_a_first_sentence_followed_by_silence_goes_on_after_the_short_wait() -> None:
    """An LLM that stops after its first sentence (a tool call) until it has been heard: the
    sentence is held for ``WHOLE_WITHIN_S`` of the text's clock, then goes on, not whole."""
    clock = ModelledTime()
    text = ArrivingText(clock)
    text.add("おはようございます。")
    heard: list[str] = []
    reader = threading.Thread(target=lambda: heard.extend(text))
    reader.start()
    clock.advance(WHOLE_WITHIN_S * 0.99)
    looked = clock.reads
    _until(lambda: clock.reads >= looked + 2)  # the reader woke and looked again: still held
    assert heard == [] and reader.is_alive()
    clock.advance(WHOLE_WITHIN_S * 0.02)
    _until(lambda: heard == ["おはようございます。"])
    assert text.whole() is None
    text.add("七時です。")
    text.finish()
    reader.join(5)
    assert heard == ["おはようございます。", "七時です。"]


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "the reader never got there"
        time.sleep(0.001)


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
