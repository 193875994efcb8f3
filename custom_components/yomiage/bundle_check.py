"""Is a folder a usable voice bundle? Where it may live, and whether every graph loads.

Used by the config flow before an entry is created; errors carry a strings.json key so the form
can say what is wrong and with which file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from homeassistant.core import HomeAssistant

from . import const
from .engine import BundleError, VoiceMismatchError
from .engine.bundle import SPEAKERS_DIR, TOKENIZER_DIR
from .local_setup import load_engine


class BundleCheckError(Exception):
    """Why a folder cannot be used: an error key of strings.json and the file its text names;
    ``problem`` is the engine's English detail, for the log."""

    def __init__(self, key: str, file: str = "", problem: str = "") -> None:
        super().__init__(f"{file}: {problem}" if problem else f"{key}: {file}")
        self.key = key
        self.placeholders = {"file": file}


@dataclass(frozen=True)
class BundleSummary:
    voices: dict[str, list[str]]
    default_voice: str


def allowed_folders(hass: HomeAssistant) -> list[Path]:
    """Bundles must live under one of these (a config entry must not point anywhere on disk)."""
    return [Path(hass.config.config_dir).resolve(), const.MODELS_DIR.resolve()]


def resolve_bundle_path(hass: HomeAssistant, raw: str) -> Path:
    """An absolute, symlink-free bundle path (relative input is taken from the config folder)."""
    path = Path(raw.strip()).expanduser()
    if not path.is_absolute():
        path = Path(hass.config.config_dir) / path
    resolved = path.resolve()
    if not any(resolved.is_relative_to(folder) for folder in allowed_folders(hass)):
        raise BundleCheckError("path_not_allowed", file=str(resolved))
    return resolved


def probe_bundle(path: Path) -> BundleSummary:
    """Load every graph once and say what the bundle offers (blocking: run in an executor)."""
    try:
        engine = load_engine(str(path), "cpu", None)
        try:
            engine.load_all()
            summary = BundleSummary(voices=engine.voices, default_voice=engine.default_voice)
        finally:
            engine.close()
    except BundleError as err:  # the engine refuses bundles without speakers or styles too
        raise _classify(err, path) from err
    return summary


def _classify(err: BundleError, root: Path) -> BundleCheckError:
    """Turn the engine's BundleError into the form error that tells the user what to do."""
    path = Path(err.path)
    shown = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    if path == root and not path.is_dir():
        return BundleCheckError("not_a_folder", file=str(path))
    if path == root / SPEAKERS_DIR:
        return BundleCheckError("no_voices", file=shown, problem=err.problem)
    if path == root / TOKENIZER_DIR and not path.exists():
        return BundleCheckError("no_language_model", file=str(root), problem=err.problem)
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return BundleCheckError("missing_file", file=shown, problem=err.problem)
    if isinstance(err, VoiceMismatchError):
        return BundleCheckError("voice_mismatch", file=shown, problem=err.problem)
    if path.suffix == ".onnx":
        return BundleCheckError("broken_graph", file=shown, problem=err.problem)
    return BundleCheckError("bundle_invalid", file=shown, problem=err.problem)
