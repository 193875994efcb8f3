"""The tts entity: Home Assistant options ↔ backend arguments, whole files and sentence streams."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from homeassistant.components.tts import TextToSpeechEntity, TtsAudioType, Voice
from homeassistant.components.tts.entity import TTSAudioRequest
from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers.device_registry import DeviceEntryType, DeviceInfo
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from . import YomiageConfigEntry
from .backend import SpeechPiece, Timing
from .const import (
    CONF_SMOOTH_START,
    CONF_VOICE,
    DEFAULT_LANGUAGE,
    DOMAIN,
    LANGUAGES,
    SUPPORTED_OPTIONS,
)
from .engine import SynthesisOptions
from .engine.audio.wav import wav_file, wav_stream_header
from .entry_options import synthesis_defaults, voice_choices
from .services import PREPARING
from .translated_errors import entry_placeholders, raised_translated

try:  # Home Assistant 2025.7 and later export it from the package
    from homeassistant.components.tts import TTSAudioResponse  # type: ignore[attr-defined]
except ImportError:  # 2025.4 – 2025.6 have it only here
    from homeassistant.components.tts.entity import TTSAudioResponse

_LOGGER = logging.getLogger(__name__)

# The engine serialises model runs itself, a server takes one connection per request: Home
# Assistant need not limit requests.
PARALLEL_UPDATES = 0


async def async_setup_entry(
    hass: HomeAssistant,
    entry: YomiageConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    async_add_entities([YomiageTTSEntity(entry)])


class YomiageTTSEntity(TextToSpeechEntity):
    """Speaks Japanese with the voices of one bundle (here or on a Yomiage server)."""

    # The entity's own name is all that the media browser and the Assist pipeline dialog list,
    # so it carries Yomiage and the voices' source itself, in no one language (as core's Google
    # Translate and OpenAI speech entities do): "Yomiage tiny", "Yomiage someone/voices".
    _attr_has_entity_name = False
    _attr_supported_languages = LANGUAGES
    _attr_default_language = DEFAULT_LANGUAGE

    def __init__(self, entry: YomiageConfigEntry) -> None:
        self._data = entry.runtime_data
        self._watch = entry.runtime_data.watch
        backend = entry.runtime_data.backend
        self._voices = [Voice(value, label) for value, label in voice_choices(backend.voices)]
        self._attr_unique_id = entry.entry_id
        self._attr_name = entity_name(entry.title)
        self._error_placeholders = entry_placeholders(entry.data)
        self._attr_device_info = entry_device(entry)
        self._attr_supported_options = [*SUPPORTED_OPTIONS, *backend.state_options]
        defaults = synthesis_defaults(
            entry.options, backend.default_voice, complete=backend.defaults_known
        )
        defaults[CONF_VOICE] = self._offered_voice(defaults[CONF_VOICE], entry.title)
        self._synthesis_defaults = defaults
        # The default voice first, the others in bundle order: Home Assistant's voice pickers
        # show the first voice (without choosing it) and new Assist pipelines store it.
        self._voices.sort(key=lambda voice: voice.voice_id != defaults[CONF_VOICE])

    @property
    def available(self) -> bool:
        """A server entry's entity while its server answers (the add-on restarting: not)."""
        return self._watch is None or self._watch.last_update_success

    async def async_added_to_hass(self) -> None:
        await super().async_added_to_hass()
        if self._watch is not None:
            self.async_on_remove(self._watch.async_add_listener(self.async_write_ha_state))

    @property
    def default_options(self) -> Mapping[str, Any]:
        """Everything that changes the audio, so that Home Assistant's cache key follows it: the
        synthesis defaults and the backend's state (the user dictionary in force)."""
        return {**self._synthesis_defaults, **self._data.backend.state_options}

    def _offered_voice(self, voice: str, title: str) -> str:
        """``voice`` if the bundle still offers it, else the bundle's first voice."""
        if voice in {offered.voice_id for offered in self._voices}:
            return voice
        _LOGGER.warning("%s has no voice %s any more; using the first one", title, voice)
        return self._data.backend.default_voice

    @callback
    def async_get_supported_voices(self, language: str) -> list[Voice] | None:
        return self._voices if language in LANGUAGES else None

    async def async_get_tts_audio(
        self, message: str, language: str, options: dict[str, Any]
    ) -> TtsAudioType:
        """The whole message as one WAV file."""
        synthesis_options = self._synthesis_options(options)
        with raised_translated(**self._error_placeholders):
            piece = await self._data.backend.async_synthesize(message, synthesis_options)
        self._data.timings.append(Timing.of([piece], streamed=False))
        return "wav", wav_file(piece.pcm, piece.sample_rate)

    async def async_stream_tts_audio(self, request: TTSAudioRequest) -> TTSAudioResponse:
        """One WAV header, then PCM per sentence as soon as the text of each has arrived. A
        message being prepared goes into the cache without a smooth start (services.py)."""
        synthesis_options = self._synthesis_options(request.options)
        if PREPARING.get():
            synthesis_options[CONF_SMOOTH_START] = False
        # Checks voice and options now, before any audio is promised.
        with raised_translated(**self._error_placeholders):
            pieces = self._data.backend.stream(request.message_gen, synthesis_options)
        return TTSAudioResponse("wav", self._wav_stream(pieces))

    async def _wav_stream(self, pieces: AsyncGenerator[SpeechPiece]) -> AsyncGenerator[bytes]:
        """The streaming WAV header (as soon as the rate is known), then each piece's PCM."""
        spoken: list[SpeechPiece] = []
        rate = self._data.backend.sample_rate
        try:
            if rate is not None:
                yield wav_stream_header(rate)
            while True:
                with raised_translated(**self._error_placeholders):
                    piece = await anext(pieces, None)
                if piece is None:
                    break
                if rate is None and not spoken:  # a server says its rate with the first audio
                    yield wav_stream_header(piece.sample_rate)
                spoken.append(piece)
                yield piece.pcm
        finally:
            await pieces.aclose()
        self._data.timings.append(Timing.of(spoken, streamed=True))

    def _synthesis_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The synthesis options this request sets: the request's over the entity's defaults,
        checked here (numbers may come as text) so that a bad one fails before any audio.
        The backend's state options (the user dictionary's fingerprint) only key Home
        Assistant's cache: a request that carries an older one (an Assist pipeline prepared
        before the words changed) is spoken with the words in force, like every other."""
        merged = {**self._synthesis_defaults, **options}
        chosen = {name: merged[name] for name in SUPPORTED_OPTIONS if name in merged}
        with raised_translated(**self._error_placeholders):
            checked = SynthesisOptions().with_values(chosen).as_dict()
        return {name: checked[name] for name in chosen}


def entity_name(title: str) -> str:
    """``title`` (the entry's: a folder, a repository, a server) with Yomiage in front."""
    return title if title.startswith("Yomiage") else f"Yomiage {title}"


def entry_device(entry: YomiageConfigEntry) -> DeviceInfo:
    """The entry's device, under the tts entity's own name: Home Assistant 2026.10 and later
    put the device's name before an entity's in its id unless the entity's name starts with it.
    The update entities of its AivisHub models are its too."""
    return DeviceInfo(
        identifiers={(DOMAIN, entry.entry_id)},
        name=entity_name(entry.title),
        manufacturer="Yomiage",
        model="Style-Bert-VITS2 JP-Extra",
        entry_type=DeviceEntryType.SERVICE,
    )
