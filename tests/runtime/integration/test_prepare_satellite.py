"""``yomiage.prepare`` for an Assist satellite's announcement: the satellite asks for the message
with its pipeline's engine, language and voice and its own audio format, so the message is
prepared as it will ask, and ``assist_satellite.announce`` then plays it without the engine."""

from __future__ import annotations

from typing import Any

import pytest
import voluptuous as vol
from homeassistant.components.assist_pipeline.pipeline import (
    async_get_pipeline,
    async_update_pipeline,
)
from homeassistant.components.tts import TextToSpeechEntity, TtsAudioType
from homeassistant.components.tts.const import DATA_COMPONENT as TTS_COMPONENT
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.yomiage.const import DOMAIN

from .common import record_engine_calls
from .satellite import PIPELINE_VOICE, SATELLITE, Satellite

MESSAGE = "おはようございます。七時です。今日は晴れです。"


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
    options = {"voice": PIPELINE_VOICE}  # the player's: as the satellite's pipeline, but no format
    await _prepare(hass, entity_id=entity_id, satellites=[SATELLITE], options=options)
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
    await async_update_pipeline(hass, async_get_pipeline(hass), tts_engine="tts.removed")
    with pytest.raises(HomeAssistantError, match="has no text-to-speech engine"):
        await _prepare(hass, satellites=[SATELLITE])
    with pytest.raises(HomeAssistantError, match=r"assist_satellite\.kitchen is not an Assist"):
        await _prepare(hass, satellites=["assist_satellite.kitchen"])
    # A call that names nobody fails the action's schema (how it is raised is Home Assistant's).
    with pytest.raises((vol.Invalid, HomeAssistantError), match="a Yomiage entity, an Assist"):
        await _prepare(hass)


async def test_every_target_is_checked_before_any_is_rendered(
    hass: HomeAssistant,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    satellite: Satellite,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = record_engine_calls(loaded_entry, monkeypatch)
    with pytest.raises(HomeAssistantError, match="is not an Assist satellite"):
        await _prepare(hass, entity_id=entity_id, satellites=[SATELLITE, "assist_satellite.den"])
    assert runs == [], "nothing rendered for a call that fails"
