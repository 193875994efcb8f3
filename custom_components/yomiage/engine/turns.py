"""Whose turn it is to run a model: one lock around model runs, since each run already uses
every core.

Requests take turns first come first served. One kind of request goes first: a listener
waiting for its first audio (an Assist reply) does not wait for the run in progress of a
stream somebody already hears (an announcement's next sentence, ~1.5 s of decoding here, ~4x
that on a Pi). Such runs are *cuttable*: the waiting request sets onnxruntime's terminate flag
on it (the run stops within milliseconds, between two of its nodes), its holder lets the
waiting requests go first and runs it again when its turn comes back. The cut run's work is
lost; its audio is the same (a decoder run over the same frames), only later, while the
player still plays what it was given before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

import onnxruntime as ort

_Result = TypeVar("_Result")


class RunGate(Protocol):
    """How a model run is started: ``gate(run)`` calls ``run(options)`` with the run options
    to hand to ``InferenceSession.run`` (None: defaults), and gives back what it gives."""

    def __call__(self, run: Callable[[ort.RunOptions | None], _Result]) -> _Result: ...


def run_plainly(run: Callable[[ort.RunOptions | None], _Result]) -> _Result:
    """A run nobody cuts short."""
    return run(None)


class ModelLock:
    """First come first served: a thread that gives the lock up and asks again queues behind
    those already waiting, so requests really take turns. Its holder may take it again (one
    turn spanning several runs). It tells whether anyone is waiting, and lets a request waiting
    for its first audio cut short a cuttable run (see the module's docstring)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._holder: int | None = None
        self._depth = 0
        self._first_audio_waiting = 0
        self._cuttable: ort.RunOptions | None = None  # the holder's run in progress, if cuttable

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
        """The lock, for a request whose listener hears nothing yet: it cuts the holder's
        cuttable run short and goes before cuttable runs that have not started."""
        self._acquire(first_audio=True)
        try:
            yield
        finally:
            self.__exit__()

    @property
    def awaited(self) -> bool:
        """Someone besides the holder has asked for the lock."""
        with self._condition:
            return self._next_ticket - self._serving > 1

    def cuttable(self, run: Callable[[ort.RunOptions | None], _Result]) -> _Result:
        """``run(options)`` by the holder, which a request waiting for its first audio may cut
        short; then the holder gives way, and runs it again once its turn comes back. Inside a
        turn of several runs (the lock taken more than once) the run is never cut."""
        while True:
            options = self._arm()
            try:
                return run(options)
            except Exception:
                if options is None or not options.terminate:
                    raise
            finally:
                self._disarm()

    def _arm(self) -> ort.RunOptions | None:
        """Run options the run can be cut through, after giving way to any request already
        waiting for its first audio; None inside a longer turn."""
        with self._condition:
            if self._holder != threading.get_ident() or self._depth != 1:
                return None
            while self._first_audio_waiting:
                self._give_way()
            self._cuttable = ort.RunOptions()
            return self._cuttable

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
                if self._cuttable is not None:
                    self._cuttable.terminate = True
            self._wait_for_turn()
            if first_audio:
                self._first_audio_waiting -= 1

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
