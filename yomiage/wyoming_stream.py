"""Text that arrives in pieces (an LLM reply being written), spoken sentence by sentence.

The engine's ``stream_arriving`` pulls complete sentences from the text as it arrives
(arriving.py) and yields their audio, with the pause after each sentence predicted from that
sentence; a text sent whole in one chunk is spoken as a whole message (a smooth start).
Everything blocking (waiting for the next sentence included) runs on the connection's own worker
thread, so a client that is slow to send text holds up nobody else.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from yomiage_engine import ArrivingText, AudioChunk, SynthesisOptions

if TYPE_CHECKING:
    from yomiage_engine import Engine


class TextStream(ArrivingText):
    """One ``synthesize-start`` … ``synthesize-stop`` stream of a connection: its text, and the
    engine speaking it.

    ``add``, ``finish`` and ``cancel`` are called on the event loop; ``next_chunk`` and ``close``
    block and belong on the connection's worker thread. Creating the stream validates the
    options (unknown voice, out-of-range values raise here), so create it on the worker thread
    too.
    """

    def __init__(self, engine: Engine, options: SynthesisOptions) -> None:
        super().__init__(engine.clock)
        self._chunks = engine.stream_arriving(self, options)

    def next_chunk(self) -> AudioChunk | None:
        """Blocks until the next sentence is spoken; None once the stream is over."""
        return next(self._chunks, None)

    def close(self) -> None:
        """Release the engine generator (runs its cleanup on this thread)."""
        close_chunks(self._chunks)


def close_chunks(chunks: Iterator[AudioChunk]) -> None:
    """Close an engine stream that may not have run to its end (a generator, in practice)."""
    if isinstance(chunks, Generator):
        chunks.close()
