"""Voices from AivisHub through the real flows (aivishub_flow.py): a model's page pasted, what it
is shown before a byte is downloaded, the download with the official voices' language model (the
fake Hub), the entry speaking; AivisHub's refusals and a failed download each with its own
message and nothing lost; a second model joining the one entry, models added and removed in its
options; the entry's diagnostics and its removal; a start with AivisHub out of reach."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.setup import async_setup_component

from custom_components.yomiage.const import (
    CONF_MODELS,
    CONF_PATH,
    CONF_SOURCE,
    CONF_SPEED,
    CONF_VOICE,
    DOMAIN,
    SOURCE_AIVISHUB,
)
from custom_components.yomiage.diagnostics import async_get_config_entry_diagnostics
from custom_components.yomiage.engine.hub import aivishub
from custom_components.yomiage.engine.hub.aivishub import API_VARIABLE
from custom_components.yomiage.engine.hub.download import DEFAULT_REPO
from custom_components.yomiage.local_setup import prepared_graphs

from ..fakeaivishub import LICENSE_TEXT, FakeAivisHub, FakeModel, manifest_of, with_manifest
from ..fakehub import FakeHub
from .common import (
    AIVISHUB_PAGE,
    AIVISHUB_REFUSALS,
    DUO,
    DUO_UUID,
    TINY_A,
    TINY_A_UUID,
    aivishub_confirmation,
    aivishub_speech,
    download_confirmed,
    engine_of,
    flow_menu,
    shown,
)


@pytest.fixture(autouse=True)
async def _http(hass: HomeAssistant) -> None:
    assert await async_setup_component(hass, "http", {})


def aivishub_folder(models_dir: Path) -> Path:
    return models_dir / "aivishub"


async def test_from_the_menu_to_speech(
    hass: HomeAssistant, aivis_hubs: FakeAivisHub, hub: FakeHub, models_dir: Path
) -> None:
    """Menu, page, confirmation, download: the voice speaks."""
    result = await flow_menu(hass, SOURCE_AIVISHUB)
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "aivishub")

    result = await aivishub_confirmation(hass, AIVISHUB_PAGE + TINY_A_UUID, result["flow_id"])
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "aivishub_confirm")
    assert result["description_placeholders"] == {
        "name": "tiny-a",
        "author": "Yomiage tests",
        "version": "1.0.0",
        "size": "2 MB",
        "speakers": "- tiny-a: ノーマル, Happy, Sad",
        "license_type": "ACML 1.0",
        "license": f"> {LICENSE_TEXT}",
        "page": AIVISHUB_PAGE + TINY_A_UUID,
    }
    text = await shown(
        hass, "ja", "config.step.aivishub_confirm.description", result["description_placeholders"]
    )
    assert LICENSE_TEXT in text and "ACML 1.0" in text
    assert aivis_hubs.file_gets() == [] and hub.file_gets() == [], "nothing before the confirmation"

    flow_id = result["flow_id"]
    result = await hass.config_entries.flow.async_configure(flow_id, {})
    assert (result["type"], result["progress_action"]) == (
        FlowResultType.SHOW_PROGRESS,
        "aivishub_download",
    )
    assert result["description_placeholders"] == {"name": "tiny-a", "size": "2 MB"}
    await hass.async_block_till_done()
    result = await hass.config_entries.flow.async_configure(flow_id)
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    assert result["title"] == "AivisHub"
    assert result["data"] == {
        CONF_SOURCE: SOURCE_AIVISHUB,
        CONF_PATH: str(aivishub_folder(models_dir)),
        CONF_MODELS: [TINY_A_UUID],
    }
    assert (aivishub_folder(models_dir) / f"{TINY_A_UUID}.aivmx").read_bytes() == TINY_A
    language_model = models_dir / DEFAULT_REPO.replace("/", "--")
    assert (language_model / "onnx" / "bert" / "q8" / "bert_q8.onnx").is_file()
    assert not (language_model / "onnx" / "speakers").exists(), "the language model alone"
    await hass.async_block_till_done()
    assert result["result"].state is ConfigEntryState.LOADED
    await aivishub_speech(hass, "tiny-a/Sad")


async def test_a_long_licence_is_a_link_to_the_page(
    hass: HomeAssistant, aivis_hubs: FakeAivisHub
) -> None:
    aivis_hubs.models[TINY_A_UUID].license_type = "Custom"
    detail = aivis_hubs.models[TINY_A_UUID].detail

    def long_licence() -> dict[str, object]:
        answer = detail()
        answer["model_files"][0]["license_text"] = "条文。" * 1000
        return answer

    aivis_hubs.models[TINY_A_UUID].detail = long_licence  # type: ignore[method-assign]
    result = await aivishub_confirmation(hass, TINY_A_UUID)
    assert result["description_placeholders"]["license_type"] == "Custom"
    assert result["description_placeholders"]["license"] == AIVISHUB_PAGE + TINY_A_UUID


def english_only(aivmx: bytes) -> bytes:
    speakers = manifest_of(aivmx)["speakers"]
    for speaker in speakers:
        speaker["supported_languages"] = ["en"]
    return with_manifest(aivmx, speakers=speakers)


@pytest.mark.parametrize(*AIVISHUB_REFUSALS)
async def test_each_refusal_is_the_forms_own_error(
    hass: HomeAssistant, aivis_hubs: FakeAivisHub, status: int | None, pasted: str, error: str
) -> None:
    if status is not None:
        aivis_hubs.answer(TINY_A_UUID, status)
    result = await aivishub_confirmation(hass, pasted)
    assert (result["step_id"], result["errors"]) == ("aivishub", {"base": error})
    assert await shown(hass, "ja", f"config.error.{error}", {})
    assert aivis_hubs.file_gets() == []


async def test_models_yomiage_cannot_speak_are_refused(
    hass: HomeAssistant, aivis_hubs: FakeAivisHub
) -> None:
    aivis_hubs.models[TINY_A_UUID].architecture = "Style-Bert-VITS2"
    english = FakeModel([english_only(DUO)])
    aivis_hubs.add(english)
    result = await aivishub_confirmation(hass, TINY_A_UUID)
    assert result["errors"] == {"base": "aivishub_unsupported_model"}
    result = await aivishub_confirmation(hass, DUO_UUID, result["flow_id"])
    assert result["errors"] == {"base": "aivishub_no_japanese"}


async def test_an_aivishub_out_of_reach_is_offline(
    hass: HomeAssistant, aivis_hubs: FakeAivisHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeAivisHub([]) as gone:
        monkeypatch.setenv(API_VARIABLE, gone.api)
    result = await aivishub_confirmation(hass, TINY_A_UUID)
    assert result["errors"] == {"base": "aivishub_offline"}


async def test_a_second_model_joins_the_entry(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub, models_dir: Path
) -> None:
    confirmation = await aivishub_confirmation(hass, DUO_UUID)
    assert confirmation["description_placeholders"]["speakers"] == (
        "- duo-a: ノーマル, Happy, Sad\n- duo-b: ノーマル, Happy, Sad"
    )
    result = await download_confirmed(hass, confirmation["flow_id"])
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "aivishub_model_added")
    assert "tiny-duo" in await shown(
        hass, "ja", "config.abort.aivishub_model_added", result["description_placeholders"]
    )
    await hass.async_block_till_done()
    assert hass.config_entries.async_entries(DOMAIN) == [aivishub_entry]
    assert aivishub_entry.data[CONF_MODELS] == [TINY_A_UUID, DUO_UUID]
    assert aivishub_entry.state is ConfigEntryState.LOADED
    assert set(engine_of(aivishub_entry).voices) == {"tiny-a", "duo-a", "duo-b"}
    await aivishub_speech(hass, "duo-b/Happy")
    await aivishub_speech(hass, "tiny-a/Sad")

    again = await aivishub_confirmation(hass, AIVISHUB_PAGE + DUO_UUID)
    assert (again["type"], again["reason"]) == (FlowResultType.ABORT, "aivishub_model_present")


async def assert_nothing_lost(hass: HomeAssistant, entry: ConfigEntry, models_dir: Path) -> None:
    """The entry as it was: tiny-a alone, speaking; no file of the model that failed."""
    assert hass.config_entries.async_entries(DOMAIN) == [entry]
    assert entry.data[CONF_MODELS] == [TINY_A_UUID]
    assert entry.state is ConfigEntryState.LOADED
    assert list(engine_of(entry).voices) == ["tiny-a"]
    folder = aivishub_folder(models_dir)
    assert sorted(p.name for p in folder.glob("*.aivmx")) == [f"{TINY_A_UUID}.aivmx"]
    assert (folder / f"{TINY_A_UUID}.aivmx").read_bytes() == TINY_A
    await aivishub_speech(hass, "tiny-a/Sad")


async def test_a_cut_download_resumes_on_the_next_try(
    hass: HomeAssistant,
    aivishub_entry: ConfigEntry,
    aivis_hubs: FakeAivisHub,
    models_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    aivis_hubs.cut_next(DUO_UUID, 600_000)
    confirmation = await aivishub_confirmation(hass, DUO_UUID)
    result = await download_confirmed(hass, confirmation["flow_id"])
    assert (result["step_id"], result["errors"]) == (
        "aivishub_confirm",
        {"base": "aivishub_interrupted"},
    )
    assert result["description_placeholders"]["name"] == "tiny-duo", "the model still shown"
    assert "the next try continues it" in caplog.text
    await assert_nothing_lost(hass, aivishub_entry, models_dir)

    result = await download_confirmed(hass, confirmation["flow_id"])
    assert result["reason"] == "aivishub_model_added"
    assert aivis_hubs.ranges[-1] == "bytes=600000-", "resumed, not started over"
    await hass.async_block_till_done()
    assert (aivishub_folder(models_dir) / f"{DUO_UUID}.aivmx").read_bytes() == DUO


async def test_a_file_that_does_not_match_its_checksum(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub, models_dir: Path
) -> None:
    aivis_hubs.corrupt(DUO_UUID)
    confirmation = await aivishub_confirmation(hass, DUO_UUID)
    result = await download_confirmed(hass, confirmation["flow_id"])
    assert result["errors"] == {"base": "aivishub_verification"}
    await assert_nothing_lost(hass, aivishub_entry, models_dir)


async def test_a_disk_too_small(
    hass: HomeAssistant,
    aivishub_entry: ConfigEntry,
    aivis_hubs: FakeAivisHub,
    models_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = shutil.disk_usage
    monkeypatch.setattr(aivishub.shutil, "disk_usage", lambda path: real(path)._replace(free=1000))
    confirmation = await aivishub_confirmation(hass, DUO_UUID)
    result = await download_confirmed(hass, confirmation["flow_id"])
    assert result["errors"] == {"base": "aivishub_disk_full"}
    assert await shown(hass, "ja", "config.error.aivishub_disk_full", {})
    await assert_nothing_lost(hass, aivishub_entry, models_dir)


async def test_aivishub_down_during_the_download(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub, models_dir: Path
) -> None:
    confirmation = await aivishub_confirmation(hass, DUO_UUID)
    aivis_hubs.answer(DUO_UUID, 503)
    result = await download_confirmed(hass, confirmation["flow_id"])
    assert result["errors"] == {"base": "aivishub_hub_down"}
    await assert_nothing_lost(hass, aivishub_entry, models_dir)


async def test_models_added_and_removed_in_the_options(
    hass: HomeAssistant,
    aivishub_entry: ConfigEntry,
    aivis_hubs: FakeAivisHub,
    models_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", "1")  # the reloads prepare graphs: removed too
    options = hass.config_entries.options
    menu = await options.async_init(aivishub_entry.entry_id)
    assert (menu["type"], menu["step_id"]) == (FlowResultType.MENU, "aivishub_menu")
    assert menu["menu_options"] == ["settings", "aivishub", "aivishub_remove"]

    result = await options.async_configure(menu["flow_id"], {"next_step_id": "aivishub"})
    assert result["step_id"] == "aivishub"
    result = await options.async_configure(result["flow_id"], {"url": AIVISHUB_PAGE + DUO_UUID})
    assert result["step_id"] == "aivishub_confirm"
    result = await download_confirmed(hass, result["flow_id"], options)
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "aivishub_model_added")
    await hass.async_block_till_done()
    assert aivishub_entry.data[CONF_MODELS] == [TINY_A_UUID, DUO_UUID]
    assert set(engine_of(aivishub_entry).voices) == {"tiny-a", "duo-a", "duo-b"}

    menu = await options.async_init(aivishub_entry.entry_id)
    form = await options.async_configure(menu["flow_id"], {"next_step_id": "aivishub_remove"})
    offered = form["data_schema"].schema[CONF_MODELS].config["options"]
    assert [(o["value"], o["label"]) for o in offered] == [
        (TINY_A_UUID, "tiny-a"),
        (DUO_UUID, "tiny-duo"),
    ]
    result = await options.async_configure(form["flow_id"], {CONF_MODELS: []})
    assert result["errors"] == {"base": "aivishub_none_chosen"}
    result = await options.async_configure(form["flow_id"], {CONF_MODELS: [TINY_A_UUID, DUO_UUID]})
    assert result["errors"] == {"base": "aivishub_keep_one"}
    prepared = prepared_graphs(aivishub_entry.data[CONF_PATH]) / "sessions"
    for uuid in (TINY_A_UUID, DUO_UUID):
        assert any(path.name.startswith(uuid) for path in prepared.iterdir())
    result = await options.async_configure(form["flow_id"], {CONF_MODELS: [TINY_A_UUID]})
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "aivishub_models_removed")
    await hass.async_block_till_done()
    assert aivishub_entry.data[CONF_MODELS] == [DUO_UUID]
    assert not (aivishub_folder(models_dir) / f"{TINY_A_UUID}.aivmx").exists()
    names = [path.name for path in prepared.iterdir()]
    assert not any(name.startswith(TINY_A_UUID) for name in names)  # its prepared graphs gone
    assert any(name.startswith(DUO_UUID) for name in names)
    assert aivishub_entry.state is ConfigEntryState.LOADED
    assert set(engine_of(aivishub_entry).voices) == {"duo-a", "duo-b"}
    await aivishub_speech(hass, "duo-a/Sad")


async def test_the_voice_settings_of_the_aivishub_entry(
    hass: HomeAssistant, aivishub_entry: ConfigEntry
) -> None:
    """The menu's first choice is every local entry's form; saving it reloads the entry."""
    options = hass.config_entries.options
    menu = await options.async_init(aivishub_entry.entry_id)
    form = await options.async_configure(menu["flow_id"], {"next_step_id": "settings"})
    assert (form["type"], form["step_id"]) == (FlowResultType.FORM, "init")
    assert "tiny-a" in form["description_placeholders"]["about"]
    chosen = {
        key.schema: key.default() for key in form["data_schema"].schema if callable(key.default)
    }
    result = await options.async_configure(
        form["flow_id"], {**chosen, CONF_VOICE: "tiny-a/Happy", CONF_SPEED: 1.5}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    assert aivishub_entry.options[CONF_SPEED] == 1.5
    assert aivishub_entry.state is ConfigEntryState.LOADED


async def test_diagnostics_and_removal(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, models_dir: Path
) -> None:
    diagnostics = await async_get_config_entry_diagnostics(hass, aivishub_entry)
    assert diagnostics["entry"]["data"][CONF_MODELS] == [TINY_A_UUID]
    assert diagnostics["entry"]["bundle_folder"] == "<models>/aivishub"
    (model,) = diagnostics["aivishub_models"]
    assert {key: model[key] for key in ("uuid", "name", "version")} == {
        "uuid": TINY_A_UUID,
        "name": "tiny-a",
        "version": "1.0.0",
    }
    assert str(models_dir) not in json.dumps(diagnostics)

    await hass.config_entries.async_remove(aivishub_entry.entry_id)
    assert not aivishub_folder(models_dir).exists()
    language_model = models_dir / DEFAULT_REPO.replace("/", "--")
    assert (language_model / "onnx" / "bert" / "q8" / "bert_q8.onnx").is_file(), "shared: kept"


async def test_a_file_gone_is_fetched_again_at_start(
    hass: HomeAssistant, aivishub_entry: ConfigEntry, aivis_hubs: FakeAivisHub, models_dir: Path
) -> None:
    model_file = aivishub_folder(models_dir) / f"{TINY_A_UUID}.aivmx"
    model_file.unlink()
    assert await hass.config_entries.async_reload(aivishub_entry.entry_id)
    assert aivishub_entry.state is ConfigEntryState.LOADED
    assert model_file.read_bytes() == TINY_A
