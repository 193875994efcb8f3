"""Text that arrives in pieces (an LLM reply being written), handed to the engine's thread.

One thread adds pieces as they come; each sentence they complete queues at once (the
``SentenceAccumulator`` rules), and the engine takes them from this object's iterator on its own
thread, blocking until the next one arrives.

Home Assistant, and a Wyoming client, hand a message they have whole over the same way: one
piece, then the end at once. So the first piece is held until a second arrives, the text ends or
``WHOLE_WITHIN_S`` passes: a text that ended by then with its first piece was whole
(``whole``), and the engine may plan it all (a smooth start). An LLM's reply waits at most that
long, and only where its first piece holds a whole sentence and nothing follows it at once (a
tool call).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from ..text.split import SentenceAccumulator
from .clock import MONOTONIC, Clock

_END = None  # queued after the last sentence
# How soon the end must follow a first piece for the text to count as whole: Home Assistant ends
# a whole message in the same turn of its event loop; a Wyoming client's next event comes within
# a few TCP round trips.
WHOLE_WITHIN_S = 0.2


class ArrivingText:
    def __init__(self, clock: Clock = MONOTONIC) -> None:
        """``clock``: what ``WHOLE_WITHIN_S`` is measured on (clock.py)."""
        self._clock = clock
        self._accumulator = SentenceAccumulator()
        self._sentences: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._cancelled = threading.Event()
        self._changed = threading.Condition()
        self._held: str | None = None  # the first piece, while it may yet be the whole text
        self._first_at: float | None = None  # when the first piece came
        self._decided = False  # whether it is known if the text came whole
        self._ended = False
        self._whole: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def add(self, piece: str) -> None:
        """Queue every sentence the piece completes (nothing once cancelled); a first piece is
        held (the module's docstring)."""
        if self.cancelled:
            return
        with self._changed:
            if self._first_at is None:
                self._first_at = self._clock()
                self._held = piece
                self._changed.notify_all()
                return
            self._arriving()
            self._feed(piece)

    def finish(self, unfinished: bool = True) -> None:
        """No more text: whatever is left makes the last sentences (``unfinished`` False: the
        words after the last complete sentence are dropped, the text having failed). A text
        that ends with its first piece still held was whole; its sentences queue all the same."""
        with self._changed:
            if self._held is not None and unfinished and not self.cancelled:
                self._whole = self._held
            self._release_held()
            if unfinished and not self.cancelled:
                for sentence in self._accumulator.flush():
                    self._sentences.put(sentence)
            self._sentences.put(_END)
            self._ended = self._decided = True
            self._changed.notify_all()

    def cancel(self) -> None:
        """No more sentences, not even those queued: the engine stops after the one it is on."""
        self._cancelled.set()
        self._sentences.put(_END)
        with self._changed:
            self._ended = self._decided = True
            self._changed.notify_all()

    def whole(self) -> str | None:
        """The text, where it came whole (iterating gives its sentences all the same); None
        where it arrives in pieces or was cancelled. Blocks until that is known: the first
        piece, then up to ``WHOLE_WITHIN_S`` for what follows it."""
        with self._changed:
            self._changed.wait_for(lambda: self._first_at is not None or self._ended)
            if self._first_at is not None:
                deadline = self._first_at + WHOLE_WITHIN_S
                while not self._decided and (remaining := deadline - self._clock()) > 0:
                    self._changed.wait(remaining)
            self._arriving()
            return None if self.cancelled else self._whole

    def __iter__(self) -> Iterator[str]:
        self.whole()  # a held first piece goes on once it is known not to be the whole text
        while (sentence := self._sentences.get()) is not _END and not self.cancelled:
            yield sentence

    def _arriving(self) -> None:
        """The text arrives in pieces (called holding the condition): the held piece goes on."""
        if not self._decided:
            self._decided = True
            self._release_held()
            self._changed.notify_all()

    def _release_held(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._feed(held)

    def _feed(self, piece: str) -> None:
        for sentence in self._accumulator.feed(piece):
            self._sentences.put(sentence)
