"""Yomiage: Japanese text to speech (Style-Bert-VITS2 JP-Extra voices) on this machine."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from homeassistant.config_entries import ConfigEntry
from homeassistant.const import Platform
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import ConfigEntryError, ConfigEntryNotReady
from homeassistant.helpers import issue_registry as ir

from .const import DOMAIN, RECENT_TIMINGS, TRANSIENT_DOWNLOAD_REASONS
from .engine.errors import BundleError, DeviceUnavailableError, DownloadError
from .entry_options import runtime_settings

if TYPE_CHECKING:
    from .engine.engine import Engine

PLATFORMS: list[Platform] = [Platform.TTS]


@dataclass(frozen=True)
class Timing:
    """One finished request, for diagnostics."""

    characters: int
    sentences: int
    audio_s: float
    compute_s: float
    streamed: bool


@dataclass
class YomiageData:
    """What a loaded entry holds: the engine and what it recently did."""

    engine: Engine
    timings: deque[Timing] = field(default_factory=lambda: deque(maxlen=RECENT_TIMINGS))


YomiageConfigEntry: TypeAlias = ConfigEntry[YomiageData]


def load_engine(path: str, device: str, threads: int | None) -> Engine:
    """Create the engine (blocking: imports onnxruntime, loads BERT; run it in an executor)."""
    from .engine.engine import Engine

    return Engine(path, device=device, threads=threads)


def _load_entry_engine(data: Mapping[str, Any], device: str, threads: int | None) -> Engine:
    """The bundle (downloaded again when a Hub entry's is incomplete), then the engine."""
    from .hub import ensure_bundle

    return load_engine(ensure_bundle(data), device, threads)


def bundle_issue_id(entry: ConfigEntry) -> str:
    return f"bundle_broken_{entry.entry_id}"


async def async_setup_entry(hass: HomeAssistant, entry: YomiageConfigEntry) -> bool:
    """Load the engine in an executor job, then add the tts entity."""
    engine = await _async_load_engine(hass, entry)
    ir.async_delete_issue(hass, DOMAIN, bundle_issue_id(entry))
    entry.runtime_data = YomiageData(engine=engine)
    entry.async_on_unload(entry.add_update_listener(_async_reload_on_options_change))
    try:
        await hass.config_entries.async_forward_entry_setups(entry, PLATFORMS)
    except Exception:
        await hass.async_add_executor_job(engine.close)
        raise
    return True


async def async_unload_entry(hass: HomeAssistant, entry: YomiageConfigEntry) -> bool:
    """Remove the entity, then release the ONNX sessions."""
    unloaded = await hass.config_entries.async_unload_platforms(entry, PLATFORMS)
    if unloaded:
        await hass.async_add_executor_job(entry.runtime_data.engine.close)
    return unloaded


async def async_remove_entry(hass: HomeAssistant, entry: YomiageConfigEntry) -> None:
    """Forget the entry's repair issue and delete the voices it downloaded.

    A downloaded folder belongs to its entry alone (one entry per folder); a local folder is the
    user's and stays.
    """
    ir.async_delete_issue(hass, DOMAIN, bundle_issue_id(entry))
    from .hub import remove_download

    await hass.async_add_executor_job(remove_download, entry.data)


async def _async_load_engine(hass: HomeAssistant, entry: YomiageConfigEntry) -> Engine:
    """The engine for this entry, or the setup exception Home Assistant expects."""
    device, threads = runtime_settings(entry.options)
    try:
        return await hass.async_add_executor_job(
            _load_entry_engine, entry.data, device, threads or None
        )
    except BundleError as err:
        _create_bundle_issue(hass, entry, err)
        raise ConfigEntryError(
            translation_domain=DOMAIN,
            translation_key="bundle_broken",
            translation_placeholders={"file": err.path, "problem": err.problem},
        ) from err
    except DownloadError as err:
        raise _download_failure(err) from err
    except DeviceUnavailableError as err:
        # Retrying cannot help: the user has to pick another device in the options.
        raise ConfigEntryError(
            translation_domain=DOMAIN,
            translation_key="device_unavailable",
            translation_placeholders={"message": str(err)},
        ) from err
    except (OSError, MemoryError) as err:
        # A disk that is not mounted yet, memory that other add-ons hold: worth another try.
        raise ConfigEntryNotReady(
            translation_domain=DOMAIN,
            translation_key="engine_not_ready",
            translation_placeholders={"message": str(err) or type(err).__name__},
        ) from err


def _download_failure(err: DownloadError) -> ConfigEntryError | ConfigEntryNotReady:
    """A Hub entry whose bundle was incomplete and could not be downloaded again."""
    transient = getattr(err, "reason", "") in TRANSIENT_DOWNLOAD_REASONS
    error = ConfigEntryNotReady if transient else ConfigEntryError
    return error(
        translation_domain=DOMAIN,
        translation_key=err.translation_key,
        translation_placeholders={"message": str(err)},
    )


def _create_bundle_issue(hass: HomeAssistant, entry: ConfigEntry, err: BundleError) -> None:
    ir.async_create_issue(
        hass,
        DOMAIN,
        bundle_issue_id(entry),
        is_fixable=False,
        severity=ir.IssueSeverity.ERROR,
        translation_key="bundle_broken",
        translation_placeholders={"title": entry.title, "file": err.path, "problem": err.problem},
    )


async def _async_reload_on_options_change(hass: HomeAssistant, entry: ConfigEntry) -> None:
    await hass.config_entries.async_reload(entry.entry_id)
