"""The update entities of AivisHub models through Home Assistant's own update component: AivisHub's
newest version found in the background (every 6 hours), installed with progress, the entry
reloaded to speak it; AivisHub out of reach or refusing a model: the entity unavailable, the
voices speaking on; a failed install with nothing lost. The AivisHub entry's models (the engine
here) and a Yomiage server's (``yomiage serve --aivishub``: the server downloads)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from homeassistant.components.update import UpdateEntityFeature
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.const import STATE_OFF, STATE_ON, STATE_UNAVAILABLE
from homeassistant.core import Event, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.event import async_track_state_change_event
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import async_fire_time_changed
from wyoming.event import Event as WyomingEvent
from yomiage_engine.synthesis.engine import Engine

from custom_components.yomiage.aivishub_updates import CHECK_INTERVAL
from custom_components.yomiage.const import CONF_HOST, CONF_PORT, SOURCE_WYOMING
from custom_components.yomiage.engine.hub.aivishub import API_VARIABLE
from custom_components.yomiage.engine.wyoming_contract import AIVISHUB_UPDATE, AIVISHUB_UPDATED
from custom_components.yomiage.server_watch import POLL_INTERVAL
from yomiage.voice_updates import AivisHubVoices
from yomiage.wyoming_server import WyomingTtsServer

from ..fakeaivishub import FakeAivisHub, FakeModel, with_manifest
from ..voice_files import AIVMX
from ..yomiage.client import address, connect, read_until
from .common import (
    AIVISHUB_PAGE,
    DUO_UUID,
    TINY_A,
    TINY_A_UUID,
    aivishub_confirmation,
    aivishub_speech,
    download_confirmed,
    engine_of,
    flow_menu,
)

UPDATE = "update.yomiage_aivishub_tiny_a"
NEWER = with_manifest(TINY_A, version="1.1.0", description="Version 1.1: a calmer voice.")


@pytest.fixture(autouse=True)
async def _http(hass: HomeAssistant) -> None:
    assert await async_setup_component(hass, "http", {})


async def six_hours_later(hass: HomeAssistant) -> None:
    """The entities' next look at AivisHub."""
    async_fire_time_changed(hass, dt_util.utcnow() + CHECK_INTERVAL + timedelta(seconds=1))
    await hass.async_block_till_done(wait_background_tasks=True)


def attributes(hass: HomeAssistant, entity_id: str = UPDATE) -> dict[str, Any]:
    state = hass.states.get(entity_id)
    assert state is not None
    return {"state": state.state, **state.attributes}


async def test_a_newer_version_is_installed_from_the_update_entity(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub, models_dir: Path
) -> None:
    shown = attributes(hass)
    assert shown["state"] == STATE_OFF
    assert shown["friendly_name"] == "Yomiage AivisHub tiny-a"
    assert (shown["installed_version"], shown["latest_version"]) == ("1.0.0", "1.0.0")
    assert shown["title"] == "tiny-a"
    assert shown["release_url"] == AIVISHUB_PAGE + TINY_A_UUID
    assert shown["release_summary"].startswith("Random weights")
    assert shown["supported_features"] == UpdateEntityFeature.INSTALL | UpdateEntityFeature.PROGRESS

    aivis_hubs.add(FakeModel([TINY_A, NEWER]))  # the author uploads 1.1.0
    await six_hours_later(hass)
    shown = attributes(hass)
    assert shown["state"] == STATE_ON
    assert (shown["installed_version"], shown["latest_version"]) == ("1.0.0", "1.1.0")
    assert shown["release_summary"] == "Version 1.1: a calmer voice."

    seen = await install(hass)
    assert seen[0] == (True, 0)
    assert (True, 100) in seen, "progress shown up to the end"
    assert aivis_hubs.file_gets()[-1].endswith("/1.1.0.aivmx")

    assert aivishub_entry.state is ConfigEntryState.LOADED
    voice = engine_of(aivishub_entry).bundle.speakers["tiny-a"].aivm
    assert voice is not None and voice.version == "1.1.0", "the entry reloaded to speak it"
    shown = attributes(hass)
    assert shown["state"] == STATE_OFF and shown["installed_version"] == "1.1.0"
    assert (models_dir / "aivishub" / f"{TINY_A_UUID}.aivmx").read_bytes() == NEWER
    await aivishub_speech(hass, "tiny-a/Happy")


