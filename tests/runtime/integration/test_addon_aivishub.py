"""A voice from AivisHub on Home Assistant OS (addon_flow.py): the Supervisor double, our add-on a
real process of its run script fetching from the fake AivisHub (and the official language model
from the fake Hub), the entry on it speaking the model's voices. Installed with the model, or the
model added to the add-on installed (its official voices kept), added and removed in the entry's
options; each failure with its own reason and the add-on's voices as they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.const import CONF_URL
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import entity_registry as er
from homeassistant.setup import async_setup_component

from custom_components.yomiage.addon_flow import ADDON_AIVISHUB
from custom_components.yomiage.const import CONF_MODELS, DOMAIN, SOURCE_ADDON
from custom_components.yomiage.supervisor import ADDON_SLUG

from ..fakeaivishub import LICENSE_TEXT, FakeAivisHub
from ..supervisor_double import SupervisorDouble
from ..yomiage.addon import RunScriptAddon, load_run_script
from .common import (
    AIVISHUB_PAGE,
    AIVISHUB_REFUSALS,
    DUO_UUID,
    TINY_A,
    TINY_A_UUID,
    aivishub_speech,
    shown,
)
from .home_assistant_os import (
    app_aivishub_confirmation,
    choose,
    past_progress,
    speakers_of,
    start_installed_addon,
)

APP_ENTITY = "tts.yomiage_app"
RESTART = f"POST /addons/{ADDON_SLUG}/restart"
SET_OPTIONS = f"POST /addons/{ADDON_SLUG}/options"


@pytest.fixture(autouse=True)
async def _http(hass: HomeAssistant) -> None:
    assert await async_setup_component(hass, "http", {})


def app_models_folder(addon: RunScriptAddon) -> Path:
    """Where the add-on keeps the official voices, and the AivisHub models that join them."""
    return addon.data / "voices" / "lemondouble--hayakoe"


async def install_with(
    hass: HomeAssistant, confirmation: config_entries.ConfigFlowResult
) -> config_entries.ConfigFlowResult:
    """Confirm, then the add-on's install and first start, as the user waits for them."""
    result = await choose(hass, confirmation, {})
    result = await past_progress(hass, result, "addon_install")
    assert result["description_placeholders"] == {"name": "tiny-a", "size": "2 MB"}
    return await past_progress(hass, result, "addon_start", "addon_start_aivishub")


async def added(
    hass: HomeAssistant, confirmation: config_entries.ConfigFlowResult, flows: Any = None
) -> config_entries.ConfigFlowResult:
    """Confirm, then the installed add-on's restart with the model (``flows``: an options
    flow's manager)."""
    manager = flows or hass.config_entries.flow
    result = await manager.async_configure(confirmation["flow_id"], {})
    assert (result["type"], result["progress_action"]) == (
        FlowResultType.SHOW_PROGRESS,
        "addon_aivishub_add",
    )
    assert (
        result["description_placeholders"]["name"]
        == confirmation["description_placeholders"]["name"]
    )
    await hass.async_block_till_done(wait_background_tasks=True)
    return await manager.async_configure(result["flow_id"])


async def app_entry(hass: HomeAssistant) -> ConfigEntry:
    """The installed add-on, started from Add integration: its entry, loaded."""
    result = await start_installed_addon(hass)
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    await hass.async_block_till_done(wait_background_tasks=True)
    entry: ConfigEntry = result["result"]
    return entry


def changes(double: SupervisorDouble, since: int) -> list[str]:
    """What Home Assistant changed through the Supervisor after the first ``since`` changes (the
    add-on's own announcements, which follow each start, left out)."""
    return [step for step in double.steps()[since:] if step != "POST /discovery"]


def voices_of(entry: ConfigEntry) -> set[str]:
    assert entry.state is ConfigEntryState.LOADED
    return set(entry.runtime_data.backend.voices)


