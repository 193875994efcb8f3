"""Whole-file synthesis decodes two sentences at once on one-thread "lanes" (lanes.py)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from custom_components.yomiage.engine import pieces
from custom_components.yomiage.engine.engine import Engine
from custom_components.yomiage.engine.lanes import lane_threads, lanes_pay, longest_first, run_lanes
from custom_components.yomiage.engine.runtime import SessionFactory
from custom_components.yomiage.engine.voice import Voice

from .common import QUIET, THREE_SENTENCES

FOUR_SENTENCES = THREE_SENTENCES + "明日も晴れるでしょう。"
# One BERT batch for all sentences (two when not on lanes: padding differs) and one thread or two
# per convolution (another summation order): the 16-bit samples may differ by a few steps.
PCM_STEPS = 4


# -- planning ---------------------------------------------------------------------------------
@given(st.lists(st.integers(min_value=1, max_value=2000), max_size=30))
def test_jobs_are_taken_longest_first_each_once(frames: list[int]) -> None:
    order = longest_first(frames)
    assert sorted(order) == list(range(len(frames)))
    assert [frames[job] for job in order] == sorted(frames, reverse=True)


def test_lanes_pay_for_many_or_balanced_jobs_not_for_one_or_a_lopsided_pair() -> None:
    assert lanes_pay([300, 317, 262, 213, 335, 281, 394, 320])  # the benchmark's long text
    assert lanes_pay([300, 290])
    assert not lanes_pay([300])
    assert not lanes_pay([400, 100])  # 400 on one thread > 500 on two
    assert not lanes_pay([])


def test_lanes_share_out_the_cores() -> None:
    # Two calling threads plus the pool of the one session both lanes run on: one per core.
    assert [lane_threads(cores) for cores in (1, 2, 3, 4, 16)] == [0, 1, 2, 3, 15]
    assert SessionFactory(threads=4).lane_threads == 3
    assert SessionFactory(threads=4, decoder_lanes=False).lane_threads == 0


# -- running the lanes --------------------------------------------------------------------------
def test_both_lanes_decode_at_once_every_job_once_and_leave_no_thread() -> None:
    both_running = threading.Barrier(2, timeout=10)  # breaks unless the lanes overlap
    threads_before = threading.active_count()
    taken: list[tuple[int, int, str]] = []

    def decode(job: int, lane: int) -> int:
        if job in (0, 1):
            both_running.wait()
        taken.append((job, lane, threading.current_thread().name))
        return job * 10

    decoded = run_lanes(deque(range(6)), decode, lambda: True)
    assert decoded == {job: job * 10 for job in range(6)}
    assert {lane for _, lane, _ in taken} == {0, 1}
    assert len({name for _, _, name in taken}) == 2
    assert threading.active_count() == threads_before


def test_lanes_give_way_after_a_job_each_and_go_on_next_time() -> None:
    queue = deque(range(5))
    decoded = run_lanes(queue, lambda job, lane: job, lambda: False)
    assert sorted(decoded) == [0, 1] and list(queue) == [2, 3, 4]
    assert sorted(run_lanes(queue, lambda job, lane: job, lambda: True)) == [2, 3, 4]


def test_a_failing_lane_stops_both_and_is_reported_once_both_have_stopped() -> None:
    finished: list[int] = []

    def decode(job: int, lane: int) -> int:
        if job == 1:
            raise RuntimeError("lane decoder broke")
        time.sleep(0.2)
        finished.append(job)
        return job

    queue = deque(range(8))
    with pytest.raises(RuntimeError, match="lane decoder broke"):
        run_lanes(queue, decode, lambda: True)
    assert finished == [0]  # the other lane's job was waited for, and no new one was taken
    assert list(queue) == [2, 3, 4, 5, 6, 7]


# -- the engine ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lanes_engine(tiny_bundle: Path) -> Iterator[Engine]:
    engine = Engine(tiny_bundle, device="cpu", threads=2)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def plain_engine(tiny_bundle: Path) -> Iterator[Engine]:
    engine = Engine(tiny_bundle, device="cpu", threads=2, decoder_lanes=False)
    yield engine
    engine.close()


def _voice(engine: Engine) -> Voice:
    return engine._voice(None)[0]


def _decodes(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Lanes of every decoder run from now on (None: the session with every thread)."""
    lanes: list[int | None] = []
    decode = Voice.decode

    def recorded(
        self: Voice, fronted: Any, span: tuple[int, int], lane: int | None = None, **more: Any
    ) -> Any:
        lanes.append(lane)
        return decode(self, fronted, span, lane, **more)

    monkeypatch.setattr(Voice, "decode", recorded)
    return lanes


def test_two_cores_give_two_lanes_one_core_none(
    lanes_engine: Engine, plain_engine: Engine, tiny_bundle: Path
) -> None:
    assert _voice(lanes_engine).lanes == 2
    assert _voice(plain_engine).lanes == 0
    one_core = Engine(tiny_bundle, device="cpu", threads=1)
    try:
        assert _voice(one_core).lanes == 0
    finally:
        one_core.close()