async def install(hass: HomeAssistant, entity_id: str = UPDATE) -> list[tuple[bool, int | None]]:
    """``update.install`` as the frontend's Install calls it; (in progress, percentage) of each
    state the entity showed meanwhile, until the entry has reloaded."""
    seen: list[tuple[bool, int | None]] = []

    def record(event: Event[Any]) -> None:
        state = event.data["new_state"]
        if state is not None and "in_progress" in state.attributes:  # not while it reloads
            seen.append((state.attributes["in_progress"], state.attributes["update_percentage"]))

    unsubscribe = async_track_state_change_event(hass, entity_id, record)
    try:
        await hass.services.async_call("update", "install", {"entity_id": entity_id}, blocking=True)
        await hass.async_block_till_done(wait_background_tasks=True)
    finally:
        unsubscribe()
    return seen


async def install_a_corrupt_file(hass: HomeAssistant, hub: FakeAivisHub, entity_id: str) -> None:
    """1.1.0 published, its file damaged on the way: Install fails with AivisHub's message."""
    hub.add(FakeModel([TINY_A, NEWER]))
    hub.corrupt(TINY_A_UUID)
    await six_hours_later(hass)
    with pytest.raises(HomeAssistantError) as caught:
        await hass.services.async_call("update", "install", {"entity_id": entity_id}, blocking=True)
    assert caught.value.translation_key == "aivishub_verification"


async def test_a_failed_install_loses_nothing(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub, models_dir: Path
) -> None:
    await install_a_corrupt_file(hass, aivis_hubs, UPDATE)
    shown = attributes(hass)
    assert (shown["state"], shown["in_progress"]) == (STATE_ON, False)
    assert shown["installed_version"] == "1.0.0"
    assert (models_dir / "aivishub" / f"{TINY_A_UUID}.aivmx").read_bytes() == TINY_A
    assert aivishub_entry.state is ConfigEntryState.LOADED
    await aivishub_speech(hass, "tiny-a/Happy")


async def test_aivishub_down_the_entity_is_unavailable_the_voice_speaks(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub
) -> None:
    aivis_hubs.answer(TINY_A_UUID, 503)
    await six_hours_later(hass)
    assert attributes(hass)["state"] == STATE_UNAVAILABLE
    await aivishub_speech(hass, "tiny-a/Sad")

    aivis_hubs.answer(TINY_A_UUID, None)
    await six_hours_later(hass)
    assert attributes(hass)["state"] == STATE_OFF


async def test_a_withdrawn_model_makes_only_its_own_entity_unavailable(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub
) -> None:
    confirmation = await aivishub_confirmation(hass, DUO_UUID)
    await download_confirmed(hass, confirmation["flow_id"])
    await hass.async_block_till_done(wait_background_tasks=True)
    duo = "update.yomiage_aivishub_tiny_duo"
    assert attributes(hass, duo)["state"] == STATE_OFF

    aivis_hubs.answer(TINY_A_UUID, 403)
    await six_hours_later(hass)
    assert attributes(hass)["state"] == STATE_UNAVAILABLE
    assert attributes(hass, duo)["state"] == STATE_OFF


