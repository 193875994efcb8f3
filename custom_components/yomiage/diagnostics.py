"""Diagnostics: what the bundle offers, how the engine runs, how fast it has been.

No absolute paths (they reveal the machine's layout): files are named relative to the bundle.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from homeassistant.components.diagnostics import async_redact_data
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant

from . import YomiageConfigEntry, const
from .const import CONF_PATH, CONF_TOKEN

TO_REDACT = {CONF_TOKEN}


async def async_get_config_entry_diagnostics(
    hass: HomeAssistant, entry: YomiageConfigEntry
) -> dict[str, Any]:
    data = {key: value for key, value in entry.data.items() if key != CONF_PATH}
    diagnostics: dict[str, Any] = {
        "entry": {
            "data": async_redact_data(data, TO_REDACT),
            "options": dict(entry.options),
            "bundle_folder": _shown_folder(Path(entry.data[CONF_PATH])),
        },
        "state": entry.state.value,
    }
    if entry.state is ConfigEntryState.LOADED:
        diagnostics["engine"] = _engine_report(entry)
    return diagnostics


def _shown_folder(path: Path) -> str:
    """Relative to the models folder when it is there, else only its own name."""
    models = const.MODELS_DIR.resolve()
    if path.is_relative_to(models):
        return f"<models>/{path.relative_to(models)}"
    return f".../{path.name}"


def _engine_report(entry: YomiageConfigEntry) -> dict[str, Any]:
    engine = entry.runtime_data.engine
    bundle = engine.bundle
    return {
        "device": engine.device,
        "threads": engine.threads,
        "sample_rate": engine.sample_rate,
        "default_voice": engine.default_voice,
        "bert_graph": bundle.relative(bundle.bert_q8),
        "has_fp32_bert": bundle.bert_fp32 is not None,
        "speakers": {
            name: {
                "styles": list(files.config.styles),
                "synthesizer": bundle.relative(files.synthesizer),
                "has_duration_predictor": files.duration_predictor is not None,
            }
            for name, files in bundle.speakers.items()
        },
        "recent_requests": [_timing_report(asdict(t)) for t in entry.runtime_data.timings],
    }


def _timing_report(timing: dict[str, Any]) -> dict[str, Any]:
    audio_s = timing["audio_s"]
    timing["real_time_factor"] = round(timing["compute_s"] / audio_s, 3) if audio_s else None
    return timing
