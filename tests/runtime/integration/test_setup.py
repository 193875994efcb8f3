"""Entry setup and unload: engine lifecycle, setup errors, repair issue, diagnostics."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from unittest.mock import patch

import onnxruntime as ort
import pytest
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.yomiage import bundle_issue_id, const
from custom_components.yomiage.const import CONF_DEVICE, DOMAIN

from .common import SPEAKERS, engine_of


def _live_sessions() -> int:
    gc.collect()
    return sum(isinstance(obj, ort.InferenceSession) for obj in gc.get_objects())


async def _speak(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    """Use the engine so that its lazy speaker sessions exist too."""
    engine = engine_of(entry)
    await hass.async_add_executor_job(engine.synthesize, "こんにちは。")


async def test_unload_and_reload_leave_no_session_behind(
    hass: HomeAssistant, mock_entry: MockConfigEntry
) -> None:
    # pyopenjtalk-plus keeps a small ONNX model of its own once it has read a text: count from
    # a first load and unload, so that only the engine's sessions are counted.
    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    await _speak(hass, mock_entry)
    assert await hass.config_entries.async_unload(mock_entry.entry_id)
    baseline = _live_sessions()

    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    await _speak(hass, mock_entry)
    one_engine = _live_sessions() - baseline
    assert one_engine >= 2, "BERT and at least one synthesizer session"

    for _ in range(3):
        assert await hass.config_entries.async_reload(mock_entry.entry_id)
        assert mock_entry.state is ConfigEntryState.LOADED
        await _speak(hass, mock_entry)
        assert _live_sessions() - baseline == one_engine

    assert await hass.config_entries.async_unload(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.NOT_LOADED
    assert _live_sessions() == baseline


async def test_service_device_and_entity(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, entity_id: str
) -> None:
    entity = er.async_get(hass).async_get(entity_id)
    assert entity is not None and entity.device_id is not None
    device = dr.async_get(hass).async_get(entity.device_id)
    assert device is not None
    assert (DOMAIN, loaded_entry.entry_id) in device.identifiers
    assert device.entry_type is dr.DeviceEntryType.SERVICE
    assert device.name == "Yomiage tiny"
    assert entity_id == "tts.yomiage_tiny"
    assert hass.states.get(entity_id).name == "Yomiage tiny"
    assert hass.states.get(entity_id) is not None


async def test_broken_bundle_fails_setup_with_a_repair_naming_the_file(
    hass: HomeAssistant, mock_entry: MockConfigEntry, bundle_dir: Path, first_speaker: Path
) -> None:
    missing = first_speaker / "style_vectors.npy"
    saved = missing.read_bytes()
    missing.unlink()

    assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.SETUP_ERROR
    issue = ir.async_get(hass).async_get_issue(DOMAIN, bundle_issue_id(mock_entry))
    assert issue is not None
    assert issue.severity is ir.IssueSeverity.ERROR
    assert issue.translation_placeholders is not None
    assert issue.translation_placeholders["file"] == str(missing)
    assert mock_entry.reason is not None and "style_vectors.npy" in mock_entry.reason

    missing.write_bytes(saved)  # the user fixes the file and reloads
    assert await hass.config_entries.async_reload(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.LOADED
    assert ir.async_get(hass).async_get_issue(DOMAIN, bundle_issue_id(mock_entry)) is None


async def test_removing_a_broken_entry_removes_its_repair(
    hass: HomeAssistant, mock_entry: MockConfigEntry, bundle_dir: Path
) -> None:
    (bundle_dir / SPEAKERS).rename(bundle_dir / "gone")
    assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert ir.async_get(hass).async_get_issue(DOMAIN, bundle_issue_id(mock_entry)) is not None
    await hass.config_entries.async_remove(mock_entry.entry_id)
    assert ir.async_get(hass).async_get_issue(DOMAIN, bundle_issue_id(mock_entry)) is None
    assert (bundle_dir / "gone").is_dir(), "a local bundle is the user's: it stays"


async def test_prepared_graphs_live_beside_the_voices_and_go_with_the_entry(
    hass: HomeAssistant,
    mock_entry: MockConfigEntry,
    bundle_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    private_graph_cache: Path,
) -> None:
    """Graphs prepared for this CPU go to the integration's models folder (what HACS keeps), not
    to the user's home; removing the entry removes them, and leaves the local voices alone."""
    models = tmp_path / "models"
    monkeypatch.setattr(const, "MODELS_DIR", models)
    monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", "1")
    before = set(private_graph_cache.rglob("*"))
    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    await _speak(hass, mock_entry)
    prepared = [path for path in (models / "prepared-graphs").rglob("*") if path.is_file()]
    assert any(path.name == "graph.onnx" for path in prepared), prepared
    assert set(private_graph_cache.rglob("*")) == before, "nothing in the default cache"

    await hass.config_entries.async_remove(mock_entry.entry_id)
    assert not any(path.is_file() for path in (models / "prepared-graphs").rglob("*"))
    assert (bundle_dir / SPEAKERS).is_dir(), "a local bundle is the user's: it stays"


