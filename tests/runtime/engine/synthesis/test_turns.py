"""Turns of the model lock: a request waiting for its first audio cuts a stream's run short."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from custom_components.yomiage.engine.onnx.sessions import SplitSessions
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.results import AudioChunk
from custom_components.yomiage.engine.synthesis.turns import FIRST_TURN_GUESS_S, ModelLock

from ..box import ModelledTime
from ..common import QUIET, THREE_SENTENCES

LONG_S = 10.0  # how long a test waits for a thread before it fails (never, when it passes)
AHEAD_S = 100.0  # a player this far ahead can afford any cut in these tests
# The lock's time is the test's (ModelledTime): a run "has lasted" what the test advanced, so
# each cut is decided on exact figures, however busy the machine.


class _HeldRun:
    """A model run that goes on until the test lets it finish (``finish``) or its terminate flag
    is set (then it fails, as onnxruntime does); records what happened in ``events``."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.started = threading.Event()
        self._finish = threading.Event()
        self.options: list[ort.RunOptions | None] = []

    def finish(self) -> None:
        self._finish.set()

    def __call__(self, options: ort.RunOptions | None) -> str:
        self.options.append(options)
        self.events.append("run")
        self.started.set()
        while True:
            finishing = self._finish.wait(0.001)
            if options is not None and options.terminate:  # set before it was let finish
                self.events.append("cut")
                raise RuntimeError("Exiting due to terminate flag being set to true.")
            if finishing:
                break
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


def _until(condition: Callable[[], bool]) -> None:
    """Wait for another thread to bring ``condition`` about."""
    deadline = time.monotonic() + LONG_S
    while not condition():
        assert time.monotonic() < deadline, "the other thread never got there"
        time.sleep(0.001)


def _asked_while(
    lock: ModelLock,
    clock: ModelledTime,
    run: _HeldRun,
    work: Callable[[], Any],
    ran_s: float = 0.0,
    first_audio: bool = True,
) -> list[str]:
    """What happens when a request asks for the lock (for its first audio, or not) once the
    holder's ``work`` has started ``run`` and the run has lasted ``ran_s``: the run's events
    and the request's turn, in order. The run is let finish once the request has asked (and so
    decided whether to cut it)."""
    result: dict[str, Any] = {}
    holder = _holder(lock, work, result)
    assert run.started.wait(LONG_S)
    clock.advance(ran_s)

    def ask() -> None:
        with lock.first_audio_turn() if first_audio else lock:
            run.events.append("first audio" if first_audio else "next turn")

    asking = threading.Thread(target=ask)
    asking.start()
    _until(lambda: lock.awaited or "cut" in run.events)
    run.finish()
    asking.join(LONG_S)
    holder.join(LONG_S)
    assert "error" not in result and result["value"] == "audio"
    return run.events


def _lock() -> tuple[ModelLock, ModelledTime]:
    """A lock on a clock of the test's."""
    clock = ModelledTime()
    return ModelLock(clock), clock


def test_a_request_waiting_for_its_first_audio_cuts_a_cuttable_run_short() -> None:
    (lock, clock), run = _lock(), _HeldRun([])
    events = _asked_while(lock, clock, run, lambda: lock.cuttable(run, AHEAD_S, 0.0))
    # Cut, the waiting request's turn, then the same run again, to its end.
    assert events == ["run", "cut", "first audio", "run", "finished"]


def test_a_request_that_already_hears_audio_waits_for_the_run_in_progress() -> None:
    (lock, clock), run = _lock(), _HeldRun([])
    events = _asked_while(
        lock, clock, run, lambda: lock.cuttable(run, AHEAD_S, 0.0), first_audio=False
    )
    assert events == ["run", "finished", "next turn"]


def test_a_cuttable_run_lets_a_request_waiting_for_first_audio_go_first() -> None:
    """The request asked while the holder was between runs: the cuttable run waits for it
    instead of starting only to be cut."""
    (lock, _), events, result = _lock(), [], {}
    run = _HeldRun(events)
    run.finish()  # it would end at once
    between_runs, waiter_asked = threading.Event(), threading.Event()

    def holder_work() -> str:
        between_runs.set()
        assert waiter_asked.wait(LONG_S)
        _until(lambda: lock.awaited)
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
    (lock, clock), run = _lock(), _HeldRun([])
    events = _asked_while(lock, clock, run, lambda: lock.cuttable(run, 2.0, 0.0), ran_s=0.3)
    assert events == ["run", "finished", "first audio"]


