"""An Assist satellite for the tests, as ESPHome's voice kits are, on an Assist pipeline that
speaks with a Yomiage entity."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

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
from homeassistant.core import HomeAssistant, callback
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

SATELLITE = "assist_satellite.bedroom"
PIPELINE_VOICE = "tiny-b/Happy"


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
        self.asked: list[str] = []  # the URLs it was asked to announce, as each is asked
        self.played: list[bytes] = []

    async def async_announce(self, announcement: AssistSatelliteAnnouncement) -> None:
        self.asked.append(announcement.media_id)
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


async def add_satellite(
    hass: HomeAssistant, hass_client: ClientSessionGenerator, tts_entity_id: str
) -> Satellite:
    """``SATELLITE``, whose (preferred) Assist pipeline speaks Japanese with ``tts_entity_id``
    in ``PIPELINE_VOICE``."""
    await hass.config.async_update(internal_url="http://homeassistant.local:8123")
    assert await async_setup_component(hass, "homeassistant", {})  # Assist's exposed entities
    assert await async_setup_component(hass, "assist_pipeline", {})
    assert await async_setup_component(hass, "assist_satellite", {})
    await async_update_pipeline(
        hass,
        async_get_pipeline(hass),
        tts_engine=tts_entity_id,
        tts_language="ja",
        tts_voice=PIPELINE_VOICE,
    )
    client = await hass_client()

    async def fetch(url: str) -> bytes:
        response = await client.get(urlsplit(url).path)
        assert response.status == 200
        return await response.read()

    entity = Satellite(fetch)
    await hass.data[DATA_COMPONENT].async_add_entities([entity])
    return entity
