"""Turns of the model lock: a request waiting for its first audio cuts a stream's run short."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx.sessions import SplitSessions
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.results import AudioChunk
from custom_components.yomiage.engine.synthesis.turns import FIRST_TURN_GUESS_S, ModelLock

from .common import QUIET, THREE_SENTENCES

LONG_S = 10.0  # a run that would last this long unless cut short (the tests end long before)
AHEAD_S = 100.0  # a player this far ahead can afford any cut in these tests
CUT_RUN_S = 2.0  # a run the tests cut short (and which then runs again, to its end)


class _SlowRun:
    """A model run that lasts ``lasts_s`` unless its terminate flag is set first (then it
    fails, as onnxruntime does); records what happened in ``events``."""

    def __init__(self, events: list[str], lasts_s: float = LONG_S) -> None:
        self.events = events
        self.lasts_s = lasts_s
        self.started = threading.Event()
        self.options: list[ort.RunOptions | None] = []

    def __call__(self, options: ort.RunOptions | None) -> str:
        self.options.append(options)
        self.events.append("run")
        self.started.set()
        deadline = time.monotonic() + self.lasts_s
        while time.monotonic() < deadline:
            if options is not None and options.terminate:
                self.events.append("cut")
                raise RuntimeError("Exiting due to terminate flag being set to true.")
            time.sleep(0.001)
        self.events.append("finished")
        return "audio"


def _holder(lock: ModelLock, work: Callable[[], Any], result: dict[str, Any]) -> threading.Thread:
    """A thread that takes the lock and does ``work`` under it (its value in ``result``)."""

    def hold() -> None:
        try:
            with lock:
                result["value"] = work()
        except Exception as err:
            result["error"] = err

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def _first_audio_while(lock: ModelLock, run: _SlowRun, work: Callable[[], Any]) -> list[str]:
    """What happens when a request asks for its first audio while the holder does ``work``
    (which starts ``run``): the run's events and the request's turn, in order."""
    result: dict[str, Any] = {}
    holder = _holder(lock, work, result)
    assert run.started.wait(LONG_S)
    with lock.first_audio_turn():
        run.events.append("first audio")
    holder.join(3 * LONG_S)
    assert "error" not in result
    return run.events


def test_a_request_waiting_for_its_first_audio_cuts_a_cuttable_run_short() -> None:
    lock, events, result = ModelLock(), [], {}
    run = _SlowRun(events, lasts_s=CUT_RUN_S)
    holder = _holder(lock, lambda: lock.cuttable(run, AHEAD_S, 0.0), result)
    assert run.started.wait(LONG_S)
    asked = time.monotonic()
    with lock.first_audio_turn():
        waited = time.monotonic() - asked
        events.append("first audio")
    holder.join(3 * LONG_S)
    # Cut, the waiting request's turn, then the same run again, to its end.
    assert events == ["run", "cut", "first audio", "run", "finished"]
    assert waited < CUT_RUN_S / 2
    assert result == {"value": "audio"}


def test_a_request_that_already_hears_audio_waits_for_the_run_in_progress() -> None:
    lock, events, result = ModelLock(), [], {}
    run = _SlowRun(events, lasts_s=0.3)
    holder = _holder(lock, lambda: lock.cuttable(run, AHEAD_S, 0.0), result)
    assert run.started.wait(LONG_S)
    with lock:
        events.append("next turn")
    holder.join(LONG_S)
    assert events == ["run", "finished", "next turn"]
    assert result == {"value": "audio"}


def test_a_cuttable_run_lets_a_request_waiting_for_first_audio_go_first() -> None:
    """The request asked while the holder was between runs: the cuttable run waits for it
    instead of starting only to be cut."""
    lock, events, result = ModelLock(), [], {}
    run = _SlowRun(events, lasts_s=0.0)
    between_runs, waiter_asked = threading.Event(), threading.Event()

    def holder_work() -> str:
        between_runs.set()
        assert waiter_asked.wait(LONG_S)
        deadline = time.monotonic() + LONG_S
        while not lock.awaited and time.monotonic() < deadline:
            time.sleep(0.001)
        return lock.cuttable(run, AHEAD_S, 0.0)

    holder = _holder(lock, holder_work, result)
    assert between_runs.wait(LONG_S)
    waiter_asked.set()
    with lock.first_audio_turn():
        events.append("first audio")
    holder.join(LONG_S)
    assert events == ["first audio", "run", "finished"]
    assert result == {"value": "audio"}


def test_a_run_past_half_way_whose_player_would_run_dry_is_not_cut() -> None:
    """A player 2 s ahead cannot wait for a first turn (guessed at 3 s before any is timed)
    and the whole run again, and the run (expected to take no time) is past half way: the
    request waits for the run instead."""
    lock, run = ModelLock(), _SlowRun([], lasts_s=0.3)
    events = _first_audio_while(lock, run, lambda: lock.cuttable(run, 2.0, 0.0))
    assert events == ["run", "finished", "first audio"]


def test_a_run_less_than_half_done_is_cut_even_with_no_audio_in_hand() -> None:
    """The playing listener then loses less than the waiting one gains."""
    lock, run = ModelLock(), _SlowRun([], lasts_s=CUT_RUN_S)
    events = _first_audio_while(lock, run, lambda: lock.cuttable(run, 0.0, 4 * CUT_RUN_S))
    assert events == ["run", "cut", "first audio", "run", "finished"]


def test_the_first_turns_length_is_learnt_and_then_allows_shorter_leads() -> None:
    lock, run = ModelLock(), _SlowRun([], lasts_s=CUT_RUN_S)
    assert lock.first_turn_s == FIRST_TURN_GUESS_S
    with lock.first_audio_turn():
        time.sleep(0.05)
    assert 0.05 <= lock.first_turn_s < 1.0
    # 2 s ahead: enough now for a first turn and the whole run again.
    events = _first_audio_while(lock, run, lambda: lock.cuttable(run, 2.0, 0.0))
    assert events == ["run", "cut", "first audio", "run", "finished"]


def test_a_run_inside_a_longer_turn_is_never_cut() -> None:
    """A listener's first turn (BERT, front, first piece) is not cut by the next listener."""
    lock, run = ModelLock(), _SlowRun([], lasts_s=0.3)

    def nested() -> str:
        with lock:
            return lock.cuttable(run, AHEAD_S, 0.0)

    assert _first_audio_while(lock, run, nested) == ["run", "finished", "first audio"]
    assert run.options == [None]


