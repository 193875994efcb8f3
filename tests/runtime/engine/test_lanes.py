"""Whole-file synthesis decodes two sentences at once on one-thread "lanes" (lanes.py)."""

from __future__ import annotations

import threading
import time
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
from custom_components.yomiage.engine.lanes import lane_threads, plan_rounds, run_side_by_side
from custom_components.yomiage.engine.runtime import SessionFactory
from custom_components.yomiage.engine.voice import Voice

from .common import QUIET, THREE_SENTENCES

FOUR_SENTENCES = THREE_SENTENCES + "明日も晴れるでしょう。"
# One BERT batch for all sentences (two when not on lanes: padding differs) and one thread or two
# per convolution (another summation order): the 16-bit samples may differ by a few steps.
PCM_STEPS = 4


# -- planning ---------------------------------------------------------------------------------
@given(st.lists(st.integers(min_value=1, max_value=2000), max_size=30))
def test_every_job_is_in_exactly_one_round_of_one_or_two(frames: list[int]) -> None:
    rounds = plan_rounds(frames)
    assert sorted(job for round_jobs in rounds for job in round_jobs) == list(range(len(frames)))
    assert all(len(round_jobs) in (1, 2) for round_jobs in rounds)


@given(st.lists(st.integers(min_value=1, max_value=2000), min_size=1, max_size=30))
def test_rounds_go_longest_first_and_pair_only_where_both_lanes_stay_busy(
    frames: list[int],
) -> None:
    rounds = plan_rounds(frames)
    order = [frames[job] for round_jobs in rounds for job in round_jobs]
    assert order == sorted(order, reverse=True)
    for round_jobs in rounds:
        if len(round_jobs) == 2:
            longer, shorter = (frames[job] for job in round_jobs)
            # two one-thread runs side by side beat the pair one after the other on two threads
            assert longer < (longer + shorter) / 1.75


def test_similar_sentences_pair_up_and_a_short_one_is_left_to_both_threads() -> None:
    assert plan_rounds([300, 310, 290, 280, 60]) == [(1, 0), (2, 3), (4,)]
    assert plan_rounds([400, 100]) == [(0,), (1,)]


def test_lanes_share_out_the_cores() -> None:
    assert [lane_threads(cores) for cores in (1, 2, 3, 4, 16)] == [0, 1, 1, 2, 8]
    assert SessionFactory(threads=4).lane_threads == 2
    assert SessionFactory(threads=4, decoder_lanes=False).lane_threads == 0


# -- running side by side ------------------------------------------------------------------------
def test_two_jobs_run_at_once_on_lanes_zero_and_one_and_leave_no_thread() -> None:
    both_running = threading.Barrier(2, timeout=10)  # breaks unless the two jobs overlap
    threads_before = threading.active_count()

    def job(name: str) -> Any:
        def run(lane: int) -> tuple[str, int, str]:
            both_running.wait()
            return name, lane, threading.current_thread().name

        return run

    first, second = run_side_by_side([job("a"), job("b")])
    assert (first[:2], second[:2]) == (("a", 0), ("b", 1))
    assert first[2] != second[2]
    assert threading.active_count() == threads_before


def test_a_failing_lane_is_reported_once_both_have_stopped() -> None:
    finished: list[int] = []

    def fails(lane: int) -> int:
        raise RuntimeError(f"lane {lane} broke")

    def slow(lane: int) -> int:
        time.sleep(0.2)
        finished.append(lane)
        return lane

    with pytest.raises(RuntimeError, match="lane 1 broke"):
        run_side_by_side([slow, fails])
    with pytest.raises(RuntimeError, match="lane 0 broke"):
        run_side_by_side([fails, slow])
    assert finished == [0, 1]  # the other lane's run was waited for, not abandoned
    assert run_side_by_side([lambda lane: lane * 10, lambda lane: lane * 10]) == [0, 10]
    with pytest.raises(ValueError, match="3 jobs"):
        run_side_by_side([lambda lane: lane] * 3)


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

    def recorded(self: Voice, fronted: Any, span: tuple[int, int], lane: int | None = None) -> Any:
        lanes.append(lane)
        return decode(self, fronted, span, lane)

    monkeypatch.setattr(Voice, "decode", recorded)
    return lanes


def test_two_cores_give_two_lane_decoders_one_core_none(
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
    monkeypatch.setattr(pieces, "MAX_DECODE_FRAMES", plain.audio.shape[0] // 512 // 2)
    lanes = _decodes(lanes_engine, monkeypatch)
    on_lanes = lanes_engine.synthesize(text, QUIET)
    assert sorted(lane for lane in lanes if lane is not None) == [0, 1]
    assert len(on_lanes.sentences) == 1
    steps = np.abs(on_lanes.audio.astype(np.int32) - plain.audio.astype(np.int32))
    assert on_lanes.audio.shape == plain.audio.shape and steps.max() <= PCM_STEPS


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

    def broken(self: Voice, fronted: Any, span: tuple[int, int], lane: int | None = None) -> Any:
        if lane == 1:
            raise RuntimeError("lane decoder failed")
        return decode(self, fronted, span, lane)

    expected = lanes_engine.synthesize(FOUR_SENTENCES, QUIET).audio
    with monkeypatch.context() as patched:
        patched.setattr(Voice, "decode", broken)
        with pytest.raises(RuntimeError, match="lane decoder failed"):
            lanes_engine.synthesize(FOUR_SENTENCES, QUIET)
    np.testing.assert_array_equal(lanes_engine.synthesize(FOUR_SENTENCES, QUIET).audio, expected)
