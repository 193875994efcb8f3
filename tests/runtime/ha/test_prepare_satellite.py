"""``yomiage.prepare`` for an Assist satellite's announcement: the satellite asks for the message
with its pipeline's engine, language and voice and its own audio format, so the message is
prepared as it will ask, and ``assist_satellite.announce`` then plays it without the engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
import voluptuous as vol
from homeassistant.components.assist_pipeline.pipeline import (
    PipelineEvent,
    async_get_pipeline,
    async_update_pipeline,
)
from homeassistant.components.assist_satellite import (
    AssistSatelliteAnnouncement,
    AssistSatelliteConfiguration,
    AssistSatelliteEntity,
    AssistSatelliteEntityFeature,
)
from homeassistant.components.assist_satellite.const import DATA_COMPONENT
from homeassistant.components.tts import TextToSpeechEntity, TtsAudioType
from homeassistant.components.tts.const import DATA_COMPONENT as TTS_COMPONENT
from homeassistant.core import HomeAssistant, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.yomiage.const import DOMAIN

from .common import record_engine_calls

MESSAGE = "おはようございます。七時です。今日は晴れです。"
VOICE = "tiny-b/Happy"
SATELLITE = "assist_satellite.bedroom"


class Satellite(AssistSatelliteEntity):
    """A voice satellite as ESPHome's voice kits are: it announces by fetching the URL it is
    given, in its own audio format."""

    _attr_supported_features = AssistSatelliteEntityFeature.ANNOUNCE

    def __init__(self, fetch: Callable[[str], Awaitable[bytes]]) -> None:
        self.entity_id = SATELLITE
        self._attr_tts_options = {
            "preferred_format": "flac",
            "preferred_sample_rate": 16000,
            "preferred_sample_channels": 1,
        }
        self._fetch = fetch
        self.played: list[bytes] = []

    async def async_announce(self, announcement: AssistSatelliteAnnouncement) -> None:
        self.played.append(await self._fetch(announcement.media_id))

    @callback
    def async_get_configuration(self) -> AssistSatelliteConfiguration:
        return AssistSatelliteConfiguration(
            available_wake_words=[], active_wake_words=[], max_active_wake_words=1
        )

    async def async_set_configuration(self, config: AssistSatelliteConfiguration) -> None:
        """Nothing to configure."""

    def on_pipeline_event(self, event: PipelineEvent) -> None:
        """No voice command is run here, only announcements."""


class OtherVoice(TextToSpeechEntity):
    """Another integration's text-to-speech entity."""

    entity_id = "tts.other"
    _attr_default_language = "ja"

    def __init__(self) -> None:
        self._attr_supported_languages = ["ja"]

    async def async_get_tts_audio(
        self, message: str, language: str, options: dict[str, Any]
    ) -> TtsAudioType:
        raise AssertionError("never asked: the action fails first")


@pytest.fixture
async def satellite(
    hass: HomeAssistant, hass_client: ClientSessionGenerator, entity_id: str
) -> Satellite:
    """A satellite whose (preferred) Assist pipeline speaks with the Yomiage entity."""
    await hass.config.async_update(internal_url="http://homeassistant.local:8123")
    assert await async_setup_component(hass, "homeassistant", {})  # Assist's exposed entities
    assert await async_setup_component(hass, "assist_pipeline", {})
    assert await async_setup_component(hass, "assist_satellite", {})
    await async_update_pipeline(
        hass, async_get_pipeline(hass), tts_engine=entity_id, tts_language="ja", tts_voice=VOICE
    )
    client = await hass_client()

    async def fetch(url: str) -> bytes:
        response = await client.get(urlsplit(url).path)
        assert response.status == 200
        return await response.read()

    entity = Satellite(fetch)
    await hass.data[DATA_COMPONENT].async_add_entities([entity])
    return entity


async def _prepare(hass: HomeAssistant, **data: Any) -> None:
    await hass.services.async_call(DOMAIN, "prepare", {"message": MESSAGE, **data}, blocking=True)


async def _announce(hass: HomeAssistant, message: str) -> None:
    await hass.services.async_call(
        "assist_satellite",
        "announce",
        {"entity_id": SATELLITE, "message": message, "preannounce": False},
        blocking=True,
    )


async def test_a_prepared_announcement_plays_without_running_the_engine(
    hass: HomeAssistant,
    loaded_entry: MockConfigEntry,
    satellite: Satellite,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = record_engine_calls(loaded_entry, monkeypatch)
    await _announce(hass, "こんばんは。")  # not prepared: synthesized when announced
    assert runs == ["stream_arriving"]
    await _prepare(hass, satellites=[SATELLITE])
    assert runs == ["stream_arriving"] * 2
    await _announce(hass, MESSAGE)
    assert runs == ["stream_arriving"] * 2, "the announcement played from the cache"
    assert [audio[:4] for audio in satellite.played] == [b"fLaC", b"fLaC"]
    assert len(satellite.played[1]) > 1000


async def test_a_satellite_is_prepared_beside_a_media_player(
    hass: HomeAssistant,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    satellite: Satellite,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One action, both ways the alarm may be played: the player's options and the
    satellite's differ, so the message is rendered once for each."""
    runs = record_engine_calls(loaded_entry, monkeypatch)
    await _prepare(hass, entity_id=entity_id, satellites=[SATELLITE], options={"voice": VOICE})
    assert runs == ["stream_arriving"] * 2
    await _announce(hass, MESSAGE)
    assert runs == ["stream_arriving"] * 2


async def test_a_satellite_that_does_not_speak_with_yomiage_fails_the_action(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, satellite: Satellite
) -> None:
    await hass.data[TTS_COMPONENT].async_add_entities([OtherVoice()])
    await async_update_pipeline(hass, async_get_pipeline(hass), tts_engine=OtherVoice.entity_id)
    with pytest.raises(HomeAssistantError, match=r"speaks with tts\.other, not a Yomiage voice"):
        await _prepare(hass, satellites=[SATELLITE])
    with pytest.raises(HomeAssistantError, match=r"assist_satellite\.kitchen is not an Assist"):
        await _prepare(hass, satellites=["assist_satellite.kitchen"])
    # A call that names nobody fails the action's schema (how it is raised is Home Assistant's).
    with pytest.raises((vol.Invalid, HomeAssistantError), match="a Yomiage entity, an Assist"):
        await _prepare(hass)
