"""Home Assistant OS as these tests make it: musl (the engine cannot run in Home Assistant), a
Supervisor (the double's address as Home Assistant's hassio integration would hold it), and the
flow's screens as a user answers them. Shared by the flow tests and the add-on image's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from homeassistant import config_entries
from homeassistant.components import tts
from homeassistant.components.hassio.const import DATA_COMPONENT
from homeassistant.components.hassio.handler import HassIO
from homeassistant.const import CONF_URL
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers.aiohttp_client import async_get_clientsession

from custom_components.yomiage.addon_flow import ADDON_AIVISHUB
from custom_components.yomiage.const import (
    CONF_SPEAKERS,
    DOMAIN,
    SOURCE_ADDON,
    SOURCE_OFFICIAL,
    SOURCE_WYOMING,
)

from ..supervisor_double import SupervisorDouble
from .common import SPEAKERS
from .no_engine import musl


def as_home_assistant_os(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch, config: Path
) -> None:
    """musl, the Supervisor's token in the environment, an empty config folder (Home
    Assistant's tts cache starts empty)."""
    musl(monkeypatch)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("SUPERVISOR_TOKEN", "homeassistant-token")
    config.mkdir()
    hass.config.config_dir = str(config)


def supervisor_at(hass: HomeAssistant, double: SupervisorDouble) -> None:
    """The hassio integration loaded, its Supervisor client pointed at the double."""
    hass.config.components.add("hassio")
    hass.data[DATA_COMPONENT] = HassIO(hass.loop, async_get_clientsession(hass), double.host)


def speakers_of(tiny_bundle: Path) -> list[str]:
    return sorted(p.name for p in (tiny_bundle / SPEAKERS).iterdir() if p.is_dir())


async def choose(
    hass: HomeAssistant, result: config_entries.ConfigFlowResult, answer: dict[str, Any]
) -> config_entries.ConfigFlowResult:
    return await hass.config_entries.flow.async_configure(result["flow_id"], answer)


async def past_progress(
    hass: HomeAssistant,
    result: config_entries.ConfigFlowResult,
    step_id: str,
    action: str | None = None,
) -> config_entries.ConfigFlowResult:
    """The step after a progress screen, once its task has ended (minutes on a Pi); ``action``:
    its text, where not the step's own."""
    if result["type"] is FlowResultType.SHOW_PROGRESS:
        assert (result["step_id"], result["progress_action"]) == (step_id, action or step_id)
        await hass.async_block_till_done(wait_background_tasks=True)
        result = await hass.config_entries.flow.async_configure(result["flow_id"])
    return result


async def to_speakers(hass: HomeAssistant) -> config_entries.ConfigFlowResult:
    """Add integration → Yomiage → the add-on → official voices: the speaker choice."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.MENU, "engine_unsupported")
    assert result["menu_options"] == [SOURCE_ADDON, ADDON_AIVISHUB, SOURCE_WYOMING], (
        "the add-on first"
    )
    result = await choose(hass, result, {"next_step_id": SOURCE_ADDON})
    assert (result["type"], result["step_id"]) == (FlowResultType.MENU, SOURCE_ADDON)
    result = await choose(hass, result, {"next_step_id": SOURCE_OFFICIAL})
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "speakers")
    return result


async def app_aivishub_confirmation(
    hass: HomeAssistant, pasted: str
) -> config_entries.ConfigFlowResult:
    """Add integration → Yomiage → A voice from AivisHub (in the Yomiage app) → a model's page
    pasted: the confirmation (or the page form with AivisHub's refusal)."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await choose(hass, result, {"next_step_id": ADDON_AIVISHUB})
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "aivishub")
    return await choose(hass, result, {CONF_URL: pasted})


async def install_and_start(
    hass: HomeAssistant, result: config_entries.ConfigFlowResult, speaker: str
) -> config_entries.ConfigFlowResult:
    result = await choose(hass, result, {CONF_SPEAKERS: [speaker]})
    result = await past_progress(hass, result, "addon_install")
    return await past_progress(hass, result, "addon_start")


async def speak(hass: HomeAssistant, message: str) -> bytes:
    (entity_id,) = hass.states.async_entity_ids("tts")
    media_id = tts.generate_media_source_id(
        hass, message, engine=entity_id, language="ja", options={"preferred_format": "wav"}
    )
    _, data = await tts.async_get_media_source_audio(hass, media_id)
    return data


async def start_installed_addon(hass: HomeAssistant) -> config_entries.ConfigFlowResult:
    """Add integration → Yomiage → the add-on, which is installed: started, no questions."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await choose(hass, result, {"next_step_id": SOURCE_ADDON})
    return await past_progress(hass, result, "addon_start")
