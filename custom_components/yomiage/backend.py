"""What the entities need from whoever speaks: the engine here, or a Yomiage Wyoming server.

Both backends hand back 16-bit mono PCM with its rate, a whole message at once or sentence by
sentence, so the tts entity frames WAV the same way for both. Both say which AivisHub models they
speak and install a model's newest version, for the update entities.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .engine.audio.wav import PCM_SAMPLE_WIDTH

# The synthesis options a request sets (``SynthesisOptions`` names, checked values); the others
# are the backend's defaults: the engine's here, the server's settings on a server.
RequestOptions = Mapping[str, Any]
# How far an install has come (0 to 1), reported on the event loop.
InstallProgress = Callable[[float], None]


@dataclass(frozen=True)
class SpeechPiece:
    """Speech for a whole message or for one sentence of a stream."""

    pcm: bytes  # 16-bit little-endian mono samples
    sample_rate: int
    characters: int  # of the text it speaks
    sentences: int
    compute_s: float  # engine time here; request time for a server

    @property
    def audio_s(self) -> float:
        return len(self.pcm) / PCM_SAMPLE_WIDTH / self.sample_rate


@dataclass(frozen=True)
class Timing:
    """One finished request, for diagnostics."""

    characters: int
    sentences: int
    audio_s: float
    compute_s: float
    streamed: bool

    @classmethod
    def of(cls, pieces: Iterable[SpeechPiece], streamed: bool) -> Timing:
        spoken = list(pieces)
        return cls(
            characters=sum(piece.characters for piece in spoken),
            sentences=sum(piece.sentences for piece in spoken),
            audio_s=sum(piece.audio_s for piece in spoken),
            compute_s=sum(piece.compute_s for piece in spoken),
            streamed=streamed,
        )


@dataclass(frozen=True)
class InstalledModel:
    """An AivisHub model whose voices a backend speaks, as its file's manifest names it."""

    uuid: str
    name: str
    version: str


class SpeechBackend(Protocol):
    """Speaks Japanese; errors are the engine's ``YomiageError``s (translated by the entity)."""

    @property
    def defaults_known(self) -> bool:
        """Whether options a request leaves unset take the engine's defaults (not a server's
        own settings): the entity then states them all in its default options."""

    @property
    def state_options(self) -> Mapping[str, str]:
        """Options whose value is the backend's state that changes the audio (the user
        dictionary in force): the entity's defaults carry them into the cache key."""

    @property
    def voices(self) -> dict[str, list[str]]:
        """Speaker -> styles, in the bundle's order."""

    @property
    def default_voice(self) -> str:
        """``speaker/style`` for requests that name no voice."""

    @property
    def sample_rate(self) -> int | None:
        """Rate of the audio it produces; None while not known yet (a server tells with audio)."""

    async def async_synthesize(self, text: str, options: RequestOptions) -> SpeechPiece:
        """The whole message."""

    def stream(
        self, text: AsyncIterable[str], options: RequestOptions
    ) -> AsyncGenerator[SpeechPiece]:
        """One piece per sentence, each as soon as its text has arrived and it is spoken.

        Checks the options before returning, so a bad request fails before any audio is promised.
        """

    @property
    def aivishub_models(self) -> Mapping[str, InstalledModel]:
        """uuid -> the AivisHub models it keeps up to date (no network): those it downloaded
        from AivisHub, not files the user laid out."""

    async def async_install_aivishub_model(self, uuid: str, progress: InstallProgress) -> None:
        """Have model ``uuid``'s newest version fetched and put in place, the old one speaking
        meanwhile (here until the entry reloads; a server swaps the new one in itself); a
        failure is a ``YomiageError``, with nothing lost."""

    async def async_close(self) -> None:
        """Release what it holds (sessions, connections)."""

    def diagnostics(self) -> dict[str, Any]:
        """What it runs and offers, without absolute paths or secrets."""