def test_lanes_give_the_audio_and_pauses_of_one_sentence_after_the_other(
    lanes_engine: Engine, plain_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = _decodes(lanes_engine, monkeypatch)
    on_lanes = lanes_engine.synthesize(FOUR_SENTENCES, QUIET)
    assert 0 in lanes and 1 in lanes
    plain = plain_engine.synthesize(FOUR_SENTENCES, QUIET)
    assert on_lanes.audio.shape == plain.audio.shape
    steps = np.abs(on_lanes.audio.astype(np.int32) - plain.audio.astype(np.int32))
    assert steps.max() <= PCM_STEPS
    assert [s.text for s in on_lanes.sentences] == [s.text for s in plain.sentences]
    assert [s.pause_before_s for s in on_lanes.sentences] == pytest.approx(
        [s.pause_before_s for s in plain.sentences], abs=1e-3
    )
    assert all(s.compute_s > 0 for s in on_lanes.sentences)


def test_a_long_sentence_is_shared_by_the_lanes_in_spans(
    lanes_engine: Engine, plain_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "今日は天気がいいので、公園まで散歩に行きましょう。"
    plain = plain_engine.synthesize(text, QUIET)
    monkeypatch.setattr(
        pieces, "MAX_DECODE_FRAMES", plain.audio.shape[0] // 512 // 2 + 1
    )  # two spans
    lanes = _decodes(lanes_engine, monkeypatch)
    on_lanes = lanes_engine.synthesize(text, QUIET)
    assert sorted(lane for lane in lanes if lane is not None) == [0, 1]
    assert len(on_lanes.sentences) == 1
    steps = np.abs(on_lanes.audio.astype(np.int32) - plain.audio.astype(np.int32))
    assert on_lanes.audio.shape == plain.audio.shape and steps.max() <= PCM_STEPS


def _front_threads(monkeypatch: pytest.MonkeyPatch, overlapping: int) -> list[str]:
    """The thread of each front run from now on; the first ``overlapping`` ones must run at
    the same time (else they fail)."""
    at_once = threading.Barrier(overlapping, timeout=10) if overlapping > 1 else None
    threads: list[str] = []
    front = Voice.front

    def recorded(self: Voice, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        if at_once is not None and len(threads) <= overlapping:
            at_once.wait()
        return front(self, *args)

    monkeypatch.setattr(Voice, "front", recorded)
    return threads


def test_the_fronts_of_a_whole_file_run_two_at_once(
    lanes_engine: Engine, plain_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _front_threads(monkeypatch, overlapping=2)
    on_lanes = lanes_engine.synthesize(FOUR_SENTENCES, QUIET)
    assert len(threads) == 4 and len(set(threads)) == 2
    monkeypatch.undo()
    plain = plain_engine.synthesize(FOUR_SENTENCES, QUIET)
    steps = np.abs(on_lanes.audio.astype(np.int32) - plain.audio.astype(np.int32))
    assert on_lanes.audio.shape == plain.audio.shape and steps.max() <= PCM_STEPS


def test_the_front_of_one_sentence_runs_in_the_calling_thread(
    lanes_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _front_threads(monkeypatch, overlapping=1)
    lanes_engine.synthesize("今日は晴れです。", QUIET)
    assert threads == [threading.current_thread().name]


def test_streaming_keeps_the_decoder_with_every_thread(
    lanes_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = _decodes(lanes_engine, monkeypatch)
    assert list(lanes_engine.stream(FOUR_SENTENCES, QUIET))
    assert lanes and set(lanes) == {None}


def test_concurrent_requests_on_lanes_get_their_own_audio(lanes_engine: Engine) -> None:
    texts = [FOUR_SENTENCES, "おはようございます。玄関の鍵が開いています。"]
    expected = {text: lanes_engine.synthesize(text, QUIET).audio for text in texts}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: lanes_engine.synthesize(texts[i % 2], QUIET), range(8)))
    for index, result in enumerate(results):
        np.testing.assert_array_equal(result.audio, expected[texts[index % 2]])


def test_a_failing_lane_fails_the_request_and_the_engine_goes_on(
    lanes_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    decode = Voice.decode

    def broken(
        self: Voice, fronted: Any, span: tuple[int, int], lane: int | None = None, **more: Any
    ) -> Any:
        if lane == 1:
            raise RuntimeError("lane decoder failed")
        return decode(self, fronted, span, lane, **more)

    expected = lanes_engine.synthesize(FOUR_SENTENCES, QUIET).audio
    with monkeypatch.context() as patched:
        patched.setattr(Voice, "decode", broken)
        with pytest.raises(RuntimeError, match="lane decoder failed"):
            lanes_engine.synthesize(FOUR_SENTENCES, QUIET)
    np.testing.assert_array_equal(lanes_engine.synthesize(FOUR_SENTENCES, QUIET).audio, expected)


def test_a_request_that_waits_gets_its_turn_between_lane_jobs(
    lanes_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short request arriving while a long one decodes on the lanes is answered before the
    long one has finished all its jobs."""
    events: list[str] = []
    decode = Voice.decode
    short: dict[str, Any] = {}

    def synthesize_short() -> None:
        short["result"] = lanes_engine.synthesize("はい。", QUIET)

    def recorded(
        self: Voice, fronted: Any, span: tuple[int, int], lane: int | None = None, **more: Any
    ) -> Any:
        if lane is not None and "thread" not in short:
            short["thread"] = threading.Thread(target=synthesize_short)
            short["thread"].start()
            deadline = time.monotonic() + 10
            while not lanes_engine._model_lock.awaited and time.monotonic() < deadline:
                time.sleep(0.001)
        samples = decode(self, fronted, span, lane, **more)
        events.append("lane job" if lane is not None else "whole")
        return samples

    monkeypatch.setattr(Voice, "decode", recorded)
    lanes_engine.synthesize(FOUR_SENTENCES * 3, QUIET)  # 12 decoder jobs on the lanes
    short["thread"].join(timeout=30)
    assert "result" in short
    short_decoded = events.index("whole")  # the short request's last model run
    # Its three turns (BERT, front, decoder) alternate with the long request's, one job per
    # lane each: the first turn's two jobs, then two after each of its first two turns.
    assert events[:short_decoded].count("lane job") <= 6
    assert "lane job" in events[short_decoded:]  # the long request still had jobs left
