"""Config flow (pick a voice bundle and check it loads) and options flow (how it speaks)."""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from pathlib import Path
from typing import Any

import voluptuous as vol
from homeassistant.config_entries import (
    ConfigEntry,
    ConfigFlow,
    ConfigFlowResult,
    OptionsFlow,
)
from homeassistant.core import callback
from homeassistant.data_entry_flow import AbortFlow
from homeassistant.helpers.selector import (
    NumberSelector,
    NumberSelectorConfig,
    NumberSelectorMode,
    SelectOptionDict,
    SelectSelector,
    SelectSelectorConfig,
    SelectSelectorMode,
    TextSelector,
    TextSelectorConfig,
    TextSelectorType,
)

from .bundle_check import BundleCheckError, BundleSummary, probe_bundle, resolve_bundle_path
from .const import (
    CONF_DEVICE,
    CONF_PATH,
    CONF_REPO_ID,
    CONF_REVISION,
    CONF_SOURCE,
    CONF_SPEAKERS,
    CONF_THREADS,
    CONF_TOKEN,
    CONF_VOICE,
    DEVICES,
    DOMAIN,
    MAX_THREADS,
    SOURCE_HUGGINGFACE,
    SOURCE_LOCAL,
    SOURCE_OFFICIAL,
    SYNTHESIS_NUMBERS,
)
from .engine.bundle import Bundle
from .engine.download import (
    DEFAULT_REPO,
    FetchError,
    Progress,
    RepoOffer,
    fetch_bundle,
    list_offer,
)
from .engine.errors import BundleError
from .engine.options import OPTION_LIMITS
from .entry_options import runtime_settings, synthesis_defaults, voice_choices
from .hub import download_folder

_LOGGER = logging.getLogger(__name__)

# Slider steps for the numeric options (limits come from the engine).
_STEPS = {"speed": 0.05, "style_weight": 0.1}
_DEFAULT_STEP = 0.05
_PROGRESS_STEP = 0.01  # report download progress in 1 % steps, not per network read


