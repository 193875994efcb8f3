"""Values and helpers shared by the Home Assistant tests."""

import asyncio
from collections.abc import AsyncGenerator
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
from homeassistant import config_entries
from homeassistant.components import tts
from homeassistant.config_entries import ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowManager, FlowResultType
from homeassistant.helpers.service_info.zeroconf import ZeroconfServiceInfo
from pytest_homeassistant_custom_component.common import async_mock_service

from custom_components.yomiage.const import CONF_SPEAKERS, DOMAIN, SOURCE_AIVISHUB
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.wyoming_contract import ZEROCONF_TYPE
from custom_components.yomiage.local_backend import LocalBackend

from ..fakeaivishub import manifest_of
from ..voice_files import AIVMX, DUO_AIVMX
from ..wav import read_wav

SPEAKERS = Path("onnx/speakers")  # speaker folders inside a bundle
# A private repository of the fake Hub (conftest.py's hub), and the token it needs.
PRIVATE = "someone/private-voices"
TOKEN = "hf_test_token"
LOOPBACK = "127.0.0.1"  # where the tests' Yomiage servers listen
# The AivisHub models of the fake AivisHub (conftest.py's aivis_hub): the fixtures' files.
TINY_A = AIVMX.read_bytes()
DUO = DUO_AIVMX.read_bytes()
TINY_A_UUID = str(manifest_of(TINY_A)["uuid"])
DUO_UUID = str(manifest_of(DUO)["uuid"])
AIVISHUB_PAGE = "https://hub.aivis-project.com/aivm-models/"
AIVISHUB_ENTITY = "tts.yomiage_aivishub"
# (AivisHub's answer to tiny-a's routes, what is pasted, the page form's error): each refusal.
AIVISHUB_REFUSALS = (
    ("status", "pasted", "error"),
    [
        (None, "https://example.com/voices/tiny-a", "aivishub_not_a_model"),
        (404, TINY_A_UUID, "aivishub_unknown_model"),
        (403, AIVISHUB_PAGE + TINY_A_UUID, "aivishub_private_model"),
        (503, TINY_A_UUID, "aivishub_hub_down"),
    ],
)


def engine_of(entry: ConfigEntry) -> Engine:
    """The engine a loaded local entry speaks with."""
    backend = entry.runtime_data.backend
    assert isinstance(backend, LocalBackend)
    return backend.engine


def record_engine_calls(entry: ConfigEntry, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the engine's synthesis methods, in the order Home Assistant calls them."""
    engine = engine_of(entry)
    used: list[str] = []
    for method in ("synthesize", "stream", "stream_sentences", "stream_arriving"):
        original = getattr(engine, method)

        def recorded(*args: Any, _method: str = method, _original: Any = original) -> Any:
            used.append(_method)
            return _original(*args)

        monkeypatch.setattr(engine, method, recorded)
    return used


async def speak_on_player(
    hass: HomeAssistant, entity_id: str, message: str, options: dict[str, Any]
) -> str:
    """``tts.speak`` on a media player (its ``play_media`` mocked), as an automation plays a
    message; the media id the player is given."""
    calls = async_mock_service(hass, "media_player", "play_media")
    await hass.services.async_call(
        tts.DOMAIN,
        "speak",
        {
            "entity_id": entity_id,
            "media_player_entity_id": "media_player.bedroom",
            "message": message,
            "options": options,
        },
        blocking=True,
    )
    return str(calls[-1].data["media_content_id"])


async def flow_menu(hass: HomeAssistant, choice: str) -> config_entries.ConfigFlowResult:
    """Add integration → Yomiage → ``choice`` (a source of the first menu)."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    return await hass.config_entries.flow.async_configure(
        result["flow_id"], {"next_step_id": choice}
    )


async def download_speakers(
    hass: HomeAssistant, flow_id: str, chosen: list[str]
) -> config_entries.ConfigFlowResult:
    """Submit the speakers, wait for the download task, return the step after it."""
    result = await hass.config_entries.flow.async_configure(flow_id, {CONF_SPEAKERS: chosen})
    assert result["type"] is FlowResultType.SHOW_PROGRESS, result
    assert result["progress_action"] == "download"
    await hass.async_block_till_done()
    return await hass.config_entries.flow.async_configure(flow_id)


async def aivishub_confirmation(
    hass: HomeAssistant, text: str, flow_id: str | None = None
) -> config_entries.ConfigFlowResult:
    """Add integration → Yomiage → A voice from AivisHub → ``text`` pasted (or, with
    ``flow_id``, pasted into that flow's page form): the confirmation, or the page's error."""
    if flow_id is None:
        flow_id = (await flow_menu(hass, SOURCE_AIVISHUB))["flow_id"]
    return await hass.config_entries.flow.async_configure(flow_id, {"url": text})


async def download_confirmed(
    hass: HomeAssistant, flow_id: str, flows: FlowManager[Any, Any] | None = None
) -> config_entries.ConfigFlowResult:
    """Confirm AivisHub's model, wait for its download, return the step after it (``flows``:
    the options flow manager for an entry's options)."""
    manager = flows or hass.config_entries.flow
    result = await manager.async_configure(flow_id, {})
    if result["type"] is not FlowResultType.SHOW_PROGRESS:
        return result  # a job done at once (no room on the disk): newer releases go straight on
    assert result["progress_action"] == "aivishub_download"
    await hass.async_block_till_done()
    return await manager.async_configure(flow_id)


async def aivishub_speech(
    hass: HomeAssistant, voice: str, entity_id: str = AIVISHUB_ENTITY
) -> bytes:
    """PCM of a message the AivisHub entry's entity (or ``entity_id``) speaks with ``voice``
    (not silence)."""
    media_id = tts.generate_media_source_id(
        hass,
        "おはようございます。七時です。",
        engine=entity_id,
        language="ja",
        options={tts.ATTR_PREFERRED_FORMAT: "wav", "voice": voice},
    )
    _, data = await tts.async_get_media_source_audio(hass, media_id)
    pcm = read_wav(data).pcm
    assert any(pcm), "speech, not silence"
    return bytes(pcm)


def zeroconf_discovery(
    name: str, host: str, port: int, properties: dict[str, str | None]
) -> ZeroconfServiceInfo:
    """What Home Assistant's zeroconf hands a flow for a Wyoming service ``name`` at ``host``."""
    return ZeroconfServiceInfo(
        ip_address=ip_address(host),
        ip_addresses=[ip_address(host)],
        port=port,
        hostname=f"{name}.local.",
        type=ZEROCONF_TYPE,
        name=f"{name}.{ZEROCONF_TYPE}",
        properties=properties,
    )


class HandFedMessage:
    """A message generator the test feeds by hand, like an LLM writing its reply."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.finished = False

    async def generate(self) -> AsyncGenerator[str]:
        while (piece := await self.queue.get()) is not None:
            yield piece
        self.finished = True


async def shown(
    hass: HomeAssistant, language: str, key: str, placeholders: dict[str, str] | None
) -> str:
    """What the frontend shows for a translation ``key`` (``config.abort.<reason>``,
    ``exceptions.<key>.message``, ...) in ``language``: its text with the placeholders filled,
    every one of them given."""
    from homeassistant.helpers.translation import async_get_translations

    category, _, rest = key.partition(".")
    texts = await async_get_translations(hass, language, category, {"yomiage"})
    text = texts[f"component.yomiage.{category}.{rest}"]
    filled = text.format(**(placeholders or {}))
    assert "{" not in filled, (key, filled)
    return filled
