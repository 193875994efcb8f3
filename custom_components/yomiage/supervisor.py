"""The Yomiage add-on through Home Assistant's Supervisor (Home Assistant OS): the store
repository that holds it, its install, options and start, and the address it announces.

Home Assistant's own ``AddonManager`` makes the add-on's calls, as Z-Wave JS's and Matter's
flows do; the store repository, which no core integration adds, and the add-on's raw state go
through the same Supervisor client. Every failure is an ``AddonSetupError`` whose ``reason`` is a
config flow abort key and whose message is the Supervisor's.

What the Supervisor does, read from its code (``supervisor/apps/app.py``, ``api/``): an add-on
with a health check (ours: its server answers ``describe``) is ``startup`` from its container's
start until Docker calls it healthy, then ``started``; only then does ``GET /discovery`` list its
message. ``POST .../start`` waits up to 120 s for that, where the client gives up after 60 s:
a first start, which downloads the voices, takes longer, so a start that does not answer is
judged by the state that follows. ``POST .../restart`` is a stop, then that start. Adding a
repository clones it, which can outlast the client's 10 s as well.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final, TypeVar

from aiohasupervisor import SupervisorClient, SupervisorError
from aiohasupervisor.models import AddonState as SupervisorState
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
# What the add-on reads voice folders from: the host's /share and /media (config.yaml's map),
# which Home Assistant sees too; its local_folder option's default.
ADDON_FOLDERS: Final = (PurePosixPath("/share"), PurePosixPath("/media"))
ADDON_DEFAULT_FOLDER: Final = "/share/yomiage"

# The add-on's first start downloads the voices (about 1 GB) and prepares their graphs for this
# CPU: minutes on a Raspberry Pi 4B, longer on a slow connection.
START_TIMEOUT_S: Final = 30 * 60.0
# A repository clone the client stopped waiting for may still land.
REPOSITORY_TIMEOUT_S: Final = 120.0
POLL_INTERVAL_S: Final = 2.0
_ALIVE = frozenset({SupervisorState.STARTUP, SupervisorState.STARTED})

_T = TypeVar("_T")

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


class YomiageAddon:
    """The add-on, set up in two phases. ``async_install`` leaves nothing behind when it fails
    or is cancelled (the user closed the dialog): it removes what it added. ``async_start``
    keeps the add-on when it fails, so that its log says why and a new try starts it again.
    ``async_reconfigure`` changes the options of the add-on installed and restarts it, or puts
    them back."""

    def __init__(self, hass: HomeAssistant) -> None:
        self.hass = hass
        self._manager = AddonManager(hass, _LOGGER, ADDON_NAME, ADDON_SLUG)
        self._added_repository = False
        self._installed = False

    async def async_options(self) -> dict[str, Any] | None:
        """The installed add-on's options; None where it is not installed (as while its
        repository is not in the store)."""
        if not await self._async_repository_added():
            return None
        info = await self._async_info()
        return None if info.state is AddonState.NOT_INSTALLED else dict(info.options)

    async def async_install(self, options: dict[str, Any]) -> None:
        """Add the repository where missing, install the add-on, write its options."""
        try:
            await self._async_install(options)
        except AddonSetupError:
            await self._async_roll_back()
            raise
        except asyncio.CancelledError:
            self.hass.async_create_background_task(
                self._async_roll_back(), "yomiage: undo an add-on setup left half way"
            )
            raise

    async def async_start(self) -> AddonAddress:
        """Start the add-on where it is not running, then wait until its server answers (the
        Supervisor lists its announcement only then)."""
        if await self._async_state() not in _ALIVE:
            try:
                await self._manager.async_start_addon()
            except AddonError as err:
                if await self._async_state() not in _ALIVE:  # not merely a slow answer
                    raise AddonSetupError(START_FAILED, str(err)) from err
        return await self._async_wait_for_address()

    async def async_reconfigure(
        self, options: dict[str, Any], answer: Callable[[AddonAddress], Awaitable[_T]]
    ) -> _T:
        """Write ``options`` over the installed add-on's, restart it, and wait until its server
        answers as ``answer`` wants (it raises AddonSetupError where it does not). Where that
        fails (a model the add-on could not download stops it), the options are put back and it
        is started again, so that its voices speak as before; then the error is raised."""
        before = dict((await self._async_info()).options)
        await self._async_set_options({**before, **options})
        try:
            await self._async_restart()
            return await answer(await self._async_wait_for_address())
        except AddonSetupError:
            await self._async_restore(before)
            raise

    # -- installing --------------------------------------------------------------------------------
    async def _async_install(self, options: dict[str, Any]) -> None:
        if not await self._async_repository_added():
            await self._async_add_repository()
        info = await self._async_info()
        if info.state is AddonState.NOT_INSTALLED:
            if not info.available:
                raise AddonSetupError(NOT_AVAILABLE, f"{ADDON_NAME} is not available here")
            self._installed = True  # from here on an uninstall is due, whatever the answer
            try:
                await self._manager.async_install_addon()
            except AddonError as err:
                raise AddonSetupError(INSTALL_FAILED, str(err)) from err
            info = await self._async_info()
        # The add-on's defaults with the flow's choice (the Supervisor replaces them whole).
        await self._async_set_options({**info.options, **options})

    async def _async_set_options(self, options: dict[str, Any]) -> None:
        try:
            await self._manager.async_set_addon_options(options)
        except AddonError as err:
            raise AddonSetupError(OPTIONS_FAILED, str(err)) from err

    async def _async_add_repository(self) -> None:
        self._added_repository = True
        try:
            await self._client().store.add_repository(StoreAddRepository(repository=REPOSITORY_URL))
            return
        except SupervisorError as err:
            problem = err
        deadline = self.hass.loop.time() + REPOSITORY_TIMEOUT_S
        while isinstance(problem, TimeoutError) and self.hass.loop.time() < deadline:
            await asyncio.sleep(POLL_INTERVAL_S)  # the clone goes on without the client
            if await self._async_repository_added():
                return
        raise AddonSetupError(REPOSITORY_FAILED, str(problem)) from problem

    async def _async_roll_back(self) -> None:
        """Uninstall what was installed and remove the repository added here; failures are
        logged only (a Supervisor still installing refuses the uninstall)."""
        if self._installed:
            try:
                await self._manager.async_uninstall_addon()
            except AddonError as err:  # an install that failed left nothing to uninstall
                _LOGGER.debug("Nothing uninstalled: %s", err)
        try:
            if self._added_repository and await self._async_repository_added():
                await self._client().store.remove_repository(REPOSITORY_SLUG)
        except (AddonSetupError, SupervisorError) as err:
            _LOGGER.warning("Could not remove the add-on repository again: %s", err)
        self._installed = self._added_repository = False

    # -- starting ----------------------------------------------------------------------------------
    async def _async_restart(self) -> None:
        """A stop, then a start (of a stopped add-on: a start). Unlike a start's, the client
        waits for its answer as long as the Supervisor takes: an error is a refusal."""
        try:
            await self._manager.async_restart_addon()
        except AddonError as err:
            raise AddonSetupError(START_FAILED, str(err)) from err

    async def _async_restore(self, options: dict[str, Any]) -> None:
        """``options`` back, the add-on started with them; failures are logged only (the error
        that led here is the one reported)."""
        try:
            await self._async_set_options(options)
            await self._async_restart()
        except AddonSetupError as err:
            _LOGGER.warning("Could not put the %s add-on's options back: %s", ADDON_NAME, err)

    async def _async_wait_for_address(self) -> AddonAddress:
        deadline = self.hass.loop.time() + START_TIMEOUT_S
        while True:
            try:
                return AddonAddress.from_discovery(
                    await self._manager.async_get_addon_discovery_info()
                )
            except AddonError:
                pass  # no message yet: the server is still downloading or loading voices
            if await self._async_state() not in _ALIVE:
                raise AddonSetupError(STOPPED, f"{ADDON_NAME} stopped while starting")
            if self.hass.loop.time() >= deadline:
                raise AddonSetupError(
                    NO_ANSWER, f"{ADDON_NAME} did not answer within {START_TIMEOUT_S / 60:g} min"
                )
            await asyncio.sleep(POLL_INTERVAL_S)

    # -- the Supervisor's answers ------------------------------------------------------------------
    async def _async_info(self) -> AddonInfo:
        try:
            return await self._manager.async_get_addon_info()
        except AddonError as err:
            raise AddonSetupError(INFO_FAILED, str(err)) from err

    async def _async_state(self) -> SupervisorState:
        """The Supervisor's own state (AddonManager folds ``startup`` into not running)."""
        try:
            info = await self._client().addons.addon_info(ADDON_SLUG)
        except SupervisorError as err:
            raise AddonSetupError(INFO_FAILED, str(err)) from err
        return SupervisorState(info.state)

    async def _async_repository_added(self) -> bool:
        try:
            repositories = await self._client().store.repositories_list()
        except SupervisorError as err:
            raise AddonSetupError(INFO_FAILED, str(err)) from err
        return any(repository.slug == REPOSITORY_SLUG for repository in repositories)

    def _client(self) -> SupervisorClient:
        return get_supervisor_client(self.hass)