async def test_a_start_with_aivishub_out_of_reach(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files are there: no request is needed to speak; the update entity waits."""
    with FakeAivisHub([]) as gone:
        monkeypatch.setenv(API_VARIABLE, gone.api)
        monkeypatch.setenv("HF_ENDPOINT", gone.url)
    assert await hass.config_entries.async_reload(aivishub_entry.entry_id)
    await hass.async_block_till_done(wait_background_tasks=True)
    assert aivishub_entry.state is ConfigEntryState.LOADED
    assert attributes(hass)["state"] == STATE_UNAVAILABLE
    await aivishub_speech(hass, "tiny-a/Happy")


# -- a Yomiage server's AivisHub models: the server downloads -------------------------------------
@pytest.fixture
async def server(
    hass: HomeAssistant, tmp_path: Path, tiny_bundle: Path, aivis_hub: FakeAivisHub
) -> AsyncIterator[WyomingTtsServer]:
    """``yomiage serve --aivishub <tiny-a>`` on a folder holding tiny-a 1.0.0."""
    folder = tmp_path / "server-voices"
    folder.mkdir()
    shutil.copyfile(AIVMX, folder / f"{TINY_A_UUID}.aivmx")

    def engine_for() -> Engine:
        return Engine(folder, device="cpu", threads=1, language_model=tiny_bundle)

    updates = await hass.async_add_executor_job(
        AivisHubVoices.of, folder, [TINY_A_UUID], engine_for
    )
    server = WyomingTtsServer(await hass.async_add_executor_job(engine_for), aivishub=updates)
    await server.start("tcp://127.0.0.1:0")
    yield server
    await server.stop()
    await hass.async_add_executor_job(server.engine.close)


async def server_entry(hass: HomeAssistant, server: WyomingTtsServer) -> tuple[str, str]:
    """The server added through the flow: its tts and update entities' ids."""
    host, port = address(server)
    result = await flow_menu(hass, SOURCE_WYOMING)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_HOST: host, CONF_PORT: port}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    await hass.async_block_till_done(wait_background_tasks=True)
    ids = {
        entity.domain: entity.entity_id
        for entity in er.async_entries_for_config_entry(
            er.async_get(hass), result["result"].entry_id
        )
    }
    return ids["tts"], ids["update"]


async def test_a_server_installs_the_newer_version(
    hass: HomeAssistant, server: WyomingTtsServer, aivis_hub: FakeAivisHub
) -> None:
    speaker, update = await server_entry(hass, server)
    shown = attributes(hass, update)
    assert shown["state"] == STATE_OFF
    assert (shown["installed_version"], shown["title"]) == ("1.0.0", "tiny-a")
    assert shown["release_url"] == AIVISHUB_PAGE + TINY_A_UUID

    aivis_hub.add(FakeModel([TINY_A, NEWER]))
    await six_hours_later(hass)
    assert attributes(hass, update)["state"] == STATE_ON
    seen = await install(hass, update)
    assert seen[0] == (True, 0) and (True, 100) in seen
    shown = attributes(hass, update)
    assert (shown["state"], shown["installed_version"]) == (STATE_OFF, "1.1.0")
    await aivishub_speech(hass, "tiny-a/Happy", speaker)


async def test_a_servers_failed_download_is_aivishubs_message(
    hass: HomeAssistant, server: WyomingTtsServer, aivis_hub: FakeAivisHub
) -> None:
    speaker, update = await server_entry(hass, server)
    await install_a_corrupt_file(hass, aivis_hub, update)
    assert attributes(hass, update)["installed_version"] == "1.0.0"
    await aivishub_speech(hass, "tiny-a/Happy", speaker)


async def test_a_server_updated_elsewhere_is_followed(
    hass: HomeAssistant, server: WyomingTtsServer, aivis_hub: FakeAivisHub
) -> None:
    """Another client (a second Home Assistant) has the server update: the entry's watch sees
    the new version and reloads the entry."""
    _, update = await server_entry(hass, server)
    aivis_hub.add(FakeModel([TINY_A, NEWER]))
    async with connect(server) as client:
        await client.write_event(WyomingEvent(type=AIVISHUB_UPDATE, data={"model": TINY_A_UUID}))
        await read_until(client, AIVISHUB_UPDATED)
    async_fire_time_changed(hass, dt_util.utcnow() + POLL_INTERVAL + timedelta(seconds=1))
    await hass.async_block_till_done(wait_background_tasks=True)
    assert attributes(hass, update)["installed_version"] == "1.1.0"
