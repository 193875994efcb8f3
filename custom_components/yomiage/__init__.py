"""Yomiage: Japanese text to speech (Style-Bert-VITS2 JP-Extra voices).

An entry speaks through one backend: the engine on this machine (a voice bundle), or a Yomiage
Wyoming server where the engine cannot run here (Home Assistant OS: the add-on; Container), whose
answers a ServerWatch follows. The AivisHub models a backend keeps up to date are update entities,
whose newest versions AivisHubUpdates asks AivisHub for in the background.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from homeassistant.config_entries import ConfigEntry
from homeassistant.const import Platform
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import ConfigEntryNotReady
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.typing import ConfigType

from .aivishub_updates import AivisHubUpdates
from .backend import SpeechBackend, Timing
from .const import (
    CONF_HOST,
    CONF_PATH,
    CONF_PORT,
    CONF_SOURCE,
    DOMAIN,
    RECENT_TIMINGS,
    SOURCE_AIVISHUB,
    SOURCE_WYOMING,
)
from .engine import YomiageError
from .local_backend import LocalBackend
from .local_setup import (
    async_load_local_backend,
    async_unload_local_backend,
    bundle_issue_id,
    remove_prepared_graphs,
)
from .remote import WyomingBackend
from .server_watch import ServerWatch, outdated_issue_id
from .services import async_register_services
from .translated_errors import entry_placeholders, translated

__all__ = ["Timing", "YomiageConfigEntry", "YomiageData", "bundle_issue_id"]

PLATFORMS: list[Platform] = [Platform.TTS, Platform.UPDATE]


@dataclass
class YomiageData:
    """What a loaded entry holds: who speaks, and what it recently did."""

    backend: SpeechBackend
    watch: ServerWatch | None = None  # a server entry's: is the server answering
    updates: AivisHubUpdates | None = None  # where it speaks AivisHub models: their newest
    options: dict[str, Any] = field(default_factory=dict)  # what it was set up with
    timings: deque[Timing] = field(default_factory=lambda: deque(maxlen=RECENT_TIMINGS))


YomiageConfigEntry: TypeAlias = ConfigEntry[YomiageData]


def is_remote(entry: ConfigEntry) -> bool:
    return entry.data.get(CONF_SOURCE) == SOURCE_WYOMING


CONFIG_SCHEMA = cv.config_entry_only_config_schema(DOMAIN)


async def async_setup(hass: HomeAssistant, config: ConfigType) -> bool:
    """The actions (services.py): registered once, whatever entries there are."""
    async_register_services(hass)
    return True


async def async_setup_entry(hass: HomeAssistant, entry: YomiageConfigEntry) -> bool:
    """Ready the backend (engine loaded or server answering), then add the tts entity."""
    backend: SpeechBackend
    watch = None
    if is_remote(entry):
        backend = await _async_connect_server(entry)
        watch = ServerWatch(hass, entry, backend)
    else:
        backend = await async_load_local_backend(hass, entry)
    models = backend.aivishub_models
    updates = AivisHubUpdates(hass, entry, models) if models else None
    entry.runtime_data = YomiageData(backend, watch, updates, options=dict(entry.options))
    entry.async_on_unload(entry.add_update_listener(_async_reload_on_options_change))
    try:
        await hass.config_entries.async_forward_entry_setups(entry, PLATFORMS)
    except Exception:
        await _async_release(hass, entry, backend)
        raise
    if updates is not None:  # AivisHub is asked once the voices speak, never before
        entry.async_create_background_task(hass, updates.async_refresh(), "AivisHub versions")
    return True


async def async_unload_entry(hass: HomeAssistant, entry: YomiageConfigEntry) -> bool:
    """Remove the entity, then release what the backend holds."""
    unloaded = await hass.config_entries.async_unload_platforms(entry, PLATFORMS)
    if unloaded:
        await _async_release(hass, entry, entry.runtime_data.backend)
    return unloaded


async def async_remove_entry(hass: HomeAssistant, entry: YomiageConfigEntry) -> None:
    """Forget the entry's repair issue, delete the graphs prepared for it and the voices it
    downloaded.

    A downloaded folder belongs to its entry alone (one entry per folder; the AivisHub entry's
    holds its models, the language model they share lies elsewhere); a local folder is the
    user's and stays.
    """
    ir.async_delete_issue(hass, DOMAIN, bundle_issue_id(entry))
    if is_remote(entry):
        ir.async_delete_issue(hass, DOMAIN, outdated_issue_id(entry))
        return
    from .aivishub import remove_folder
    from .hub import remove_download

    await hass.async_add_executor_job(remove_prepared_graphs, entry.data[CONF_PATH])
    if entry.data[CONF_SOURCE] == SOURCE_AIVISHUB:
        await hass.async_add_executor_job(remove_folder)
    else:
        await hass.async_add_executor_job(remove_download, entry.data)


async def _async_connect_server(entry: ConfigEntry) -> WyomingBackend:
    try:
        return await WyomingBackend.async_connect(entry.data[CONF_HOST], entry.data[CONF_PORT])
    except YomiageError as err:  # the server may still be starting (add-ons load voices first)
        raise translated(ConfigEntryNotReady, err, **entry_placeholders(entry.data)) from err


async def _async_release(hass: HomeAssistant, entry: ConfigEntry, backend: SpeechBackend) -> None:
    if isinstance(backend, LocalBackend):
        await async_unload_local_backend(hass, entry, backend)
    else:
        await backend.async_close()


async def _async_reload_on_options_change(hass: HomeAssistant, entry: YomiageConfigEntry) -> None:
    """Saved options reload the entry; other updates (a discovery noting where it was seen
    again, an AivisHub model added: its flow reloads) leave it as it is."""
    if entry.options != entry.runtime_data.options:
        await hass.config_entries.async_reload(entry.entry_id)
