"""Config flow (local bundle: every check and error) and options flow, on the real engine."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from unittest.mock import patch

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType, InvalidData
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.yomiage.const import (
    CONF_DEVICE,
    CONF_PATH,
    CONF_SOURCE,
    CONF_THREADS,
    CONF_VOICE,
    DOMAIN,
    SOURCE_LOCAL,
)
from custom_components.yomiage.engine.text.readings.user_dict import UserDictionary

from ..voice_files import BROKEN, SPEAKER_DIR
from .common import SPEAKERS, engine_of, shown


async def _local_form(hass: HomeAssistant) -> str:
    """Start a flow, pick "local" in the menu; return the flow id."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.MENU
    assert SOURCE_LOCAL in result["menu_options"]
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"next_step_id": SOURCE_LOCAL}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == SOURCE_LOCAL
    return str(result["flow_id"])


async def _submit_path(hass: HomeAssistant, path: str) -> config_entries.ConfigFlowResult:
    flow_id = await _local_form(hass)
    return await hass.config_entries.flow.async_configure(flow_id, {CONF_PATH: path})


async def test_local_bundle_creates_entry(hass: HomeAssistant, bundle_dir: Path) -> None:
    result = await _submit_path(hass, str(bundle_dir))
    assert result["type"] is FlowResultType.CREATE_ENTRY, result.get("errors")
    entry = result["result"]
    assert entry.title == "tiny"
    assert entry.unique_id == str(bundle_dir.resolve())
    assert entry.data == {CONF_SOURCE: SOURCE_LOCAL, CONF_PATH: str(bundle_dir.resolve())}
    speaker = sorted(p.name for p in (bundle_dir / SPEAKERS).iterdir())[0]
    assert entry.options[CONF_VOICE].startswith(f"{speaker}/")
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED


async def test_relative_path_is_taken_from_the_config_folder(
    hass: HomeAssistant, bundle_dir: Path, config_dir: Path
) -> None:
    result = await _submit_path(hass, str(bundle_dir.relative_to(config_dir)))
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"][CONF_PATH] == str(bundle_dir.resolve())
    await hass.async_block_till_done()