@pytest.mark.parametrize(("ran_s", "cut"), [(3.9, True), (4.1, False)])
def test_a_run_less_than_half_done_is_cut_even_with_no_audio_in_hand(
    ran_s: float, cut: bool
) -> None:
    """The playing listener then loses less than the waiting one gains; past half of the 8 s
    it is expected to take, the run goes on."""
    (lock, clock), run = _lock(), _HeldRun([])
    events = _asked_while(lock, clock, run, lambda: lock.cuttable(run, 0.0, 8.0), ran_s=ran_s)
    if cut:
        assert events == ["run", "cut", "first audio", "run", "finished"]
    else:
        assert events == ["run", "finished", "first audio"]


def test_the_first_turns_length_is_learnt_and_then_allows_shorter_leads() -> None:
    (lock, clock), run = _lock(), _HeldRun([])
    assert lock.first_turn_s == FIRST_TURN_GUESS_S
    with lock.first_audio_turn():
        clock.advance(0.05)
    assert lock.first_turn_s == pytest.approx(0.05)
    # 2 s ahead: enough now for a first turn and the whole run again.
    events = _asked_while(lock, clock, run, lambda: lock.cuttable(run, 2.0, 0.0), ran_s=0.3)
    assert events == ["run", "cut", "first audio", "run", "finished"]


def test_a_run_inside_a_longer_turn_is_never_cut() -> None:
    """A listener's first turn (BERT, front, first piece) is not cut by the next listener."""
    (lock, clock), run = _lock(), _HeldRun([])

    def nested() -> str:
        with lock:
            return lock.cuttable(run, AHEAD_S, 0.0)

    assert _asked_while(lock, clock, run, nested) == ["run", "finished", "first audio"]
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
        self.ran_uncut = False  # the held run gave up waiting to be cut and ran

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
                else:
                    self.ran_uncut = True
        return self._session.run(names, feeds, options)  # fails at once when cut


def _warm_first_turns(engine: Engine) -> None:
    """Sessions loaded, and the engine's learnt speeds settled (on a clock that stands still:
    runs cost nothing, so first pieces are the least and first turns free)."""
    engine.load_all()
    for _ in range(8):
        chunks = engine.stream("はい。", QUIET)
        next(chunks)
        chunks.close()


def _pcm(chunks: Iterator[AudioChunk]) -> np.ndarray:
    return np.concatenate([chunk.pcm for chunk in chunks])


@pytest.fixture
def engine_on_held_time(tiny_bundle: Path) -> Iterator[Engine]:
    """An engine whose clock stands still: the announcement's player has all it was handed in
    hand and a first turn costs nothing, so the cut is worth it, however busy the machine."""
    engine = Engine(tiny_bundle, device="cpu", threads=1, clock=ModelledTime())
    yield engine
    engine.close()


@pytest.mark.parametrize("arriving", [False, True], ids=["stream", "stream_sentences"])
def test_an_assist_reply_does_not_wait_for_an_announcements_decoder_run(
    engine_on_held_time: Engine, monkeypatch: pytest.MonkeyPatch, arriving: bool
) -> None:
    engine = engine_on_held_time
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
        chunks = (
            engine.stream_sentences(iter([THREE_SENTENCES]), QUIET)
            if arriving
            else engine.stream(THREE_SENTENCES, QUIET)
        )
        next(chunks)  # before the held run could end by itself (it waits to be cut)
        cut_first = decoder.cut.is_set() and not decoder.ran_uncut
        chunks.close()
    finally:
        announcement.join(3 * LONG_S)
    assert cut_first
    # The cut run was run again: the announcement is whole (pieces are cut where the decoding
    # speed says, so the same samples within a step).
    assert announced["pcm"].shape == alone.shape
    assert np.abs(announced["pcm"].astype(np.int32) - alone).max() <= 2
