"""The engine on this machine as the speech backend: blocking engine calls in executor jobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeassistant.core import HomeAssistant

from .backend import InstalledModel, InstallProgress, RequestOptions, SpeechPiece
from .const import DOMAIN, OPTION_DICTIONARY
from .engine import ArrivingText, SynthesisOptions
from .engine.hub.aivishub import fetch_model, model_detail
from .engine.hub.download import Progress, ProgressCallback
from .shared_dictionary import SharedDictionary

if TYPE_CHECKING:
    from .engine import AudioChunk, Engine
    from .engine.aivm import AivmVoice


class LocalBackend:
    """One engine (one bundle) and the user dictionary shared by every local entry;
    ``aivishub``: the AivisHub entry's folder, whose models it keeps up to date."""

    def __init__(
        self,
        hass: HomeAssistant,
        engine: Engine,
        dictionary: SharedDictionary,
        aivishub: Path | None = None,
    ) -> None:
        self.engine = engine
        self._hass = hass
        self._dictionary = dictionary
        self._aivishub = aivishub

    defaults_known = True

    @property
    def state_options(self) -> Mapping[str, str]:
        """The user dictionary in force changes readings: it belongs in the cache key."""
        return {OPTION_DICTIONARY: self._dictionary.fingerprint}

    @property
    def voices(self) -> dict[str, list[str]]:
        return self.engine.voices

    @property
    def default_voice(self) -> str:
        return self.engine.default_voice

    @property
    def sample_rate(self) -> int:
        return self.engine.sample_rate

    async def async_synthesize(self, text: str, options: RequestOptions) -> SpeechPiece:
        synthesis_options = SynthesisOptions().with_values(options)
        return await self._hass.async_add_executor_job(self._synthesize, text, synthesis_options)

    def stream(
        self, text: AsyncIterable[str], options: RequestOptions
    ) -> AsyncGenerator[SpeechPiece]:
        arriving = ArrivingText(self.engine.clock)  # a whole message comes as one piece
        # checks voice and options now
        chunks = self.engine.stream_arriving(arriving, SynthesisOptions().with_values(options))
        return self._speak(text, arriving, chunks)

    @property
    def aivishub_models(self) -> dict[str, InstalledModel]:
        """The models of the files it loaded, on the AivisHub entry (a local folder's files
        are the user's to update)."""
        if self._aivishub is None:
            return {}
        return {
            aivm.model_uuid: InstalledModel(aivm.model_uuid, aivm.model_name, aivm.version)
            for files in self.engine.bundle.speakers.values()
            if (aivm := files.aivm) is not None
        }

    async def async_install_aivishub_model(self, uuid: str, progress: InstallProgress) -> None:
        """The newest file replaces the old in one rename; the engine has the old one open
        and speaks on until the entry reloads."""
        assert self._aivishub is not None, "only the AivisHub entry has models to install"

        def report(step: Progress) -> None:
            self._hass.loop.call_soon_threadsafe(progress, step.fraction)

        await self._hass.async_add_executor_job(partial(_install, self._aivishub, uuid, report))

    async def async_close(self) -> None:
        await self._hass.async_add_executor_job(self.engine.close)

    def diagnostics(self) -> dict[str, Any]:
        engine = self.engine
        bundle = engine.bundle
        return {
            "backend": "local",
            "device": engine.device,
            "threads": engine.threads,
            "speed_x_real_time": engine.speed_x_real_time,
            "sample_rate": engine.sample_rate,
            "default_voice": engine.default_voice,
            "bert_graph": bundle.relative(bundle.bert_q8),
            "has_fp32_bert": bundle.bert_fp32 is not None,
            "speakers": {
                name: {
                    "styles": list(files.config.styles),
                    "synthesizer": bundle.relative(files.synthesizer),
                    "has_duration_predictor": files.duration_predictor is not None,
                    "voice_file": _voice_file(files.aivm),
                }
                for name, files in bundle.speakers.items()
            },
            "user_dictionary_fingerprint": self._dictionary.fingerprint,
        }

    def _synthesize(self, text: str, options: SynthesisOptions) -> SpeechPiece:
        synthesis = self.engine.synthesize(text, options)
        return SpeechPiece(
            pcm=synthesis.audio.astype("<i2").tobytes(),
            sample_rate=synthesis.sample_rate,
            characters=len(text),
            sentences=len(synthesis.sentences),
            compute_s=synthesis.compute_s,
        )

    async def _speak(
        self, text: AsyncIterable[str], arriving: ArrivingText, chunks: Iterator[AudioChunk]
    ) -> AsyncGenerator[SpeechPiece]:
        feeder = self._hass.async_create_background_task(
            _feed(text, arriving), f"{DOMAIN} sentence feed"
        )
        try:
            while (chunk := await self._next_chunk(chunks)) is not None:
                yield _piece(chunk)
            await feeder  # a failing message generator fails the request too
        finally:
            arriving.cancel()  # lets the engine's generator end if we stopped early
            _settle(feeder)

    async def _next_chunk(self, chunks: Iterator[AudioChunk]) -> AudioChunk | None:
        return await self._hass.async_add_executor_job(next, chunks, None)


async def _feed(text: AsyncIterable[str], arriving: ArrivingText) -> None:
    """Hand the message on as it comes; each sentence goes to the engine once complete. A failing
    message generator ends it without its unfinished sentence."""
    try:
        async for piece in text:
            arriving.add(piece)
    except BaseException:
        arriving.finish(unfinished=False)
        raise
    arriving.finish()


def _settle(task: asyncio.Task[None]) -> None:
    """Stop the feeder, or take its error: the request has already failed for another reason."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def _piece(chunk: AudioChunk) -> SpeechPiece:
    return SpeechPiece(
        pcm=chunk.pcm.astype("<i2").tobytes(),
        sample_rate=chunk.sample_rate,
        characters=len(chunk.text) if chunk.starts_sentence else 0,
        sentences=1 if chunk.starts_sentence else 0,
        compute_s=chunk.compute_s,
    )


def _install(folder: Path, uuid: str, progress: ProgressCallback) -> None:
    fetch_model(folder, model_detail(uuid), progress=progress)


def _voice_file(aivm: AivmVoice | None) -> dict[str, Any] | None:
    """What an AIVMX voice's manifest says of it; None for a bundle's speaker folder."""
    if aivm is None:
        return None
    return {
        "model": aivm.model_name,
        "version": aivm.version,
        "description": aivm.description,
        "license": aivm.license,
        "creators": list(aivm.creators),
    }