async def test_same_bundle_twice_aborts(hass: HomeAssistant, bundle_dir: Path) -> None:
    first = await _submit_path(hass, str(bundle_dir))
    assert first["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    # The same folder spelled differently is still the same bundle.
    second = await _submit_path(hass, f"{bundle_dir}/../tiny/")
    assert second["type"] is FlowResultType.ABORT
    assert second["reason"] == "already_configured"


async def test_folder_outside_allowed_places_is_refused(
    hass: HomeAssistant, tiny_bundle: Path, config_dir: Path
) -> None:
    outside = config_dir.parent / "elsewhere"
    shutil.copytree(tiny_bundle, outside)
    for attempt in (str(outside), "../elsewhere"):
        result = await _submit_path(hass, attempt)
        assert result["type"] is FlowResultType.FORM
        assert result["errors"] == {"base": "path_not_allowed"}
        assert result["description_placeholders"]["file"] == str(outside)


async def test_symlink_out_of_the_config_folder_is_refused(
    hass: HomeAssistant, tiny_bundle: Path, config_dir: Path
) -> None:
    outside = config_dir.parent / "elsewhere"
    shutil.copytree(tiny_bundle, outside)
    (config_dir / "link").symlink_to(outside)
    result = await _submit_path(hass, str(config_dir / "link"))
    assert result["errors"] == {"base": "path_not_allowed"}


async def test_missing_folder(hass: HomeAssistant, config_dir: Path) -> None:
    result = await _submit_path(hass, str(config_dir / "nothing-here"))
    assert result["errors"] == {"base": "not_a_folder"}
    assert result["description_placeholders"]["file"].endswith("nothing-here")


async def test_missing_file_is_named(
    hass: HomeAssistant, bundle_dir: Path, first_speaker: Path
) -> None:
    (first_speaker / "synthesizer.onnx").unlink()
    result = await _submit_path(hass, str(bundle_dir))
    assert result["errors"] == {"base": "missing_file"}
    expected = (first_speaker / "synthesizer.onnx").relative_to(bundle_dir)
    assert result["description_placeholders"]["file"] == str(expected)


async def test_broken_graph_is_named(
    hass: HomeAssistant, bundle_dir: Path, first_speaker: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The form names the file in the user's language; onnxruntime's words go to the log."""
    (first_speaker / "synthesizer.onnx").write_bytes(b"this is not an onnx graph" * 10)
    result = await _submit_path(hass, str(bundle_dir))
    assert result["errors"] == {"base": "broken_graph"}
    graph = str((first_speaker / "synthesizer.onnx").relative_to(bundle_dir))
    text = await shown(hass, "ja", "config.error.broken_graph", result["description_placeholders"])
    assert text.startswith(f"{graph} を読み込めません")
    assert re.search(rf"{re.escape(graph)}: .+", caplog.text), "the engine's detail is logged"


@pytest.mark.parametrize(
    ("defect", "error"),
    [
        ("bert-width", "voice_mismatch"),
        ("style-width", "voice_mismatch"),
        ("speaker-id", "voice_mismatch"),
        ("missing-input", "broken_graph"),
        ("no-audio-output", "broken_graph"),
    ],
)
async def test_a_voice_that_does_not_fit_is_refused_with_what_does_not_fit(
    hass: HomeAssistant,
    config_dir: Path,
    tiny_bundle: Path,
    defect: str,
    error: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Style-Bert-VITS2's converter's graph with one defect: the form names the file, the log
    has the engine's one line, before any entry exists."""
    bundle = BROKEN[defect].bundle(tiny_bundle, config_dir / "voices" / "sbv2")
    result = await _submit_path(hass, str(bundle))
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": error}
    placeholders = result["description_placeholders"]
    assert placeholders["file"] == str(SPEAKER_DIR / "synthesizer.onnx")
    assert re.search(BROKEN[defect].message.partition(": ")[2], caplog.text)
    assert not hass.config_entries.async_entries(DOMAIN)


async def test_bundle_without_voices(hass: HomeAssistant, bundle_dir: Path) -> None:
    shutil.rmtree(bundle_dir / SPEAKERS)
    (bundle_dir / SPEAKERS).mkdir()
    result = await _submit_path(hass, str(bundle_dir))
    assert result["errors"] == {"base": "no_voices"}
    assert result["description_placeholders"]["file"] == str(SPEAKERS)


async def test_invalid_speaker_config_is_named(
    hass: HomeAssistant, bundle_dir: Path, first_speaker: Path
) -> None:
    (first_speaker / "config.json").write_text("{not json", encoding="utf-8")
    result = await _submit_path(hass, str(bundle_dir))
    assert result["errors"] == {"base": "bundle_invalid"}
    assert result["description_placeholders"]["file"].endswith("config.json")


async def test_errors_are_translated_in_english_and_japanese() -> None:
    """Every error and abort the flow can show has text in both languages, with its placeholders."""
    folder = Path(__file__).resolve().parents[3] / "custom_components" / DOMAIN
    keys = {
        "path_not_allowed",
        "not_a_folder",
        "missing_file",
        "broken_graph",
        "voice_mismatch",
        "no_voices",
        "no_language_model",
        "bundle_invalid",
        "unknown",
    }
    for name in ("strings.json", "translations/en.json", "translations/ja.json"):
        strings = json.loads((folder / name).read_text(encoding="utf-8"))
        assert keys <= strings["config"]["error"].keys(), name
        for key in keys - {"unknown"}:
            assert "{file}" in strings["config"]["error"][key], (name, key)
        steps = [*strings["config"]["step"].values(), strings["options"]["step"]["init"]]
        for step in (step for step in steps if "data" in step):
            assert step["data_description"].keys() == step["data"].keys(), (name, step["title"])


def _texts(value: object) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    return [value] if isinstance(value, str) else []


def test_strings_hold_no_markup_hassfest_rejects() -> None:
    """hassfest refuses text that reads as HTML (``<[a-z].*?>``, as in ``<name>``); the
    translations are held to the same rule, with any letters between the brackets."""
    folder = Path(__file__).resolve().parents[3] / "custom_components" / DOMAIN
    for name in ("strings.json", "translations/en.json", "translations/ja.json"):
        strings = json.loads((folder / name).read_text(encoding="utf-8"))
        for text in _texts(strings):
            assert not re.search(r"<[a-z].*?>", text), (name, text)
            assert not re.search(r"<[^\s<>]+>", text), (name, text)


async def test_options_flow_changes_defaults_and_reloads(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, voices: list[str], entity_id: str
) -> None:
    engine_before = engine_of(loaded_entry)
    result = await hass.config_entries.options.async_init(loaded_entry.entry_id)
    assert result["type"] is FlowResultType.FORM
    new_options = {
        CONF_VOICE: voices[-1],
        "speed": 1.5,
        "style_weight": 2.0,
        "sdp_ratio": 0.5,
        "noise": 0.3,
        "noise_w": 0.4,
        "pause_scale": 0.5,
        "pitch": 1.1,
        "intonation": 0.7,
        "volume": -3.0,
        "lead_silence": 200.0,
        "normalize": False,
        "smooth_start": False,
        CONF_THREADS: 1.0,  # the number selector gives floats
        CONF_DEVICE: "cpu",
    }
    result = await hass.config_entries.options.async_configure(result["flow_id"], new_options)
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()

    assert loaded_entry.options[CONF_THREADS] == 1
    assert loaded_entry.state is ConfigEntryState.LOADED
    engine_after = engine_of(loaded_entry)
    assert engine_after is not engine_before, "saving options reloads the entry"
    assert engine_after.threads == 1
    entity = hass.data["tts"].get_entity(entity_id)
    assert entity.default_options == {
        **{
            name: value
            for name, value in new_options.items()
            if name not in (CONF_THREADS, CONF_DEVICE)
        },
        "dictionary": UserDictionary([]).fingerprint,  # no words: the empty dictionary's
    }


async def test_options_form_offers_every_voice(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, voices: list[str]
) -> None:
    result = await hass.config_entries.options.async_init(loaded_entry.entry_id)
    schema = result["data_schema"].schema
    voice_key = next(key for key in schema if key == CONF_VOICE)
    offered = [option["value"] for option in schema[voice_key].config["options"]]
    assert offered == voices
    assert voice_key.default() == engine_of(loaded_entry).default_voice


@pytest.mark.parametrize("bad", [{"speed": 0.0}, {"speed": 9.0}])
async def test_options_flow_rejects_out_of_range_numbers(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, bad: dict[str, float]
) -> None:
    result = await hass.config_entries.options.async_init(loaded_entry.entry_id)
    with pytest.raises(InvalidData):
        await hass.config_entries.options.async_configure(result["flow_id"], bad)


async def test_unexpected_failure_is_reported_as_unknown(
    hass: HomeAssistant, bundle_dir: Path
) -> None:
    with patch(
        "custom_components.yomiage.config_flow.probe_bundle", side_effect=RuntimeError("boom")
    ):
        result = await _submit_path(hass, str(bundle_dir))
    assert result["errors"] == {"base": "unknown"}


async def test_options_flow_on_a_broken_bundle_says_which_file(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, first_speaker: Path
) -> None:
    (first_speaker / "config.json").write_text("{}", encoding="utf-8")
    result = await hass.config_entries.options.async_init(loaded_entry.entry_id)
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "bundle_broken"
    assert result["description_placeholders"]["file"] == str(first_speaker / "config.json")