class YomiageConfigFlow(ConfigFlow, domain=DOMAIN):
    """Add one voice bundle: a local folder, or voices downloaded from the Hugging Face Hub."""

    VERSION = 1

    def __init__(self) -> None:
        self._source = SOURCE_OFFICIAL
        self._offer: RepoOffer | None = None
        self._token: str | None = None
        self._speakers: list[str] = []
        self._download: asyncio.Task[BundleSummary] | None = None
        self._download_error: FetchError | BundleCheckError | None = None
        self._summary: BundleSummary | None = None
        self._reported_progress = 0.0

    @staticmethod
    @callback
    def async_get_options_flow(config_entry: ConfigEntry) -> YomiageOptionsFlow:
        return YomiageOptionsFlow()

    async def async_step_user(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        return self.async_show_menu(
            step_id="user", menu_options=[SOURCE_OFFICIAL, SOURCE_HUGGINGFACE, SOURCE_LOCAL]
        )

    # -- a folder on disk ------------------------------------------------------------------------
    async def async_step_local(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        errors: dict[str, str] = {}
        placeholders = {"file": "", "problem": "", "config_dir": self.hass.config.config_dir}
        if user_input is not None:
            try:
                path = resolve_bundle_path(self.hass, user_input[CONF_PATH])
                await self.async_set_unique_id(str(path))
                self._abort_if_unique_id_configured()
                summary = await self.hass.async_add_executor_job(probe_bundle, path)
            except BundleCheckError as problem:
                errors["base"] = problem.key
                placeholders.update(problem.placeholders)
            except AbortFlow:
                raise
            except Exception:
                _LOGGER.exception("Unexpected error while checking a voice bundle")
                errors["base"] = "unknown"
            else:
                data = {CONF_SOURCE: SOURCE_LOCAL, CONF_PATH: str(path)}
                return self._create_entry(path.name, data, summary)
        schema = vol.Schema({vol.Required(CONF_PATH): TextSelector()})
        return self.async_show_form(
            step_id="local",
            data_schema=self.add_suggested_values_to_schema(schema, user_input or {}),
            errors=errors,
            description_placeholders=placeholders,
        )

    # -- the Hub ---------------------------------------------------------------------------------
    async def async_step_official(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The published voices: list them, then let the user pick speakers."""
        self._source = SOURCE_OFFICIAL
        try:
            await self._async_list(DEFAULT_REPO, revision=None, token=None)
        except FetchError as err:
            return self.async_abort(
                reason=err.translation_key, description_placeholders={"message": str(err)}
            )
        return await self.async_step_speakers()

    async def async_step_huggingface(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Another repository with the same layout (private ones need a token)."""
        self._source = SOURCE_HUGGINGFACE
        errors: dict[str, str] = {}
        placeholders = {"message": ""}
        if user_input is not None:
            try:
                await self._async_list(
                    user_input[CONF_REPO_ID].strip(),
                    revision=(user_input.get(CONF_REVISION) or "").strip() or None,
                    token=(user_input.get(CONF_TOKEN) or "").strip() or None,
                )
            except FetchError as err:
                errors["base"] = err.translation_key
                placeholders["message"] = str(err)
            else:
                return await self.async_step_speakers()
        schema = vol.Schema(
            {
                vol.Required(CONF_REPO_ID): TextSelector(),
                vol.Optional(CONF_REVISION): TextSelector(),
                vol.Optional(CONF_TOKEN): TextSelector(
                    TextSelectorConfig(type=TextSelectorType.PASSWORD)
                ),
            }
        )
        suggested = {k: v for k, v in (user_input or {}).items() if k != CONF_TOKEN}
        return self.async_show_form(
            step_id="huggingface",
            data_schema=self.add_suggested_values_to_schema(schema, suggested),
            errors=errors,
            description_placeholders=placeholders,
        )

    async def async_step_speakers(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Which speakers to download (each is a few hundred MB)."""
        offer = self._require_offer()
        errors: dict[str, str] = {}
        placeholders = {
            "repo": offer.repo_id,
            "shared_size": _megabytes(offer.download_size([])),
            "message": "",
            "file": "",
            "problem": "",
        }
        if self._download_error is not None:  # back here after a failed download: say why
            errors["base"] = _describe_failure(self._download_error, placeholders)
            self._download_error = None
        elif user_input is not None:
            if not user_input.get(CONF_SPEAKERS):
                errors["base"] = "no_speaker_chosen"
            else:
                await self.async_set_unique_id(str(download_folder(offer.repo_id)))
                self._abort_if_unique_id_configured()
                self._speakers = list(user_input[CONF_SPEAKERS])
                return await self.async_step_download()
        speaker_options = [
            SelectOptionDict(value=name, label=f"{name} ({_megabytes(offer.speaker_size(name))})")
            for name in offer.speakers
        ]
        schema = vol.Schema(
            {
                vol.Required(
                    CONF_SPEAKERS, default=self._speakers or list(offer.speakers[:1])
                ): SelectSelector(
                    SelectSelectorConfig(
                        options=speaker_options, multiple=True, mode=SelectSelectorMode.LIST
                    )
                )
            }
        )
        return self.async_show_form(
            step_id="speakers",
            data_schema=schema,
            errors=errors,
            description_placeholders=placeholders,
        )

    async def async_step_download(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Download (resuming what an earlier try left) with progress, then check the bundle."""
        offer = self._require_offer()
        if self._download is None:
            self._reported_progress = 0.0
            self._download = self.hass.async_create_task(self._async_download(offer))
        if not self._download.done():
            return self.async_show_progress(
                step_id="download",
                progress_action="download",
                progress_task=self._download,
                description_placeholders={
                    "repo": offer.repo_id,
                    "speakers": ", ".join(self._speakers),
                    "size": _megabytes(offer.download_size(self._speakers)),
                },
            )
        download, self._download = self._download, None
        try:
            self._summary = download.result()
        except (FetchError, BundleCheckError) as err:
            self._download_error = err
            return self.async_show_progress_done(next_step_id="speakers")
        return self.async_show_progress_done(next_step_id="finish")

    async def async_step_finish(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        offer = self._require_offer()
        assert self._summary is not None
        data: dict[str, Any] = {
            CONF_SOURCE: self._source,
            CONF_PATH: str(download_folder(offer.repo_id)),
            CONF_REPO_ID: offer.repo_id,
            CONF_REVISION: offer.commit,
            CONF_SPEAKERS: self._speakers,
        }
        if self._token:
            data[CONF_TOKEN] = self._token
        title = "Yomiage" if self._source == SOURCE_OFFICIAL else offer.repo_id
        return self._create_entry(title, data, self._summary)

    async def _async_list(self, repo_id: str, revision: str | None, token: str | None) -> None:
        self._offer = await self.hass.async_add_executor_job(
            partial(list_offer, repo_id, revision=revision, token=token)
        )
        self._token = token

    async def _async_download(self, offer: RepoOffer) -> BundleSummary:
        root = await self.hass.async_add_executor_job(
            partial(
                fetch_bundle,
                download_folder(offer.repo_id),
                offer.repo_id,
                speakers=self._speakers,
                revision=offer.commit,
                token=self._token,
                progress=self._progress_from_thread,
            )
        )
        return await self.hass.async_add_executor_job(probe_bundle, Path(root))

    def _progress_from_thread(self, progress: Progress) -> None:
        """Called by the downloading thread: hop to the event loop."""
        self.hass.loop.call_soon_threadsafe(self._report_progress, progress.fraction)

    @callback
    def _report_progress(self, fraction: float) -> None:
        # Home Assistant 2025.4 has no progress bar for flows yet; later versions do.
        update = getattr(self, "async_update_progress", None)
        if update is not None and fraction - self._reported_progress >= _PROGRESS_STEP:
            self._reported_progress = fraction
            update(fraction)

    def _require_offer(self) -> RepoOffer:
        if self._offer is None:
            raise RuntimeError("the Hub step runs after a repository was listed")
        return self._offer

    def _create_entry(
        self, title: str, data: dict[str, Any], summary: BundleSummary
    ) -> ConfigFlowResult:
        return self.async_create_entry(
            title=title, data=data, options={CONF_VOICE: summary.default_voice}
        )


def _describe_failure(err: FetchError | BundleCheckError, placeholders: dict[str, str]) -> str:
    """The error key for a failed download or check; fills in the placeholders its text uses."""
    if isinstance(err, FetchError):
        placeholders["message"] = str(err)
        return err.translation_key
    placeholders.update(err.placeholders)
    return err.key


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size / 1e6:.2f} MB"


class YomiageOptionsFlow(OptionsFlow):
    """Default voice, synthesis parameters and how the engine runs; saving reloads the entry."""

    async def async_step_init(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        if user_input is not None:
            user_input[CONF_THREADS] = int(user_input[CONF_THREADS])
            return self.async_create_entry(data=user_input)
        try:
            voices = await self.hass.async_add_executor_job(
                _bundle_voices, self.config_entry.data[CONF_PATH]
            )
        except BundleError as err:
            return self.async_abort(
                reason="bundle_broken",
                description_placeholders={"file": err.path, "problem": err.problem},
            )
        return self.async_show_form(step_id="init", data_schema=self._schema(voices))

    def _schema(self, voices: dict[str, list[str]]) -> vol.Schema:
        first_voice = voice_choices(voices)[0][0]
        current = synthesis_defaults(self.config_entry.options, first_voice)
        device, threads = runtime_settings(self.config_entry.options)
        fields: dict[vol.Marker, Any] = {
            vol.Required(CONF_VOICE, default=current[CONF_VOICE]): _voice_selector(voices)
        }
        for name in SYNTHESIS_NUMBERS:
            fields[vol.Required(name, default=current[name])] = _number_selector(name)
        fields[vol.Required(CONF_THREADS, default=threads)] = NumberSelector(
            NumberSelectorConfig(min=0, max=MAX_THREADS, step=1, mode=NumberSelectorMode.BOX)
        )
        fields[vol.Required(CONF_DEVICE, default=device)] = SelectSelector(
            SelectSelectorConfig(options=list(DEVICES), translation_key=CONF_DEVICE)
        )
        return vol.Schema(fields)


def _bundle_voices(path: str) -> dict[str, list[str]]:
    """Speaker -> styles from the bundle's configs (cheap: no graph is loaded)."""
    bundle = Bundle.open(path)
    return {name: list(files.config.styles) for name, files in bundle.speakers.items()}


def _voice_selector(voices: dict[str, list[str]]) -> SelectSelector:
    options = [SelectOptionDict(value=value, label=label) for value, label in voice_choices(voices)]
    return SelectSelector(SelectSelectorConfig(options=options, mode=SelectSelectorMode.DROPDOWN))


def _number_selector(name: str) -> NumberSelector:
    low, high = OPTION_LIMITS[name]
    return NumberSelector(
        NumberSelectorConfig(
            min=low, max=high, step=_STEPS.get(name, _DEFAULT_STEP), mode=NumberSelectorMode.SLIDER
        )
    )
