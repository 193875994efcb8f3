"""A folder of AivisHub voice files (.aivmx) as a local voice source: set up through the config
flow, its voices listed under their manifest names, a message spoken, what the files say of
themselves shown in the options and diagnostics."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from homeassistant.components import tts
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType

from custom_components.yomiage import const
from custom_components.yomiage.diagnostics import async_get_config_entry_diagnostics

from ..conftest import FIXTURES
from ..wav import read_wav
from .test_config_flow import _submit_path

AIVMX = FIXTURES / "dialects-tiny" / "tiny-a.aivmx"


async def _aivis_entry(hass: HomeAssistant, folder: Path) -> ConfigEntry:
    result = await _submit_path(hass, str(folder))
    assert result["type"] is FlowResultType.CREATE_ENTRY, result.get("errors")
    await hass.async_block_till_done()
    entry = result["result"]
    assert entry.state is ConfigEntryState.LOADED
    return entry


async def test_a_folder_of_aivmx_files_beside_a_bundle_speaks(
    hass: HomeAssistant, config_dir: Path, bundle_dir: Path
) -> None:
    folder = config_dir / "voices" / "aivis"  # beside voices/tiny, whose BERT it uses
    folder.mkdir()
    shutil.copyfile(AIVMX, folder / AIVMX.name)
    entry = await _aivis_entry(hass, folder)
    entity_id = "tts.yomiage_aivis"
    entity = hass.data[tts.DATA_COMPONENT].get_entity(entity_id)
    assert entity is not None
    voices = entity.async_get_supported_voices("ja")
    assert [(v.voice_id, v.name) for v in voices] == [
        ("tiny-a/ノーマル", "tiny-a – ノーマル"),
        ("tiny-a/Happy", "tiny-a – 喜び"),
        ("tiny-a/Sad", "tiny-a – 悲しみ"),
    ]
    media_id = tts.generate_media_source_id(
        hass,
        "おはようございます。七時です。",
        engine=entity_id,
        language="ja",
        options={tts.ATTR_PREFERRED_FORMAT: "wav", "voice": "tiny-a/Sad"},
    )
    extension, data = await tts.async_get_media_source_audio(hass, media_id)
    assert extension == "wav"
    audio = read_wav(data)
    assert audio.sample_rate == 44100 and len(audio.pcm) > 44100  # half a second at least
    assert any(audio.pcm), "speech, not silence"

    options = await hass.config_entries.options.async_init(entry.entry_id)
    assert "CC0-1.0" in options["description_placeholders"]["about"]
    assert "Random weights" in options["description_placeholders"]["about"]
    diagnostics = await async_get_config_entry_diagnostics(hass, entry)
    voice_file = diagnostics["engine"]["speakers"]["tiny-a"]["voice_file"]
    assert voice_file["license"] == "CC0-1.0"


async def test_the_official_download_lends_its_language_model(
    hass: HomeAssistant,
    config_dir: Path,
    tiny_bundle: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    models = tmp_path / "models"
    shutil.copytree(tiny_bundle, models / "official")
    monkeypatch.setattr(const, "MODELS_DIR", models)
    folder = config_dir / "aivis"
    folder.mkdir()
    shutil.copyfile(AIVMX, folder / AIVMX.name)
    entry = await _aivis_entry(hass, folder)
    assert entry.title == "aivis"


async def test_aivmx_files_without_any_language_model_are_refused_with_the_reason(
    hass: HomeAssistant, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(const, "MODELS_DIR", tmp_path / "no-models")
    folder = config_dir / "aivis"
    folder.mkdir()
    shutil.copyfile(AIVMX, folder / AIVMX.name)
    result = await _submit_path(hass, str(folder))
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": "no_language_model"}
    assert result["description_placeholders"]["file"] == str(folder)
