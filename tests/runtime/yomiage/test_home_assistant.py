"""Home Assistant's own Wyoming integration against the server.

The config entry is made the way the add-on's discovery message makes it (Supervisor discovery
→ confirm), then the real ``tts`` component asks the Wyoming tts entity for audio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from homeassistant.config_entries import SOURCE_USER, ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component
from yomiage_engine.synthesis.engine import Engine
from yomiage_engine.text.split import split_sentences

from yomiage.wyoming_server import WyomingTtsServer

from ..wav import read_wav
from .client import THREE_SENTENCES, address, engine_pcm, engine_stream_pcm
from .home_assistant import add_from_discovery, tts_audio, tts_entity


@pytest.fixture(autouse=True)
def _own_config_dir(hass: HomeAssistant, tmp_path: Path) -> None:
    """A fresh config folder: HA's tts file cache must not serve audio from an earlier run."""
    hass.config.config_dir = str(tmp_path)


@pytest.fixture
async def wyoming_entry(
    hass: HomeAssistant, server: WyomingTtsServer
) -> AsyncIterator[ConfigEntry]:
    """Set up as after the add-on announced ``tcp://HOST:PORT`` through the Supervisor."""
    host, port = address(server)
    entry = await add_from_discovery(hass, {"uri": f"tcp://{host}:{port}"})
    assert entry.data == {"host": host, "port": port}
    yield entry
    assert await hass.config_entries.async_unload(entry.entry_id)


async def test_the_tts_entity_offers_every_voice_in_japanese(
    hass: HomeAssistant, wyoming_entry: ConfigEntry, engine: Engine
) -> None:
    entity = tts_entity(hass)
    assert entity.supported_languages == ["ja"]
    voices = entity.async_get_supported_voices("ja")
    assert voices is not None
    assert {voice.voice_id for voice in voices} == {
        f"{speaker}/{style}" for speaker, styles in engine.voices.items() for style in styles
    }


async def test_home_assistant_gets_the_engine_audio_as_a_wav_file(
    hass: HomeAssistant, wyoming_entry: ConfigEntry, engine: Engine
) -> None:
    voice = f"{next(iter(engine.voices))}/{next(iter(engine.voices.values()))[-1]}"
    extension, data = await tts_audio(hass, THREE_SENTENCES, voice)
    assert extension == "wav"
    audio = read_wav(data)
    assert (audio.sample_rate, audio.sample_width, audio.channels) == (engine.sample_rate, 2, 1)
    # Home Assistant 2025.4 asks for the message in one ``synthesize``; since 2025.7 it streams
    # the text (synthesize-start/chunk/stop), which the server speaks sentence by sentence.
    streamed = engine_stream_pcm(engine, split_sentences(THREE_SENTENCES), voice)
    assert audio.pcm in (engine_pcm(engine, THREE_SENTENCES, voice), streamed)


async def test_an_unknown_voice_fails_in_home_assistant_instead_of_hanging(
    hass: HomeAssistant, wyoming_entry: ConfigEntry
) -> None:
    # Home Assistant 2025.4 says "No TTS from yomiage"; since 2025.7 it passes the server's text on.
    with pytest.raises(HomeAssistantError, match=r"No TTS|unknown speaker 'nobody'"):
        await tts_audio(hass, "こんにちは。", "nobody/Neutral")


async def test_the_integration_can_also_be_added_by_hand(
    hass: HomeAssistant, server: WyomingTtsServer
) -> None:
    assert await async_setup_component(hass, "homeassistant", {})
    host, port = address(server)
    result = await hass.config_entries.flow.async_init(
        "wyoming", context={"source": SOURCE_USER}, data={"host": host, "port": port}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["title"] == "yomiage"
    await hass.async_block_till_done()
    assert await hass.config_entries.async_unload(result["result"].entry_id)