async def test_from_add_integration_to_speech_with_a_voice_from_aivishub(
    hass: HomeAssistant,
    supervised: SupervisorDouble,
    addon: RunScriptAddon,
    aivis_hub: FakeAivisHub,
) -> None:
    """The menu, the page, the confirmation, the install's and the first start's progress: the
    entry on the add-on speaks the model, and offers its updates."""
    confirmation = await app_aivishub_confirmation(hass, AIVISHUB_PAGE + TINY_A_UUID)
    assert (confirmation["type"], confirmation["step_id"]) == (
        FlowResultType.FORM,
        "aivishub_confirm",
    )
    assert confirmation["description_placeholders"]["license"] == f"> {LICENSE_TEXT}"
    assert confirmation["description_placeholders"]["license_type"] == "ACML 1.0"
    assert aivis_hub.file_gets() == [] and supervised.steps() == [], "nothing before confirming"

    result = await install_with(hass, confirmation)
    assert result["type"] is FlowResultType.CREATE_ENTRY, (result, addon.log.read_text())
    assert result["title"] == "Yomiage app"
    # The add-on's defaults, with the model as its voices: what its run script reads.
    assert supervised.options == {
        **supervised.config["options"],
        "voices": "aivishub",
        "aivishub_models": [TINY_A_UUID],
    }
    options = load_run_script().AddonOptions.from_dict(supervised.options)
    assert (options.voices, options.aivishub_models) == ("aivishub", (TINY_A_UUID,))
    assert (addon.data / "voices" / "aivishub" / f"{TINY_A_UUID}.aivmx").read_bytes() == TINY_A
    await hass.async_block_till_done(wait_background_tasks=True)
    await aivishub_speech(hass, "tiny-a/Sad", APP_ENTITY)
    entities = er.async_entries_for_config_entry(er.async_get(hass), result["result"].entry_id)
    (update,) = [entity.entity_id for entity in entities if entity.domain == "update"]
    state = hass.states.get(update)
    assert state is not None and state.attributes["installed_version"] == "1.0.0"

    # Its one model stays: the add-on speaks nothing else.
    flows = hass.config_entries.options
    menu = await flows.async_init(result["result"].entry_id)
    assert menu["menu_options"] == ["server", ADDON_AIVISHUB, "addon_aivishub_remove"]
    form = await flows.async_configure(menu["flow_id"], {"next_step_id": "addon_aivishub_remove"})
    form = await flows.async_configure(form["flow_id"], {CONF_MODELS: [TINY_A_UUID]})
    assert form["errors"] == {"base": "addon_aivishub_keep_one"}
    assert await shown(hass, "ja", "options.error.addon_aivishub_keep_one", {})


async def test_a_voice_from_aivishub_joins_the_apps_official_voices(
    hass: HomeAssistant,
    installed: SupervisorDouble,
    addon: RunScriptAddon,
    aivis_hub: FakeAivisHub,
    tiny_bundle: Path,
) -> None:
    entry = await app_entry(hass)
    official = speakers_of(tiny_bundle)[0]
    before = dict(installed.options)
    calls = len(installed.steps())

    result = await added(hass, await app_aivishub_confirmation(hass, DUO_UUID))
    assert (result["type"], result["reason"]) == (
        FlowResultType.ABORT,
        "addon_aivishub_model_added",
    )
    assert "tiny-duo" in await shown(
        hass, "ja", "config.abort.addon_aivishub_model_added", result["description_placeholders"]
    )
    assert installed.options == {**before, "aivishub_models": [DUO_UUID]}, "official kept"
    assert changes(installed, calls) == [SET_OPTIONS, RESTART]
    await hass.async_block_till_done(wait_background_tasks=True)
    assert hass.config_entries.async_entries(DOMAIN) == [entry]
    assert voices_of(entry) == {official, "duo-a", "duo-b"}, "reloaded with the model's voices"
    await aivishub_speech(hass, "duo-b/Happy", APP_ENTITY)
    await aivishub_speech(hass, f"{official}/Neutral", APP_ENTITY)

    again = await app_aivishub_confirmation(hass, AIVISHUB_PAGE + DUO_UUID)
    assert (again["type"], again["reason"]) == (
        FlowResultType.ABORT,
        "addon_aivishub_model_present",
    )
    assert changes(installed, calls) == [SET_OPTIONS, RESTART], "nothing asked again"


