"""Values and helpers shared by the Home Assistant tests."""

from pathlib import Path

from homeassistant.config_entries import ConfigEntry

from custom_components.yomiage.engine.engine import Engine
from custom_components.yomiage.local_backend import LocalBackend

SPEAKERS = Path("onnx/speakers")  # speaker folders inside a bundle


def engine_of(entry: ConfigEntry) -> Engine:
    """The engine a loaded local entry speaks with."""
    backend = entry.runtime_data.backend
    assert isinstance(backend, LocalBackend)
    return backend.engine
