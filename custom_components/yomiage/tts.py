"""The tts entity: Home Assistant options ↔ engine arguments, whole files and streamed sentences."""

from __future__ import annotations

import asyncio
import logging
import queue
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from homeassistant.components.tts import TextToSpeechEntity, TtsAudioType, Voice
from homeassistant.components.tts.entity import TTSAudioRequest
from homeassistant.core import HomeAssistant, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers.device_registry import DeviceEntryType, DeviceInfo
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from . import Timing, YomiageConfigEntry
from .const import (
    CONF_VOICE,
    DEFAULT_LANGUAGE,
    DOMAIN,
    LANGUAGES,
    SUPPORTED_OPTIONS,
    SYNTHESIS_NUMBERS,
)
from .engine.audio import to_wav_bytes, wav_stream_header
from .engine.errors import InvalidOptionError, YomiageError
from .engine.options import SynthesisOptions
from .engine.results import AudioChunk
from .engine.text.split import SentenceAccumulator
from .entry_options import synthesis_defaults, voice_choices

try:  # Home Assistant 2025.7 and later export it from the package
    from homeassistant.components.tts import TTSAudioResponse  # type: ignore[attr-defined]
except ImportError:  # 2025.4 – 2025.6 have it only here
    from homeassistant.components.tts.entity import TTSAudioResponse

_LOGGER = logging.getLogger(__name__)

# The engine serialises model runs itself; Home Assistant need not limit requests.
PARALLEL_UPDATES = 0


