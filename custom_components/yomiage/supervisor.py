"""The Yomiage add-on through Home Assistant's Supervisor (Home Assistant OS): the store
repository that holds it, its install, options and start, and the address it announces.

Home Assistant's own ``AddonManager`` makes the add-on's calls, as Z-Wave JS's and Matter's
flows do; the store repository, which no core integration adds, goes through the same
Supervisor client. Every failure is an ``AddonSetupError`` whose ``reason`` is a config flow
abort key and whose message is the Supervisor's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Final

from aiohasupervisor import SupervisorClient, SupervisorError
from aiohasupervisor.models import StoreAddRepository
from homeassistant.components.hassio.addon_manager import (
    AddonError,
    AddonInfo,
    AddonManager,
    AddonState,
)
from homeassistant.components.hassio.handler import get_supervisor_client
from homeassistant.core import HomeAssistant
from homeassistant.helpers.hassio import is_hassio

from .const import CONF_HOST, CONF_PORT

_LOGGER = logging.getLogger(__name__)

# repository.yaml's url: the store's name for this repository, and the add-on's slug prefix
# (the Supervisor's: the first 8 hex digits of the lower-cased URL's SHA-1).
REPOSITORY_URL: Final = "https://github.com/yomiage/yomiage"
REPOSITORY_SLUG: Final = hashlib.sha1(REPOSITORY_URL.lower().encode()).hexdigest()[:8]
ADDON_SLUG: Final = f"{REPOSITORY_SLUG}_yomiage"
ADDON_NAME: Final = "Yomiage"

# The add-on's first start downloads the voices (about 1 GB) and prepares their graphs for this
# CPU: minutes on a Raspberry Pi 4B, longer on a slow connection.
START_TIMEOUT_S: Final = 30 * 60.0
POLL_INTERVAL_S: Final = 2.0

# AddonSetupError.reason values: each is an abort of the config flow (strings.json).
REPOSITORY_FAILED: Final = "addon_repository_failed"
INFO_FAILED: Final = "addon_info_failed"
NOT_AVAILABLE: Final = "addon_not_available"
INSTALL_FAILED: Final = "addon_install_failed"
OPTIONS_FAILED: Final = "addon_options_failed"
START_FAILED: Final = "addon_start_failed"
STOPPED: Final = "addon_stopped"
NO_ANSWER: Final = "addon_no_answer"


def supervisor_present(hass: HomeAssistant) -> bool:
    """Home Assistant OS (or Supervised): add-ons can be installed."""
    return is_hassio(hass)


class AddonSetupError(Exception):
    """A Supervisor step failed; ``reason`` names the step (the constants above)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class AddonAddress:
    """Where the add-on's server listens, as its discovery message says."""

    host: str
    port: int

    @classmethod
    def from_discovery(cls, config: dict[str, Any]) -> AddonAddress:
        try:
            return cls(str(config[CONF_HOST]), int(config[CONF_PORT]))
        except (KeyError, TypeError, ValueError):
            raise AddonSetupError(NO_ANSWER, f"unexpected discovery message: {config}") from None


@dataclass
class YomiageAddon:
    """The add-on, set up step by step; ``async_roll_back`` undoes what this object did."""

    hass: HomeAssistant
    added_repository: bool = False
    installed: bool = False

    def __post_init__(self) -> None:
        self._manager = AddonManager(self.hass, _LOGGER, ADDON_NAME, ADDON_SLUG)

    async def async_info(self) -> AddonInfo | None:
        """The add-on's state; None while the store does not know it (repository missing)."""
        if not await self._async_repository_added():
            return None
        try:
            return await self._manager.async_get_addon_info()
        except AddonError as err:
            raise AddonSetupError(INFO_FAILED, str(err)) from err

    async def async_installed(self) -> bool:
        info = await self.async_info()
        return info is not None and info.state is not AddonState.NOT_INSTALLED

    async def async_install(self, options: dict[str, Any]) -> None:
        """Add the repository where missing, install the add-on, write its options."""
        if not await self._async_repository_added():
            try:
                await self._client().store.add_repository(
                    StoreAddRepository(repository=REPOSITORY_URL)
                )
            except SupervisorError as err:
                raise AddonSetupError(REPOSITORY_FAILED, str(err)) from err
            self.added_repository = True
        info = await self.async_info()
        if info is None:  # the Supervisor took the repository but offers no add-on from it
            raise AddonSetupError(NOT_AVAILABLE, f"{REPOSITORY_URL} holds no {ADDON_SLUG}")
        if info.state is AddonState.NOT_INSTALLED:
            if not info.available:
                raise AddonSetupError(NOT_AVAILABLE, f"{ADDON_NAME} is not available here")
            try:
                await self._manager.async_install_addon()
            except AddonError as err:
                raise AddonSetupError(INSTALL_FAILED, str(err)) from err
            self.installed = True
            info = await self.async_info()
            assert info is not None
        try:
            # The add-on's defaults with the flow's choice (the Supervisor replaces them whole).
            await self._manager.async_set_addon_options({**info.options, **options})
        except AddonError as err:
            raise AddonSetupError(OPTIONS_FAILED, str(err)) from err

    async def async_start(self) -> AddonAddress:
        """Start the add-on where it is not running, then wait until its server answers (it
        announces itself only then)."""
        info = await self.async_info()
        if info is None or info.state is AddonState.NOT_INSTALLED:
            raise AddonSetupError(START_FAILED, f"{ADDON_NAME} is not installed")
        if info.state is not AddonState.RUNNING:
            try:
                await self._manager.async_start_addon()
            except AddonError as err:
                raise AddonSetupError(START_FAILED, str(err)) from err
        return await self._async_wait_for_address()

    async def async_roll_back(self) -> None:
        """Uninstall what this object installed and remove the repository it added: a failed
        setup leaves the Supervisor as it found it. Failures here are logged only."""
        try:
            if self.installed:
                await self._manager.async_uninstall_addon()
            if self.added_repository:
                await self._client().store.remove_repository(REPOSITORY_SLUG)
        except (AddonError, SupervisorError) as err:
            _LOGGER.warning("Could not undo the add-on's setup: %s", err)
        self.installed = self.added_repository = False

    async def _async_wait_for_address(self) -> AddonAddress:
        deadline = self.hass.loop.time() + START_TIMEOUT_S
        while True:
            try:
                return AddonAddress.from_discovery(
                    await self._manager.async_get_addon_discovery_info()
                )
            except AddonError:
                pass  # no message yet: the server is still downloading or loading voices
            info = await self.async_info()
            if info is None or info.state is not AddonState.RUNNING:
                raise AddonSetupError(STOPPED, f"{ADDON_NAME} stopped while starting")
            if self.hass.loop.time() >= deadline:
                raise AddonSetupError(
                    NO_ANSWER, f"{ADDON_NAME} did not answer within {START_TIMEOUT_S / 60:g} min"
                )
            await asyncio.sleep(POLL_INTERVAL_S)

    async def _async_repository_added(self) -> bool:
        try:
            repositories = await self._client().store.repositories_list()
        except SupervisorError as err:
            raise AddonSetupError(INFO_FAILED, str(err)) from err
        return any(repository.slug == REPOSITORY_SLUG for repository in repositories)

    def _client(self) -> SupervisorClient:
        return get_supervisor_client(self.hass)
