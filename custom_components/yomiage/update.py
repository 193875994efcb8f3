"""An update entity per AivisHub model an entry speaks: the version installed (its file's
manifest), AivisHub's newest (asked in the background: aivishub_updates.py), and Install, which
has the backend fetch the newest with progress, then reloads the entry so that it speaks."""

from __future__ import annotations

from typing import Any, Final

from homeassistant.components.update import UpdateEntity, UpdateEntityFeature
from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
from homeassistant.helpers.update_coordinator import CoordinatorEntity

from . import YomiageConfigEntry
from .aivishub_updates import AivisHubUpdates
from .backend import InstalledModel
from .engine.hub.aivishub import PAGE_ROOT, AivisModel
from .translated_errors import raised_translated
from .tts import entry_device

# Home Assistant keeps no more of a release summary.
SUMMARY_LIMIT: Final = 255

# Installs one after the other: they download into one folder, which takes one at a time.
PARALLEL_UPDATES = 1


async def async_setup_entry(
    hass: HomeAssistant,
    entry: YomiageConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    updates = entry.runtime_data.updates
    if updates is None:
        return
    async_add_entities(
        AivisHubModelUpdate(entry, updates, model)
        for model in entry.runtime_data.backend.aivishub_models.values()
    )


class AivisHubModelUpdate(CoordinatorEntity[AivisHubUpdates], UpdateEntity):
    """One AivisHub model of the entry."""

    _attr_has_entity_name = True
    _attr_supported_features = UpdateEntityFeature.INSTALL | UpdateEntityFeature.PROGRESS

    def __init__(
        self, entry: YomiageConfigEntry, updates: AivisHubUpdates, model: InstalledModel
    ) -> None:
        super().__init__(updates)
        self._entry = entry
        self._uuid = model.uuid
        self._attr_unique_id = f"{entry.entry_id}_{model.uuid}"
        self._attr_name = model.name
        self._attr_title = model.name
        self._attr_installed_version = model.version
        self._attr_release_url = PAGE_ROOT + model.uuid
        self._attr_device_info = entry_device(entry)
        self._show_newest()

    @property
    def available(self) -> bool:
        """AivisHub answered, and still offers this model."""
        return super().available and self._newest is not None

    @property
    def _newest(self) -> AivisModel | None:
        return (self.coordinator.data or {}).get(self._uuid)

    @callback
    def _handle_coordinator_update(self) -> None:
        self._show_newest()
        super()._handle_coordinator_update()

    def _show_newest(self) -> None:
        if (newest := self._newest) is not None:
            self._attr_latest_version = newest.file.version
            self._attr_title = newest.name
            self._attr_release_summary = newest.description[:SUMMARY_LIMIT] or None

    async def async_install(self, version: str | None, backup: bool, **kwargs: Any) -> None:
        """The newest version (no other is offered), then the entry reloads to speak it."""
        self._attr_in_progress = True
        self._attr_update_percentage = 0
        self.async_write_ha_state()
        try:
            with raised_translated():
                await self._entry.runtime_data.backend.async_install_aivishub_model(
                    self._uuid, self._show_progress
                )
        finally:
            self._attr_in_progress = False
            self._attr_update_percentage = None
            self.async_write_ha_state()
        self.hass.config_entries.async_schedule_reload(self._entry.entry_id)

    @callback
    def _show_progress(self, fraction: float) -> None:
        percentage = round(fraction * 100)
        if percentage != self._attr_update_percentage:
            self._attr_update_percentage = percentage
            self.async_write_ha_state()
