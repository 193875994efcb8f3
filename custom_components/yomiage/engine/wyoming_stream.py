"""Text that arrives in pieces (an LLM reply being written), spoken sentence by sentence.

The engine's ``stream_sentences`` pulls complete sentences from a blocking iterator and yields one
audio chunk per sentence, with the pause after each sentence predicted from that sentence. Here
that iterator is a queue the connection fills as text arrives. Everything blocking (waiting for
the next sentence included) runs on the connection's own worker thread, so a client that is slow
to send text holds up nobody else.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from .options import SynthesisOptions
from .results import AudioChunk
from .text.split import SentenceAccumulator

if TYPE_CHECKING:
    from .engine import Engine

_END = None  # queued after the last sentence


class TextStream:
    """One ``synthesize-start`` … ``synthesize-stop`` stream of a connection.

    ``add_text`` and ``finish`` are called on the event loop; ``next_chunk`` and ``close`` block
    and belong on the connection's worker thread. Creating the stream validates the options
    (unknown voice, out-of-range values raise here), so create it on the worker thread too.
    """

    def __init__(self, engine: Engine, options: SynthesisOptions) -> None:
        self._accumulator = SentenceAccumulator()
        self._sentences: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._cancelled = threading.Event()
        self._chunks = engine.stream_sentences(self._arriving(), options)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def add_text(self, piece: str) -> None:
        """Queue every sentence the piece completes (nothing when the stream was cancelled)."""
        if self.cancelled:
            return
        for sentence in self._accumulator.feed(piece):
            self._sentences.put(sentence)

    def finish(self) -> None:
        """No more text: whatever is left makes the last sentences."""
        if not self.cancelled:
            for sentence in self._accumulator.flush():
                self._sentences.put(sentence)
        self._sentences.put(_END)

    def cancel(self) -> None:
        """Stop after the sentence being synthesised (client gone, or an error)."""
        self._cancelled.set()
        self._sentences.put(_END)

    def next_chunk(self) -> AudioChunk | None:
        """Blocks until the next sentence is spoken; None once the stream is over."""
        return next(self._chunks, None)

    def close(self) -> None:
        """Release the engine generator (runs its cleanup on this thread)."""
        close_chunks(self._chunks)

    def _arriving(self) -> Iterator[str]:
        while (sentence := self._sentences.get()) is not _END and not self.cancelled:
            yield sentence


def close_chunks(chunks: Iterator[AudioChunk]) -> None:
    """Close an engine stream that may not have run to its end (a generator, in practice)."""
    if isinstance(chunks, Generator):
        chunks.close()
