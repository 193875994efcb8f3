"""``yomiage.prepare``: a message rendered ahead into Home Assistant's TTS cache, so that the
later ``tts.speak`` plays it at once without running the engine (issue 30: wake-up alarms)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from homeassistant.components import media_source, tts
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.yomiage.const import DOMAIN

from ..engine.box import SlowBox
from ..wav import read_wav
from .common import engine_of, record_engine_calls, speak_on_player

MESSAGE = "おはようございます。七時です。今日は晴れです。"
OPTIONS = {"voice": "tiny-b/Happy", "speed": 1.2}
PREPARED_AUDIO_PROPERTY = "prepared_audio_s"  # read by tools/pi_bench.py


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
    assert runs == ["stream_arriving"]  # synthesized now, as Home Assistant streams it
    url = await _speak(hass, entity_id, OPTIONS)
    client = await hass_client()
    response = await client.get(url)
    assert response.status == 200
    played = await response.read()
    assert url.endswith(".mp3") and len(played) > 1000
    assert runs == ["stream_arriving"], "the alarm played from the cache"
    # Other options are another message: that one is synthesized when it is asked for.
    other = await client.get(await _speak(hass, entity_id, {**OPTIONS, "speed": 1.0}))
    assert other.status == 200 and await other.read() != played
    assert runs == ["stream_arriving", "stream_arriving"]


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


def _lead_s(wav: bytes) -> float:
    """Silence before the first speech sample of a WAV."""
    audio = read_wav(wav)
    samples = np.frombuffer(audio.pcm, dtype="<i2")
    return int(np.flatnonzero(samples)[0]) / audio.sample_rate


async def test_on_a_slow_box_a_message_starts_smoothly_but_is_prepared_without_the_lead(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    record_property: Callable[[str, object], None],
) -> None:
    """A message Home Assistant has whole, played while it is synthesized on a box slower than
    real time, opens with silence; prepared, nobody listens yet, and what goes into the cache
    (and plays later from it) starts with speech. The wait from ``tts.speak`` to the player's
    first bytes goes into the JUnit report, where tools.pi_bench reads it from a run under its
    CPU cap."""
    assert await async_setup_component(hass, "media_source", {})
    client = await hass_client()
    engine = engine_of(loaded_entry)
    wav = {"preferred_format": "wav", "noise": 0.0, "noise_w": 0.0}
    SlowBox(1.3).fit(engine)
    with pytest.MonkeyPatch.context() as patch:
        for minutes in ("五", "三"):  # the engine learns the box from what it speaks
            learning = f"あと{minutes}分で七時です。準備をしましょう。外は晴れです。"
            await _media_audio(hass, entity_id, learning, wav)
        extension, played = await _media_audio(hass, entity_id, MESSAGE, wav)
        assert extension == "wav" and _lead_s(played) > 0.5
        await hass.services.async_call(
            DOMAIN,
            "prepare",
            {"entity_id": entity_id, "message": MESSAGE, "options": {**wav, "speed": 1.1}},
            blocking=True,
        )
        runs = record_engine_calls(loaded_entry, patch)
        asked = time.perf_counter()
        response = await client.get(await _speak(hass, entity_id, {**wav, "speed": 1.1}))
        first_bytes = await response.content.read(4096)
        waited = time.perf_counter() - asked
        prepared = first_bytes + await response.read()
    record_property(PREPARED_AUDIO_PROPERTY, waited)  # its bound: tools.pi_bench's, not here
    assert runs == [], "played from the cache"
    assert _lead_s(prepared) < 0.05


async def _media_audio(
    hass: HomeAssistant, entity_id: str, message: str, options: dict[str, Any]
) -> tuple[str, bytes]:
    media_id = tts.generate_media_source_id(
        hass, message, engine=entity_id, language="ja", options=options
    )
    return await tts.async_get_media_source_audio(hass, media_id)
