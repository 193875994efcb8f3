"""Home Assistant may ask for several messages at once: one engine serves them all."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.results import AudioChunk

from ..common import QUIET, THREE_SENTENCES

TEXTS = ["おはようございます。", "玄関の鍵が開いています。閉めてください。"]


def test_eight_threads_four_requests_each_on_two_speakers(engine: Engine) -> None:
    speakers = list(engine.voices)
    jobs = [(TEXTS[i % 2], QUIET.with_changes(voice=speakers[(i // 2) % 2])) for i in range(8 * 4)]
    expected = {
        (text, options.voice): engine.synthesize(text, options).audio for text, options in jobs[:4]
    }
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: engine.synthesize(*job).audio, jobs))
    assert len(results) == 32
    for (text, options), audio in zip(jobs, results, strict=True):
        np.testing.assert_array_equal(audio, expected[(text, options.voice)])


def _pcm(chunks: Iterator[AudioChunk]) -> np.ndarray:
    return np.concatenate([chunk.pcm for chunk in chunks])


def test_streams_at_once_give_the_audio_each_gives_alone(engine: Engine) -> None:
    texts = [THREE_SENTENCES, *TEXTS]
    alone = [_pcm(engine.stream(text, QUIET)) for text in texts]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(lambda text: _pcm(engine.stream(text, QUIET)), texts * 2))
    for audio, expected in zip(together, alone * 2, strict=True):
        assert audio.shape == expected.shape
        # Pieces are cut where the decoding speed says (timing): the same samples within a step.
        assert np.abs(audio.astype(np.int32) - expected).max() <= 2


@pytest.mark.parametrize("arriving", [False, True], ids=["stream", "stream_sentences"])
def test_a_listener_waiting_for_first_audio_gets_it_in_one_turn(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, arriving: bool
) -> None:
    """While an announcement streams, another request's BERT, front and first piece run one
    after the other: it waits for the announcement's run in progress, not for one per step."""
    holders: list[str] = []
    run = engine._run

    def logged(function: Any, *args: Any) -> Any:
        def holding(*inner: Any) -> Any:
            holders.append(threading.current_thread().name)
            # Runs that take a while (as full-size ones do): whoever is between two runs has
            # asked for the next turn before the run in progress ends.
            time.sleep(0.02)
            return function(*inner)

        return run(holding, *args)

    monkeypatch.setattr(engine, "_run", logged)
    announcing = threading.Event()

    def announce() -> None:
        for _ in engine.stream(THREE_SENTENCES * 4, QUIET):  # pulled as fast as it comes
            announcing.set()

    announcement = threading.Thread(target=announce, name="announcement")
    announcement.start()
    try:
        assert announcing.wait(30)
        asked = len(holders)
        chunks = (
            engine.stream_sentences(iter([THREE_SENTENCES]), QUIET)
            if arriving
            else engine.stream(THREE_SENTENCES, QUIET)
        )
        next(chunks)
        chunks.close()
    finally:
        announcement.join(60)
    me = threading.current_thread().name
    mine = [index for index, holder in enumerate(holders[asked:]) if holder == me]
    assert len(mine) >= 2  # BERT, then front and first piece
    assert holders[asked + mine[0] : asked + mine[-1] + 1] == [me] * (mine[-1] - mine[0] + 1)