async def test_a_model_the_app_cannot_fetch_leaves_its_voices_as_they_were(
    hass: HomeAssistant,
    installed: SupervisorDouble,
    addon: RunScriptAddon,
    aivis_hub: FakeAivisHub,
    tiny_bundle: Path,
) -> None:
    """AivisHub fails the add-on's download (it answered Home Assistant a moment before): the
    add-on stops, its log says which model; its options go back, it starts again as it was."""
    entry = await app_entry(hass)
    before = dict(installed.options)
    calls = len(installed.steps())
    confirmation = await app_aivishub_confirmation(hass, DUO_UUID)
    aivis_hub.answer(DUO_UUID, 503)

    result = await added(hass, confirmation)
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_stopped")
    assert f"could not download AivisHub model {DUO_UUID}" in addon.log.read_text()
    assert changes(installed, calls) == [SET_OPTIONS, RESTART, SET_OPTIONS, RESTART]
    assert installed.options == before
    assert installed.state == "started"
    await hass.async_block_till_done(wait_background_tasks=True)
    assert entry.state is ConfigEntryState.LOADED
    await aivishub_speech(hass, f"{speakers_of(tiny_bundle)[0]}/Neutral", APP_ENTITY)


async def test_a_refused_restart_is_its_own_reason(
    hass: HomeAssistant,
    installed: SupervisorDouble,
    addon: RunScriptAddon,
    aivis_hub: FakeAivisHub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await app_entry(hass)
    before = dict(installed.options)
    installed.refuse["restart"] = "the Supervisor says no to restart"
    result = await added(hass, await app_aivishub_confirmation(hass, DUO_UUID))
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_start_failed")
    assert "the Supervisor says no to restart" in caplog.text
    assert installed.options == before, "put back"
    assert installed.state == "started", "never stopped"


async def test_a_first_start_that_cannot_fetch_the_model_then_a_new_try(
    hass: HomeAssistant,
    supervised: SupervisorDouble,
    addon: RunScriptAddon,
    aivis_hub: FakeAivisHub,
) -> None:
    """The first start's download fails: the start's own reason, the add-on kept for its log.
    The next try finds it installed without an entry: it restarts it, then adds the entry."""
    confirmation = await app_aivishub_confirmation(hass, TINY_A_UUID)
    aivis_hub.answer(TINY_A_UUID, 503)
    result = await install_with(hass, confirmation)
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_stopped")
    assert f"could not download AivisHub model {TINY_A_UUID}" in addon.log.read_text()
    assert supervised.installed and supervised.options["aivishub_models"] == [TINY_A_UUID]
    assert not hass.config_entries.async_entries(DOMAIN)

    aivis_hub.answer(TINY_A_UUID, None)
    confirmation = await app_aivishub_confirmation(hass, AIVISHUB_PAGE + TINY_A_UUID)
    result = await added(hass, confirmation)
    assert result["type"] is FlowResultType.CREATE_ENTRY, (result, addon.log.read_text())
    assert supervised.options["aivishub_models"] == [TINY_A_UUID], "listed once"
    await hass.async_block_till_done(wait_background_tasks=True)
    await aivishub_speech(hass, "tiny-a/Happy", APP_ENTITY)


@pytest.mark.parametrize(*AIVISHUB_REFUSALS)
async def test_aivishubs_refusals_are_the_page_forms_errors(
    hass: HomeAssistant,
    supervised: SupervisorDouble,
    aivis_hub: FakeAivisHub,
    status: int | None,
    pasted: str,
    error: str,
) -> None:
    if status is not None:
        aivis_hub.answer(TINY_A_UUID, status)
    result = await app_aivishub_confirmation(hass, pasted)
    assert (result["step_id"], result["errors"]) == ("aivishub", {"base": error})
    assert supervised.steps() == [], "nothing installed"


async def test_an_app_speaking_a_folder_takes_no_model(
    hass: HomeAssistant, installed: SupervisorDouble
) -> None:
    installed.options.update(voices="local", local_folder="/share/yomiage")
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await choose(hass, result, {"next_step_id": ADDON_AIVISHUB})
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_aivishub_local")
    assert "/share/yomiage" in await shown(
        hass, "ja", "config.abort.addon_aivishub_local", result["description_placeholders"]
    )


async def test_the_apps_voice_menu_offers_aivishub_too(
    hass: HomeAssistant, supervised: SupervisorDouble, aivis_hub: FakeAivisHub
) -> None:
    """Install the Yomiage app → its voices: a voice from AivisHub is one of them."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await choose(hass, result, {"next_step_id": SOURCE_ADDON})
    assert ADDON_AIVISHUB in result["menu_options"]
    result = await choose(hass, result, {"next_step_id": ADDON_AIVISHUB})
    result = await choose(hass, result, {CONF_URL: TINY_A_UUID})
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "aivishub_confirm")


async def test_the_app_entrys_options_add_and_remove_a_model(
    hass: HomeAssistant,
    installed: SupervisorDouble,
    addon: RunScriptAddon,
    aivis_hub: FakeAivisHub,
    tiny_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Added as in the setup flow; removed: the add-on restarts without it and deletes its file
    and the graphs prepared from it (else it would go on speaking it)."""
    monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", "1")  # the add-on prepares graphs: removed too
    entry = await app_entry(hass)
    official = speakers_of(tiny_bundle)[0]
    flows = hass.config_entries.options
    menu = await flows.async_init(entry.entry_id)
    assert (menu["type"], menu["step_id"]) == (FlowResultType.MENU, "addon_menu")
    assert menu["menu_options"] == ["server", ADDON_AIVISHUB], "nothing to remove yet"

    page = await flows.async_configure(menu["flow_id"], {"next_step_id": ADDON_AIVISHUB})
    assert (page["type"], page["step_id"]) == (FlowResultType.FORM, "aivishub")
    confirmation = await flows.async_configure(page["flow_id"], {CONF_URL: DUO_UUID})
    assert confirmation["step_id"] == "aivishub_confirm"
    result = await added(hass, confirmation, flows)
    assert (result["type"], result["reason"]) == (
        FlowResultType.ABORT,
        "addon_aivishub_model_added",
    )
    await hass.async_block_till_done(wait_background_tasks=True)
    assert installed.options["aivishub_models"] == [DUO_UUID]
    assert voices_of(entry) == {official, "duo-a", "duo-b"}
    model_file = app_models_folder(addon) / f"{DUO_UUID}.aivmx"
    prepared = addon.data / "prepared-graphs" / "sessions"
    assert model_file.is_file() and any(p.name.startswith(DUO_UUID) for p in prepared.iterdir())

    menu = await flows.async_init(entry.entry_id)
    assert menu["menu_options"] == ["server", ADDON_AIVISHUB, "addon_aivishub_remove"]
    form = await flows.async_configure(menu["flow_id"], {"next_step_id": "addon_aivishub_remove"})
    offered = form["data_schema"].schema[CONF_MODELS].config["options"]
    assert [(o["value"], o["label"]) for o in offered] == [(DUO_UUID, "tiny-duo")]
    form = await flows.async_configure(form["flow_id"], {CONF_MODELS: []})
    assert form["errors"] == {"base": "aivishub_none_chosen"}
    result = await flows.async_configure(form["flow_id"], {CONF_MODELS: [DUO_UUID]})
    assert (result["type"], result["progress_action"]) == (
        FlowResultType.SHOW_PROGRESS,
        "addon_restart",
    )
    await hass.async_block_till_done(wait_background_tasks=True)
    result = await flows.async_configure(result["flow_id"])
    assert (result["type"], result["reason"]) == (
        FlowResultType.ABORT,
        "addon_aivishub_models_removed",
    )
    assert installed.options["aivishub_models"] == []
    assert installed.options["speakers"] == [official], "the official voices stay"
    assert not model_file.exists(), "deleted by the add-on at its start"
    assert not any(p.name.startswith(DUO_UUID) for p in prepared.iterdir())
    assert "deleting AivisHub models no longer listed" in addon.log.read_text()
    await hass.async_block_till_done(wait_background_tasks=True)
    assert voices_of(entry) == {official}
    await aivishub_speech(hass, f"{official}/Neutral", APP_ENTITY)
