"""Diagnostics: what the backend offers, how it runs, how fast it has been.

No absolute paths (they reveal the machine's layout): files are named relative to the bundle;
AivisHub models by their uuid, name and version.
The user dictionary's words (names of people and places) are left out; its fingerprint shows.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from homeassistant.components.diagnostics import async_redact_data
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant

from . import YomiageConfigEntry, const
from .aivishub_updates import AivisHubUpdates
from .backend import SpeechBackend
from .const import CONF_PATH, CONF_TOKEN, CONF_USER_DICTIONARY

TO_REDACT = {CONF_TOKEN, CONF_USER_DICTIONARY}


async def async_get_config_entry_diagnostics(
    hass: HomeAssistant, entry: YomiageConfigEntry
) -> dict[str, Any]:
    data = {key: value for key, value in entry.data.items() if key != CONF_PATH}
    shown_entry: dict[str, Any] = {
        "data": async_redact_data(data, TO_REDACT),
        "options": async_redact_data(dict(entry.options), TO_REDACT),
    }
    if CONF_PATH in entry.data:
        shown_entry["bundle_folder"] = _shown_folder(Path(entry.data[CONF_PATH]))
    diagnostics: dict[str, Any] = {"entry": shown_entry, "state": entry.state.value}
    if entry.state is ConfigEntryState.LOADED:
        loaded = entry.runtime_data
        diagnostics["engine"] = {
            **loaded.backend.diagnostics(),
            "recent_requests": [_timing_report(asdict(t)) for t in loaded.timings],
        }
        if loaded.updates is not None:
            diagnostics["aivishub_models"] = _aivishub_report(loaded.backend, loaded.updates)
    return diagnostics


def _aivishub_report(backend: SpeechBackend, updates: AivisHubUpdates) -> list[dict[str, Any]]:
    """Each AivisHub model: installed, and AivisHub's newest where it answered."""
    newest = updates.data or {}
    return [
        {
            **asdict(model),
            "newest_version": detail.file.version if (detail := newest.get(uuid)) else None,
        }
        for uuid, model in backend.aivishub_models.items()
    ]


def _shown_folder(path: Path) -> str:
    """Relative to the models folder when it is there, else only its own name."""
    models = const.MODELS_DIR.resolve()
    if path.is_relative_to(models):
        return f"<models>/{path.relative_to(models)}"
    return f".../{path.name}"


def _timing_report(timing: dict[str, Any]) -> dict[str, Any]:
    audio_s = timing["audio_s"]
    timing["real_time_factor"] = round(timing["compute_s"] / audio_s, 3) if audio_s else None
    return timing
