"""What AivisHub says of the models an entry speaks (their newest file), for the update entities.

Asked in the background after setup and every 6 hours, never on the way to speech: an AivisHub
that does not answer makes the update entities unavailable, the voices speak on. A model that
AivisHub no longer offers (withdrawn, private) makes only its own entity unavailable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Final

from homeassistant.config_entries import ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.helpers.update_coordinator import DataUpdateCoordinator, UpdateFailed

from .engine.hub.aivishub import AivisModel, model_detail
from .engine.hub.download import FetchError

_LOGGER = logging.getLogger(__name__)

CHECK_INTERVAL: Final = timedelta(hours=6)
# Failures that say AivisHub itself is out of reach, not that it refuses one model.
_UNREACHABLE: Final = frozenset({"offline", "hub_down", "hub_error"})


class AivisHubUpdates(DataUpdateCoordinator[dict[str, AivisModel | None]]):
    """uuid -> AivisHub's detail of the model (None: AivisHub refuses it now);
    ``last_update_success`` False while AivisHub cannot be reached."""

    def __init__(self, hass: HomeAssistant, entry: ConfigEntry, models: Iterable[str]) -> None:
        super().__init__(
            hass,
            _LOGGER,
            config_entry=entry,
            name=f"AivisHub models of {entry.title}",
            update_interval=CHECK_INTERVAL,
        )
        self.models = tuple(models)

    async def _async_update_data(self) -> dict[str, AivisModel | None]:
        return await self.hass.async_add_executor_job(_details, self.models)


def _details(models: Iterable[str]) -> dict[str, AivisModel | None]:
    """Each model's detail (blocking: a request each)."""
    details: dict[str, AivisModel | None] = {}
    for uuid in models:
        try:
            details[uuid] = model_detail(uuid)
        except FetchError as err:
            if err.reason in _UNREACHABLE:
                raise UpdateFailed(str(err)) from err
            _LOGGER.warning("No update of AivisHub model %s: %s", uuid, err)
            details[uuid] = None
    return details