async def test_transient_error_retries_later(
    hass: HomeAssistant, mock_entry: MockConfigEntry
) -> None:
    with patch(
        "custom_components.yomiage.local_setup.load_engine",
        side_effect=OSError("disk not mounted yet"),
    ):
        assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.SETUP_RETRY
    assert ir.async_get(hass).async_get_issue(DOMAIN, bundle_issue_id(mock_entry)) is None


async def test_unavailable_device_is_a_setup_error(
    hass: HomeAssistant, mock_entry: MockConfigEntry
) -> None:
    # onnxruntime here is the CPU build, so CUDA cannot be used.
    hass.config_entries.async_update_entry(mock_entry, options={CONF_DEVICE: "cuda"})
    assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.SETUP_ERROR
    assert mock_entry.reason is not None and "CUDA" in mock_entry.reason


async def test_diagnostics_show_no_outside_paths_and_redact_tokens(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    mock_entry: MockConfigEntry,
    config_dir: Path,
) -> None:
    hass.config_entries.async_update_entry(
        mock_entry, data={**mock_entry.data, "token": "hf_secret", "repo_id": "someone/voices"}
    )
    assert await async_setup_component(hass, "http", {})
    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    (entity,) = hass.data["tts"].entities
    _, wav = await entity.async_get_tts_audio("こんにちは。元気です。", "ja", {})
    assert await async_setup_component(hass, "diagnostics", {})
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, mock_entry)

    text = json.dumps(diagnostics)
    assert str(config_dir) not in text
    assert "hf_secret" not in text
    assert diagnostics["entry"]["data"]["token"] == "**REDACTED**"
    assert diagnostics["entry"]["data"]["repo_id"] == "someone/voices"
    assert diagnostics["entry"]["bundle_folder"] == ".../tiny"
    engine = diagnostics["engine"]
    assert engine["device"] == "cpu"
    assert engine["threads"] >= 1
    assert engine["speed_x_real_time"] > 1  # learnt from what it spoke: the tiny voice is fast
    assert set(engine["speakers"]) == set(engine_of(mock_entry).voices)
    for speaker in engine["speakers"].values():
        assert speaker["synthesizer"].startswith(str(SPEAKERS))
        assert speaker["styles"]
    (request,) = engine["recent_requests"]
    assert request["sentences"] == 2
    assert request["streamed"] is False
    assert request["audio_s"] == pytest.approx((len(wav) - 44) / 2 / 44100, abs=1e-3)
    assert request["compute_s"] > 0
    # Diagnostics round each figure to 3 decimals, so compare within that rounding.
    assert request["real_time_factor"] == pytest.approx(
        request["compute_s"] / request["audio_s"], rel=1e-2, abs=1e-3
    )
