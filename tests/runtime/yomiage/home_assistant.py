"""Home Assistant's Wyoming integration as a user meets it: set up from the add-on's discovery
message, its tts entity, and audio asked for through the real ``tts`` component."""

from __future__ import annotations

import asyncio
from typing import Any

from homeassistant.components import tts
from homeassistant.config_entries import SOURCE_HASSIO, ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers.service_info.hassio import HassioServiceInfo
from homeassistant.setup import async_setup_component

ENTITY_ID = "tts.yomiage"


async def add_from_discovery(hass: HomeAssistant, config: dict[str, Any]) -> ConfigEntry:
    """The entry made when the user confirms what the add-on announced (``config``: the
    discovery message's, ``{"uri": "tcp://HOST:PORT"}``)."""
    assert await async_setup_component(hass, "homeassistant", {})  # conversation needs it
    assert await async_setup_component(hass, "http", {})
    discovery = HassioServiceInfo(config=config, name="Yomiage", slug="yomiage", uuid="1234")
    result = await hass.config_entries.flow.async_init(
        "wyoming", context={"source": SOURCE_HASSIO}, data=discovery
    )
    assert (result["type"], result.get("step_id")) == (FlowResultType.FORM, "hassio_confirm")
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    entry: ConfigEntry = result["result"]
    return entry


def tts_entity(hass: HomeAssistant) -> tts.TextToSpeechEntity:
    entity = hass.data[tts.DATA_COMPONENT].get_entity(ENTITY_ID)
    assert entity is not None
    return entity


async def tts_audio(hass: HomeAssistant, message: str, voice: str) -> tuple[str, bytes]:
    """A WAV file of ``message``, as a media player would fetch it."""
    media_id = tts.generate_media_source_id(
        hass,
        message,
        engine=ENTITY_ID,
        language="ja",
        options={tts.ATTR_VOICE: voice, tts.ATTR_PREFERRED_FORMAT: "wav"},
        cache=False,
    )
    return await asyncio.wait_for(tts.async_get_media_source_audio(hass, media_id), 60)
