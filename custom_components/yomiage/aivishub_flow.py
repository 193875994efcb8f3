"""The steps that add an AivisHub model, in the setup flow and in the AivisHub entry's options.

Paste a model's page (or its UUID): AivisHub's refusals are the form's errors. Then, before a
byte of the file, what the user is about to get: name and author, speakers and styles, the
file's size and version, its licence (quoted, or its page where it is long) and the model's
page. Where the engine runs here, confirming downloads it with progress (and the official voices'
language model, once) and loads every voice of the folder once to check them. A failure comes
back to the confirmation with its own message: nothing of the entry changes, and the next try
resumes a cut download. The first model makes the AivisHub entry (the setup flow's own step);
another joins it, and it reloads. Where the Yomiage add-on speaks the model instead, addon_flow.py
takes over after the confirmation (the two hooks below).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final

import voluptuous as vol
from homeassistant.config_entries import ConfigEntry, ConfigFlowResult
from homeassistant.const import CONF_URL
from homeassistant.core import HomeAssistant
from homeassistant.helpers.selector import TextSelector

from .aivishub import (
    UNIQUE_ID,
    aivishub_folder,
    fetch_voice,
    look_up,
    model_file,
    remove_models,
)
from .bundle_check import BundleCheckError, BundleSummary, probe_bundle
from .const import CONF_MODELS, DOMAIN
from .engine.hub.aivishub import AivisModel
from .engine.hub.download import FetchError
from .flow_steps import BackgroundSteps, describe_failure, megabytes

_LOGGER = logging.getLogger(__name__)

# The longest licence the confirmation quotes; a longer one is read on the model's page.
LICENCE_SHOWN: Final = 2000


def aivishub_entry(hass: HomeAssistant) -> ConfigEntry | None:
    return hass.config_entries.async_entry_for_domain_unique_id(DOMAIN, UNIQUE_ID)


class AivisHubSteps(BackgroundSteps):
    """aivishub (the page) -> aivishub_confirm -> aivishub_download -> aivishub_finish."""

    def __init__(self) -> None:
        super().__init__()
        self._aivishub_model: AivisModel | None = None
        self._aivishub_error: str | None = None  # why the last download failed: an error key
        self._aivishub_summary: BundleSummary | None = None  # the folder, checked

    async def async_step_aivishub(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """A model's page URL or UUID, as AivisHub describes the model (one request)."""
        errors: dict[str, str] = {}
        if user_input is not None:
            try:
                model = await self.hass.async_add_executor_job(look_up, user_input[CONF_URL])
            except FetchError as err:
                errors["base"] = describe_failure(err, {})
            else:
                if (present := self._aivishub_present(model.uuid)) is not None:
                    return self.async_abort(
                        reason=present, description_placeholders={"name": model.name}
                    )
                self._aivishub_model = model
                return await self.async_step_aivishub_confirm()
        schema = vol.Schema({vol.Required(CONF_URL): TextSelector()})
        return self.async_show_form(
            step_id="aivishub",
            data_schema=self.add_suggested_values_to_schema(schema, user_input or {}),
            errors=errors,
        )

    async def async_step_aivishub_confirm(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """What the user is about to get; confirming downloads it. Back here after a failed
        download, with why (confirm again to try again)."""
        model = self._require_aivishub_model()
        errors: dict[str, str] = {}
        if self._aivishub_error is not None:
            errors["base"], self._aivishub_error = self._aivishub_error, None
        elif user_input is not None:
            return await self._async_aivishub_confirmed()
        return self.async_show_form(
            step_id="aivishub_confirm",
            data_schema=vol.Schema({}),
            errors=errors,
            description_placeholders=confirmation(model),
        )

    def _aivishub_present(self, uuid: str) -> str | None:
        """The abort reason where model ``uuid`` is one of the voices already."""
        entry = aivishub_entry(self.hass)
        if entry is not None and uuid in entry.data[CONF_MODELS]:
            return "aivishub_model_present"
        return None

    async def _async_aivishub_confirmed(self) -> ConfigFlowResult:
        """The user confirmed the model: download it."""
        return await self.async_step_aivishub_download()

    async def async_step_aivishub_download(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        model = self._require_aivishub_model()
        return await self._async_progress(
            "aivishub_download",
            partial(self._async_fetch_aivishub, model),
            {"name": model.name, "size": megabytes(model.file.size)},
        )

    async def async_step_aivishub_finish(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The model joins the AivisHub entry, which reloads to speak it."""
        model = self._require_aivishub_model()
        entry = aivishub_entry(self.hass)
        assert entry is not None, "the setup flow makes the entry of the first model"
        models = [*entry.data[CONF_MODELS], model.uuid]
        self.hass.config_entries.async_update_entry(entry, data={**entry.data, CONF_MODELS: models})
        self.hass.config_entries.async_schedule_reload(entry.entry_id)
        return self.async_abort(
            reason="aivishub_model_added", description_placeholders={"name": model.name}
        )

    async def _async_fetch_aivishub(self, model: AivisModel) -> str:
        """On to ``aivishub_finish``; a failure back to the confirmation, which says why. A file
        the engine cannot load is deleted, unless it was there before."""
        was_there = await self.hass.async_add_executor_job(model_file(model.uuid).is_file)
        try:
            await self.hass.async_add_executor_job(
                partial(fetch_voice, model, self._progress_from_thread)
            )
            self._aivishub_summary = await self.hass.async_add_executor_job(
                probe_bundle, aivishub_folder()
            )
        except FetchError as err:
            self._aivishub_error = describe_failure(err, {})
            return "aivishub_confirm"
        except BundleCheckError as err:
            _LOGGER.warning("AivisHub model %s cannot be used: %s", model.uuid, err)
            if not was_there:
                await self.hass.async_add_executor_job(remove_models, [model.uuid])
            self._aivishub_error = "aivishub_unusable"
            return "aivishub_confirm"
        return "aivishub_finish"

    def _require_aivishub_model(self) -> AivisModel:
        if self._aivishub_model is None:
            raise RuntimeError("the AivisHub steps run after a model was looked up")
        return self._aivishub_model


def confirmation(model: AivisModel) -> dict[str, str]:
    """The confirmation's placeholders: markdown, as Home Assistant renders a description."""
    licence = model.file.license_text.strip()
    return {
        "name": model.name,
        "author": model.author,
        "version": model.file.version,
        "size": megabytes(model.file.size),
        "speakers": "\n".join(f"- {s.name}: {', '.join(s.styles)}" for s in model.speakers),
        "license_type": model.file.license_type,
        "license": (
            "\n".join(f"> {line}" for line in licence.splitlines())
            if licence and len(licence) <= LICENCE_SHOWN
            else model.page
        ),
        "page": model.page,
    }
