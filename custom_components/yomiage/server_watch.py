"""A server entry's watch on its Yomiage server (the add-on, or one the user runs): asked to
describe itself every half minute, so that the entity is unavailable while the server is down
(an add-on restarting or being updated) and speaks again when it is back, with no reload by hand;
a server whose voices (or their AivisHub versions) changed reloads the entry, and one older than
this integration needs raises a repair issue that says what to update."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Final

from homeassistant.config_entries import ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.update_coordinator import DataUpdateCoordinator, UpdateFailed
from packaging.version import InvalidVersion, Version

from .const import CONF_ADDON, CONF_HOST, CONF_PORT, DOMAIN
from .engine import YomiageError
from .engine.wyoming_contract import MINIMUM_SERVER_VERSION
from .remote import WyomingBackend

_LOGGER = logging.getLogger(__name__)

POLL_INTERVAL: Final = timedelta(seconds=30)


def outdated_issue_id(entry: ConfigEntry) -> str:
    return f"server_outdated_{entry.entry_id}"


class ServerWatch(DataUpdateCoordinator[None]):
    """Whether the server answered its last ``describe`` (``last_update_success``); what it
    answers updates the entry's backend (its version) or reloads the entry (its voices)."""

    def __init__(self, hass: HomeAssistant, entry: ConfigEntry, backend: WyomingBackend) -> None:
        super().__init__(
            hass,
            _LOGGER,
            config_entry=entry,
            name=f"Yomiage server {entry.data[CONF_HOST]}:{entry.data[CONF_PORT]}",
            update_interval=POLL_INTERVAL,
        )
        self.entry = entry
        self.backend = backend
        check_server_version(hass, entry, backend.version)
        self.async_set_updated_data(None)

    async def _async_update_data(self) -> None:
        try:
            answer = await WyomingBackend.async_connect(
                self.entry.data[CONF_HOST], self.entry.data[CONF_PORT]
            )
        except YomiageError as err:
            raise UpdateFailed(str(err)) from err
        if (answer.voices, answer.aivishub_models) != (
            self.backend.voices,
            self.backend.aivishub_models,
        ):  # the server's voices or their versions changed: new entities
            self.hass.config_entries.async_schedule_reload(self.entry.entry_id)
        self.backend.version = answer.version
        check_server_version(self.hass, self.entry, answer.version)


def check_server_version(hass: HomeAssistant, entry: ConfigEntry, version: str | None) -> None:
    """A repair issue while the server is older than MINIMUM_SERVER_VERSION, none otherwise
    (a server that states no version is taken as it is)."""
    try:
        outdated = version is not None and Version(version) < Version(MINIMUM_SERVER_VERSION)
    except InvalidVersion:
        outdated = False
    if not outdated:
        ir.async_delete_issue(hass, DOMAIN, outdated_issue_id(entry))
        return
    ir.async_create_issue(
        hass,
        DOMAIN,
        outdated_issue_id(entry),
        is_fixable=False,
        severity=ir.IssueSeverity.WARNING,
        translation_key="addon_outdated" if CONF_ADDON in entry.data else "server_outdated",
        translation_placeholders={
            "title": entry.title,
            "version": str(version),
            "required": MINIMUM_SERVER_VERSION,
        },
    )
