"""Text that arrives in pieces (an LLM reply being written), handed to the engine's thread.

One thread adds pieces as they come; each sentence they complete queues at once (the
``SentenceAccumulator`` rules), and the engine's ``stream_sentences`` takes them from this
object's iterator on its own thread, blocking until the next one arrives.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from ..text.split import SentenceAccumulator

_END = None  # queued after the last sentence


class ArrivingText:
    def __init__(self) -> None:
        self._accumulator = SentenceAccumulator()
        self._sentences: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def add(self, piece: str) -> None:
        """Queue every sentence the piece completes (nothing once cancelled)."""
        if self.cancelled:
            return
        for sentence in self._accumulator.feed(piece):
            self._sentences.put(sentence)

    def finish(self, unfinished: bool = True) -> None:
        """No more text: whatever is left makes the last sentences (``unfinished`` False: the
        words after the last complete sentence are dropped, the text having failed)."""
        if unfinished and not self.cancelled:
            for sentence in self._accumulator.flush():
                self._sentences.put(sentence)
        self._sentences.put(_END)

    def cancel(self) -> None:
        """No more sentences, not even those queued: the engine stops after the one it is on."""
        self._cancelled.set()
        self._sentences.put(_END)

    def __iter__(self) -> Iterator[str]:
        while (sentence := self._sentences.get()) is not _END and not self.cancelled:
            yield sentence