def test_a_run_failing_for_its_own_reasons_is_not_run_again() -> None:
    lock, result = ModelLock(), {}
    attempts: list[ort.RunOptions | None] = []

    def failing(options: ort.RunOptions | None) -> str:
        attempts.append(options)
        raise ValueError("corrupt graph")

    _holder(lock, lambda: lock.cuttable(failing, AHEAD_S, 0.0), result).join(LONG_S)
    assert isinstance(result["error"], ValueError)
    assert len(attempts) == 1
    with lock:  # and the lock is free again
        assert not lock.awaited


# -- in the engine, with onnxruntime's own terminate flag -------------------------------------


class _SlowCuttableDecoder:
    """The decoder session, except that its third cuttable run (the player has some audio in
    hand by then) waits up to ``LONG_S`` to be cut before it runs: a full-size decoder run
    takes seconds, the test model's take milliseconds, too short to be caught in progress."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session = session
        self.cuttable_runs = 0
        self.waiting = threading.Event()
        self.cut = threading.Event()

    def run(self, names: Any, feeds: Any, options: ort.RunOptions | None = None) -> Any:
        if options is not None:
            self.cuttable_runs += 1
            if self.cuttable_runs == 3:
                self.waiting.set()
                deadline = time.monotonic() + LONG_S
                while not options.terminate and time.monotonic() < deadline:
                    time.sleep(0.001)
                if options.terminate:
                    self.cut.set()
        return self._session.run(names, feeds, options)  # fails at once when cut


def _warm_first_turns(engine: Engine) -> None:
    """Sessions loaded, and the lock's learnt first turn brought to this machine's warm one."""
    engine.load_all()
    for _ in range(8):
        chunks = engine.stream("はい。", QUIET)
        next(chunks)
        chunks.close()


def _pcm(chunks: Iterator[AudioChunk]) -> np.ndarray:
    return np.concatenate([chunk.pcm for chunk in chunks])


@pytest.mark.parametrize("arriving", [False, True], ids=["stream", "stream_sentences"])
def test_an_assist_reply_does_not_wait_for_an_announcements_decoder_run(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, arriving: bool
) -> None:
    announcement_text = THREE_SENTENCES * 3
    _warm_first_turns(engine)
    alone = _pcm(engine.stream(announcement_text, QUIET))
    voice = engine._voices[next(iter(engine.voices))]
    split = voice.graphs._split_sessions()
    assert split is not None
    decoder = _SlowCuttableDecoder(split.decoder)
    slow: SplitSessions = dataclasses.replace(split, decoder=decoder)  # type: ignore[arg-type]
    monkeypatch.setattr(voice.graphs, "_split_sessions", lambda: slow)
    announced: dict[str, np.ndarray] = {}

    def announce() -> None:
        announced["pcm"] = _pcm(engine.stream(announcement_text, QUIET))

    announcement = threading.Thread(target=announce)
    announcement.start()
    try:
        assert decoder.waiting.wait(LONG_S)  # a decoder run of the announcement in progress
        asked = time.monotonic()
        chunks = (
            engine.stream_sentences(iter([THREE_SENTENCES]), QUIET)
            if arriving
            else engine.stream(THREE_SENTENCES, QUIET)
        )
        next(chunks)
        waited = time.monotonic() - asked
        chunks.close()
    finally:
        announcement.join(3 * LONG_S)
    assert decoder.cut.is_set()
    assert waited < LONG_S / 2
    # The cut run was run again: the announcement is whole (pieces are cut where the decoding
    # speed says, so the same samples within a step).
    assert announced["pcm"].shape == alone.shape
    assert np.abs(announced["pcm"].astype(np.int32) - alone).max() <= 2