async def async_setup_entry(
    hass: HomeAssistant,
    entry: YomiageConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    async_add_entities([YomiageTTSEntity(entry)])


class YomiageTTSEntity(TextToSpeechEntity):
    """Speaks Japanese with the voices of one bundle."""

    # A name of its own (not None = the device's): Home Assistant's tts refuses unnamed engines.
    _attr_has_entity_name = True
    _attr_translation_key = "speech"
    _attr_supported_languages = LANGUAGES
    _attr_default_language = DEFAULT_LANGUAGE
    _attr_supported_options = SUPPORTED_OPTIONS

    def __init__(self, entry: YomiageConfigEntry) -> None:
        self._data = entry.runtime_data
        engine = entry.runtime_data.engine
        self._voices = [Voice(value, label) for value, label in voice_choices(engine.voices)]
        self._attr_unique_id = entry.entry_id
        self._attr_device_info = DeviceInfo(
            identifiers={(DOMAIN, entry.entry_id)},
            name=entry.title,
            manufacturer="Yomiage",
            model="Style-Bert-VITS2 JP-Extra",
            entry_type=DeviceEntryType.SERVICE,
        )
        # Everything that changes the audio is here, so Home Assistant's cache key follows it.
        defaults = synthesis_defaults(entry.options, engine.default_voice)
        defaults[CONF_VOICE] = self._offered_voice(defaults[CONF_VOICE], entry.title)
        self._attr_default_options = defaults

    def _offered_voice(self, voice: str, title: str) -> str:
        """``voice`` if the bundle still offers it, else the bundle's first voice."""
        if voice in {offered.voice_id for offered in self._voices}:
            return voice
        _LOGGER.warning("%s has no voice %s any more; using the first one", title, voice)
        return self._data.engine.default_voice

    @callback
    def async_get_supported_voices(self, language: str) -> list[Voice] | None:
        return self._voices if language in LANGUAGES else None

    async def async_get_tts_audio(
        self, message: str, language: str, options: dict[str, Any]
    ) -> TtsAudioType:
        """The whole message as one WAV file."""
        synthesis_options = self._synthesis_options(options)
        with _translated_errors():
            wav, timing = await self.hass.async_add_executor_job(
                self._synthesize_wav, message, synthesis_options
            )
        self._data.timings.append(timing)
        return "wav", wav

    async def async_stream_tts_audio(self, request: TTSAudioRequest) -> TTSAudioResponse:
        """One WAV header, then PCM per sentence as soon as the text of each has arrived."""
        synthesis_options = self._synthesis_options(request.options)
        feed = SentenceFeed()
        with _translated_errors():  # checks voice and options now, before any audio is promised
            chunks = self._data.engine.stream_sentences(feed, synthesis_options)
        return TTSAudioResponse("wav", self._stream_audio(request.message_gen, feed, chunks))

    def _synthesize_wav(self, message: str, options: SynthesisOptions) -> tuple[bytes, Timing]:
        synthesis = self._data.engine.synthesize(message, options)
        timing = Timing(
            characters=len(message),
            sentences=len(synthesis.sentences),
            audio_s=synthesis.audio_s,
            compute_s=synthesis.compute_s,
            streamed=False,
        )
        return to_wav_bytes(synthesis.audio, synthesis.sample_rate), timing

    async def _stream_audio(
        self,
        message_gen: AsyncGenerator[str],
        feed: SentenceFeed,
        chunks: Iterator[AudioChunk],
    ) -> AsyncGenerator[bytes]:
        feeder = self.hass.async_create_background_task(
            _feed_sentences(message_gen, feed), f"{DOMAIN} sentence feed"
        )
        spoken: list[AudioChunk] = []
        try:
            yield wav_stream_header(self._data.engine.sample_rate)
            while True:
                with _translated_errors():
                    chunk = await self.hass.async_add_executor_job(next, chunks, None)
                if chunk is None:
                    break
                spoken.append(chunk)
                yield chunk.pcm.astype("<i2").tobytes()
            await feeder  # a failing message generator fails the request too
        finally:
            feed.close()  # lets the engine's generator end if we stopped early
            _settle(feeder)
        self._data.timings.append(_stream_timing(spoken))

    def _synthesis_options(self, options: Mapping[str, Any]) -> SynthesisOptions:
        """Engine options from the request over the entity's defaults; numbers may come as text."""
        merged = {**(self.default_options or {}), **options}
        with _translated_errors():
            numbers = {name: _number(name, merged[name]) for name in SYNTHESIS_NUMBERS}
            return SynthesisOptions(voice=str(merged[CONF_VOICE]), **numbers).validated()


class SentenceFeed:
    """Complete sentences handed from the event loop to the engine's thread, which waits on them."""

    _END = None

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def put(self, sentence: str) -> None:
        self._queue.put(sentence)

    def close(self) -> None:
        self._queue.put(self._END)

    def __iter__(self) -> Iterator[str]:
        while (sentence := self._queue.get()) is not self._END:
            yield sentence


async def _feed_sentences(message_gen: AsyncGenerator[str], feed: SentenceFeed) -> None:
    """Cut the incoming text into sentences; each goes to the engine as soon as it is complete."""
    accumulator = SentenceAccumulator()
    try:
        async for piece in message_gen:
            for sentence in accumulator.feed(piece):
                feed.put(sentence)
        for sentence in accumulator.flush():
            feed.put(sentence)
    finally:
        feed.close()


def _settle(task: asyncio.Task[None]) -> None:
    """Stop the feeder, or take its error: the request has already failed for another reason."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def _stream_timing(chunks: list[AudioChunk]) -> Timing:
    return Timing(
        characters=sum(len(chunk.text) for chunk in chunks),
        sentences=len(chunks),
        audio_s=sum(chunk.audio_s for chunk in chunks),
        compute_s=sum(chunk.compute_s for chunk in chunks),
        streamed=True,
    )


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidOptionError(f"{name} must be a number, not {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise InvalidOptionError(f"{name} must be a number, not {value!r}") from err


@contextmanager
def _translated_errors() -> Iterator[None]:
    """Engine errors become translated Home Assistant errors; the engine keeps serving."""
    try:
        yield
    except YomiageError as err:
        raise HomeAssistantError(
            translation_domain=DOMAIN,
            translation_key=err.translation_key,
            translation_placeholders={"message": str(err)},
        ) from err
