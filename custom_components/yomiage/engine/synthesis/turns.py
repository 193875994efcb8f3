"""Whose turn it is to run a model: one lock around model runs, since each run already uses
every core.

Requests take turns first come first served, but a listener waiting for its first audio (an
Assist reply) goes before the decoder runs of a stream somebody already hears (an
announcement's next sentence, seconds of decoding on a slow box). A decoder run that
has not started waits for such a request: the announcement's piece comes later by the
request's first turn, its next pieces no later. A run in progress can be *cut*: the waiting
request sets onnxruntime's terminate flag on it (the run stops within milliseconds, between two
of its nodes), its holder lets the waiting requests go first and runs it again when its turn
comes back: the same audio, later, and the work done so far lost. So a run is cut only where
that costs the playing listener less than it saves the waiting one: while its player has the
audio in hand to play through the first turn and the whole run again (nobody hears the cut),
or while the run is less than half done (it loses less than the waiting listener gains).
Otherwise the request waits for the run. A first turn's length is learnt from those served.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

import onnxruntime as ort

from .clock import MONOTONIC, Clock

_Result = TypeVar("_Result")

# A first turn (BERT, front and first piece of a sentence) before any has been timed: the first
# piece's decoding budget (decode_speed.FIRST_AUDIO_BUDGET_S) twice over, so that a machine slower
# than expected does not starve an announcement's player before the lock has learnt better.
FIRST_TURN_GUESS_S = 3.0
# Headroom on the cut's cost (first turn + the run again) against the player's lead.
_CUT_MARGIN = 1.3
_SMOOTHING = 0.3  # weight of the newest first turn in the learnt length


class RunGate(Protocol):
    """How a model run is started: ``gate(run, expected_s)`` calls ``run(options)`` with the
    run options to hand to ``InferenceSession.run`` (None: defaults) and gives back what it
    gives; ``expected_s``: how long the run should take."""

    def __call__(
        self, run: Callable[[ort.RunOptions | None], _Result], expected_s: float
    ) -> _Result: ...


def run_plainly(run: Callable[[ort.RunOptions | None], _Result], expected_s: float) -> _Result:
    """A run nobody cuts short."""
    return run(None)


@dataclass(frozen=True)
class _Cuttable:
    options: ort.RunOptions
    started: float  # the clock when the run started
    dry_at: float  # the clock when the run's player runs out of audio
    expected_s: float


class ModelLock:
    """First come first served: a thread that gives the lock up and asks again queues behind
    those already waiting, so requests really take turns. Its holder may take it again (one
    turn spanning several runs). It tells whether anyone is waiting, and lets a request waiting
    for its first audio cut short a cuttable run (see the module's docstring)."""

    def __init__(self, clock: Clock = MONOTONIC) -> None:
        """``clock``: what the turns' timing reads (a first turn's cost, a cut's worth)."""
        self._clock = clock
        self._condition = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._holder: int | None = None
        self._depth = 0
        self._first_audio_waiting = 0
        self._cuttable: _Cuttable | None = None  # the holder's run in progress, if cuttable
        self._first_turn_s: float | None = None

    def __enter__(self) -> ModelLock:
        self._acquire(first_audio=False)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._condition:
            self._depth -= 1
            if not self._depth:
                self._hand_on()

    @contextmanager
    def first_audio_turn(self) -> Iterator[None]:
        """The lock, for a request whose listener hears nothing yet: it goes before cuttable
        runs that have not started, and cuts the holder's short where that is worth it."""
        self._acquire(first_audio=True)
        started = self._clock()
        try:
            yield
        finally:
            self._learn_first_turn(self._clock() - started)
            self.__exit__()

    @property
    def awaited(self) -> bool:
        """Someone besides the holder has asked for the lock."""
        with self._condition:
            return self._next_ticket - self._serving > 1

    @property
    def first_turn_s(self) -> float:
        """How long a first turn is expected to take."""
        with self._condition:
            return self._expected_first_turn_s()

    def cuttable(
        self,
        run: Callable[[ort.RunOptions | None], _Result],
        lead_s: float,
        expected_s: float,
    ) -> _Result:
        """``run(options)`` by the holder, whose player has ``lead_s`` seconds of audio in hand
        and which should take ``expected_s``. It waits for the requests already waiting for
        their first audio; one that asks while it runs may cut it short (see the module's
        docstring); the holder then gives way, and runs it again once its turn comes back.
        Inside a turn of several runs (the lock taken more than once) the run is never cut."""
        dry_at = self._clock() + lead_s
        while True:
            options = self._arm(dry_at, expected_s)
            try:
                return run(options)
            except Exception:
                if options is None or not options.terminate:
                    raise
            finally:
                self._disarm()

    def _arm(self, dry_at: float, expected_s: float) -> ort.RunOptions | None:
        """Run options the run can be cut through, after giving way to the requests already
        waiting for their first audio; None inside a longer turn."""
        with self._condition:
            if self._holder != threading.get_ident() or self._depth != 1:
                return None
            while self._first_audio_waiting:
                self._give_way()
            cut = _Cuttable(ort.RunOptions(), self._clock(), dry_at, expected_s)
            self._cuttable = cut
            return cut.options

    def _worth_cutting(self, cut: _Cuttable) -> bool:
        """Whether cutting the run now costs its listener less than it saves the waiting one
        (called holding the condition): its player still has audio after a first turn and
        the whole run again, or the run is less than half done."""
        now = self._clock()
        cost = _CUT_MARGIN * (self._expected_first_turn_s() + cut.expected_s)
        unheard = now + cost <= cut.dry_at
        return unheard or now - cut.started <= cut.expected_s / 2

    def _expected_first_turn_s(self) -> float:
        """Called holding the condition."""
        return FIRST_TURN_GUESS_S if self._first_turn_s is None else self._first_turn_s

    def _disarm(self) -> None:
        with self._condition:
            self._cuttable = None

    def _acquire(self, first_audio: bool) -> None:
        me = threading.get_ident()
        with self._condition:
            if self._holder == me:
                self._depth += 1
                return
            if first_audio:
                self._first_audio_waiting += 1
                cut = self._cuttable
                if cut is not None and self._worth_cutting(cut):
                    cut.options.terminate = True
            self._wait_for_turn()
            if first_audio:
                self._first_audio_waiting -= 1

    def _learn_first_turn(self, seconds: float) -> None:
        with self._condition:
            known = self._first_turn_s
            self._first_turn_s = (
                seconds if known is None else known + _SMOOTHING * (seconds - known)
            )

    def _give_way(self) -> None:
        """Called holding the condition, at depth 1: the lock to those waiting, then back."""
        self._hand_on()
        self._wait_for_turn()

    def _wait_for_turn(self) -> None:
        ticket = self._next_ticket
        self._next_ticket += 1
        self._condition.wait_for(lambda: self._serving == ticket)
        self._holder, self._depth = threading.get_ident(), 1

    def _hand_on(self) -> None:
        self._holder = None
        self._serving += 1
        self._condition.notify_all()
