"""The Yomiage add-on's steps that the setup flow and the add-on entry's options share: a voice
from AivisHub for the add-on, after the page and the confirmation of aivishub_flow.py.

Not installed yet, the setup flow installs the add-on with the model (config_flow.py: addon_install
-> addon_start -> addon_finish). Installed, the model joins its ``aivishub_models`` (its other
options kept: official voices stay); it restarts, which downloads the model, and once its server
describes the model's voices the entry on it reloads. A restart that fails puts the options back
(supervisor.py), so that the voices it had speak on; the flow ends with that step's reason. Models
removed (the entry's options) are the same restart without them: the add-on deletes their files
when it starts (addon/run.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, ClassVar, Final

from homeassistant.config_entries import ConfigEntry, ConfigFlowResult

from .aivishub_flow import AivisHubSteps
from .const import CONF_HOST, CONF_PORT, DOMAIN
from .engine import YomiageError
from .engine.hub.aivishub import model_uuid
from .engine.hub.errors import AivisHubError
from .flow_steps import megabytes
from .remote import WyomingBackend
from .supervisor import (
    ADDON_NAME,
    ADDON_SLUG,
    NO_ANSWER,
    AddonAddress,
    AddonSetupError,
    YomiageAddon,
)

_LOGGER = logging.getLogger(__name__)

ADDON_AIVISHUB: Final = "addon_aivishub"  # the step: a voice from AivisHub for the add-on
# The add-on's options (addon/config.yaml) that the flows write.
VOICES: Final = "voices"
AIVISHUB_MODELS: Final = "aivishub_models"


def addon_models(options: Mapping[str, Any]) -> dict[str, str]:
    """uuid -> the item of the add-on's ``aivishub_models`` (a page or a UUID) that names it; an
    item that names none is left out (the add-on refuses it with its own message)."""
    models: dict[str, str] = {}
    for item in options.get(AIVISHUB_MODELS) or []:
        try:
            models[model_uuid(item)] = item
        except AivisHubError:
            _LOGGER.debug("%s's aivishub_models names no model: %s", ADDON_NAME, item)
    return models


async def async_connect_addon(address: AddonAddress) -> WyomingBackend:
    """The add-on's server as it answers; one that does not is the add-on's failure."""
    try:
        return await WyomingBackend.async_connect(address.host, address.port)
    except YomiageError as err:
        raise AddonSetupError(NO_ANSWER, str(err)) from err


class AddonSteps(AivisHubSteps):
    """addon_aivishub -> aivishub -> aivishub_confirm -> addon_aivishub_add ->
    addon_aivishub_added; any Supervisor failure -> addon_failed."""

    # Whether a missing add-on is installed with the model (the setup flow), or a reason to stop.
    installs_addon: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self._addon: YomiageAddon | None = None
        self._addon_error: AddonSetupError | None = None
        self._addon_server: WyomingBackend | None = None  # the started add-on's, as it answered
        self._aivishub_for_addon = False  # the AivisHub steps' model is the add-on's
        self._addon_now: dict[str, Any] | None = None  # its options; None: not installed

    async def async_step_addon_aivishub(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """A voice from AivisHub for the add-on: the page form, once the add-on's options say
        that it takes one (a folder of voices does not)."""
        if (stop := await self._async_look_up_addon()) is not None:
            return stop
        if self._addon_now is not None and self._addon_now.get(VOICES) == "local":
            folder = str(self._addon_now.get("local_folder") or "")
            return self.async_abort(
                reason="addon_aivishub_local", description_placeholders={"folder": folder}
            )
        self._aivishub_for_addon = True
        return await self.async_step_aivishub()

    async def _async_look_up_addon(self) -> ConfigFlowResult | None:
        """The add-on's options into ``_addon_now`` (None: not installed); an abort where the
        Supervisor cannot say, or where it is not installed and this flow does not install it."""
        self._addon = YomiageAddon(self.hass)
        try:
            self._addon_now = await self._addon.async_options()
        except AddonSetupError as err:
            return self._addon_abort(err)
        if self._addon_now is None and not self.installs_addon:
            return self.async_abort(reason="addon_not_installed")
        return None

    def _aivishub_present(self, uuid: str) -> str | None:
        """On the add-on: a model it lists and whose entry is set up (without one, the add-on
        may have failed to fetch it: adding it again starts it)."""
        if not self._aivishub_for_addon:
            return super()._aivishub_present(uuid)
        if self._addon_entry() is not None and uuid in addon_models(self._addon_now or {}):
            return "addon_aivishub_model_present"
        return None

    async def _async_aivishub_confirmed(self) -> ConfigFlowResult:
        if not self._aivishub_for_addon:
            return await super()._async_aivishub_confirmed()
        return await self.async_step_addon_aivishub_add()

    async def async_step_addon_aivishub_add(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The model joins the installed add-on's, which restarts to download it."""
        model = self._require_aivishub_model()
        options = self._addon_now or {}
        listed = list(options.get(AIVISHUB_MODELS) or [])
        if model.uuid not in addon_models(options):
            listed.append(model.uuid)
        change = partial(
            self._async_reconfigure,
            {AIVISHUB_MODELS: listed},
            lambda server: model.uuid in server.aivishub_models,
        )
        return await self._async_progress(
            "addon_aivishub_add",
            partial(self._async_addon_job, change, "addon_aivishub_added"),
            {"name": model.name, "size": megabytes(model.file.size)},
        )

    async def async_step_addon_aivishub_added(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The add-on speaks the model: the entry on it reloads to speak it too."""
        entry = self._addon_entry()
        assert entry is not None, "the setup flow makes the entry of an add-on without one"
        self._refresh_addon_entry(entry)
        return self.async_abort(
            reason="addon_aivishub_model_added",
            description_placeholders={"name": self._require_aivishub_model().name},
        )

    async def async_step_addon_failed(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        assert self._addon_error is not None
        return self._addon_abort(self._addon_error)

    def _addon_entry(self) -> ConfigEntry | None:
        """The server entry on the add-on, where there is one."""
        return self.hass.config_entries.async_entry_for_domain_unique_id(DOMAIN, ADDON_SLUG)

    async def _async_reconfigure(
        self, options: dict[str, Any], speaks: Callable[[WyomingBackend], bool]
    ) -> None:
        """The add-on restarted with ``options``, until its server answers as ``speaks``
        wants."""

        async def answered(address: AddonAddress) -> WyomingBackend:
            server = await async_connect_addon(address)
            if not speaks(server):
                raise AddonSetupError(
                    NO_ANSWER, f"{ADDON_NAME} started without the voices its options name"
                )
            return server

        self._addon_server = await self._require_addon().async_reconfigure(options, answered)

    def _refresh_addon_entry(self, entry: ConfigEntry) -> None:
        """The entry at the restarted add-on's address (as it announced it), reloaded for its
        voices now."""
        server = self._addon_server
        assert server is not None
        self.hass.config_entries.async_update_entry(
            entry, data={**entry.data, CONF_HOST: server.host, CONF_PORT: server.port}
        )
        self.hass.config_entries.async_schedule_reload(entry.entry_id)

    async def _async_addon_job(self, work: Callable[[], Awaitable[None]], next_step_id: str) -> str:
        """``work``, then ``next_step_id``; any failure ends the flow with its own reason."""
        try:
            await work()
        except AddonSetupError as err:
            self._addon_error = err
            return "addon_failed"
        except Exception as err:  # a bug, not the Supervisor's answer: end the flow, say so
            _LOGGER.exception("Unexpected error while setting up the %s add-on", ADDON_NAME)
            self._addon_error = AddonSetupError("unknown", str(err))
            return "addon_failed"
        return next_step_id

    def _addon_abort(self, err: AddonSetupError) -> ConfigFlowResult:
        _LOGGER.warning("Setting up the %s add-on failed: %s", ADDON_NAME, err)
        return self.async_abort(reason=err.reason)

    def _require_addon(self) -> YomiageAddon:
        if self._addon is None:
            raise RuntimeError("the add-on steps run after the add-on was looked up")
        return self._addon
