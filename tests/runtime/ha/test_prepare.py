"""``yomiage.prepare``: a message rendered ahead into Home Assistant's TTS cache, so that the
later ``tts.speak`` plays it at once without running the engine (issue 30: wake-up alarms)."""

from __future__ import annotations

from typing import Any

import pytest
from homeassistant.components import media_source
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.yomiage.const import DOMAIN

from .common import record_engine_calls, speak_on_player

MESSAGE = "おはようございます。七時です。今日は晴れです。"
OPTIONS = {"voice": "tiny-b/Happy", "speed": 1.2}


async def _speak(hass: HomeAssistant, entity_id: str, options: dict[str, Any]) -> str:
    """tts.speak on a media player; the URL the player is given."""
    media_id = await speak_on_player(hass, entity_id, MESSAGE, options)
    media = await media_source.async_resolve_media(hass, media_id, None)
    return str(media.url)


async def test_a_prepared_message_plays_without_running_the_engine(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await async_setup_component(hass, "media_source", {})
    runs = record_engine_calls(loaded_entry, monkeypatch)
    await hass.services.async_call(
        DOMAIN,
        "prepare",
        {"entity_id": entity_id, "message": MESSAGE, "options": OPTIONS},
        blocking=True,
    )
    assert runs == ["stream_sentences"]  # synthesized now, as Home Assistant streams it
    url = await _speak(hass, entity_id, OPTIONS)
    client = await hass_client()
    response = await client.get(url)
    assert response.status == 200
    played = await response.read()
    assert url.endswith(".mp3") and len(played) > 1000
    assert runs == ["stream_sentences"], "the alarm played from the cache"
    # Other options are another message: that one is synthesized when it is asked for.
    other = await client.get(await _speak(hass, entity_id, {**OPTIONS, "speed": 1.0}))
    assert other.status == 200 and await other.read() != played
    assert runs == ["stream_sentences", "stream_sentences"]


async def test_a_bad_option_fails_the_action_with_the_engines_message(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, entity_id: str
) -> None:
    with pytest.raises(HomeAssistantError, match="speed"):
        await hass.services.async_call(
            DOMAIN,
            "prepare",
            {"entity_id": entity_id, "message": MESSAGE, "options": {"speed": 0}},
            blocking=True,
        )


async def test_only_yomiage_entities_can_be_prepared(
    hass: HomeAssistant, loaded_entry: MockConfigEntry
) -> None:
    with pytest.raises(HomeAssistantError, match="not a Yomiage text-to-speech entity"):
        await hass.services.async_call(
            DOMAIN,
            "prepare",
            {"entity_id": "tts.somebody_else", "message": MESSAGE},
            blocking=True,
        )
