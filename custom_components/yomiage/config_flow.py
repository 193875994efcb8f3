"""Config flow (pick a voice bundle and check it loads; models from AivisHub; or a Yomiage Wyoming
server: the add-on, installed and started from here on Home Assistant OS, or one at an address) and
options flow (how it speaks, the user dictionary; the AivisHub entry's models, the add-on's)."""

from __future__ import annotations

import logging
import posixpath
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import voluptuous as vol
from homeassistant.config_entries import (
    ConfigEntry,
    ConfigEntryState,
    ConfigFlow,
    ConfigFlowResult,
    OptionsFlow,
)
from homeassistant.core import callback
from homeassistant.data_entry_flow import AbortFlow
from homeassistant.helpers.selector import (
    BooleanSelector,
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
from homeassistant.helpers.service_info.hassio import HassioServiceInfo
from homeassistant.helpers.service_info.zeroconf import ZeroconfServiceInfo

from .addon_flow import (
    ADDON_AIVISHUB,
    AIVISHUB_MODELS,
    VOICES,
    AddonSteps,
    addon_models,
    async_connect_addon,
)
from .aivishub import TITLE as AIVISHUB_TITLE
from .aivishub import UNIQUE_ID as AIVISHUB_ID
from .aivishub import aivishub_folder, model_names, remove_models
from .aivishub_flow import aivishub_entry
from .backend import InstalledModel
from .bundle_check import BundleCheckError, BundleSummary, probe_bundle, resolve_bundle_path
from .const import (
    CONF_ADDON,
    CONF_DEVICE,
    CONF_HOST,
    CONF_MODELS,
    CONF_PATH,
    CONF_PORT,
    CONF_REPO_ID,
    CONF_REVISION,
    CONF_SOURCE,
    CONF_SPEAKERS,
    CONF_THREADS,
    CONF_TOKEN,
    CONF_USER_DICTIONARY,
    CONF_VOICE,
    DEFAULT_WYOMING_PORT,
    DEVICES,
    DOMAIN,
    MAX_THREADS,
    SOURCE_ADDON,
    SOURCE_AIVISHUB,
    SOURCE_HUGGINGFACE,
    SOURCE_LOCAL,
    SOURCE_OFFICIAL,
    SOURCE_WYOMING,
    SYNTHESIS_NUMBERS,
    SYNTHESIS_SWITCHES,
)
from .engine import OPTION_LIMITS, BundleError, YomiageError
from .engine.bundle import Bundle
from .engine.hub.download import (
    DEFAULT_REPO,
    FetchError,
    RepoOffer,
    fetch_bundle,
    list_offer,
)
from .engine.wyoming_contract import ZEROCONF_MARK
from .entry_options import runtime_settings, synthesis_defaults, voice_choices
from .flow_steps import describe_failure, megabytes
from .hub import download_folder
from .local_engine import (
    IMPORT_FAILED,
    INSTALL_FAILED,
    UNSUPPORTED_PLATFORM,
    LocalEngineUnavailableError,
    async_engine_importable,
    async_ensure_local_engine,
    platform_problem,
)
from .local_setup import downloaded_language_model
from .remote import WyomingBackend
from .supervisor import (
    ADDON_DEFAULT_FOLDER,
    ADDON_FOLDERS,
    ADDON_NAME,
    ADDON_SLUG,
    AddonAddress,
    AddonSetupError,
    supervisor_present,
)
from .user_words import UserWordsError, parse_user_words

_LOGGER = logging.getLogger(__name__)

# Slider steps for the numeric options (limits come from the engine).
_STEPS = {"speed": 0.05, "style_weight": 0.1, "volume": 0.5, "lead_silence": 10}
_DEFAULT_STEP = 0.05
# Options whose range is far wider than where users move them (style strength 0-20 around a
# default of 1, lead silence 0-1000 ms): a number field, where a slider would put the default
# at the track's very start.
_NUMBER_FIELDS = frozenset({"style_weight", "lead_silence"})


class YomiageConfigFlow(AddonSteps, ConfigFlow, domain=DOMAIN):
    """Add one voice bundle: a local folder, voices downloaded from the Hugging Face Hub, or a
    model from AivisHub (aivishub_flow.py: every AivisHub model in one entry); or a server: the
    add-on (addon_flow.py: an AivisHub model for it), one at an address."""

    VERSION = 1
    installs_addon = True

    def __init__(self) -> None:
        super().__init__()
        self._source = SOURCE_OFFICIAL
        self._offer: RepoOffer | None = None
        self._token: str | None = None
        self._speakers: list[str] = []
        self._download_error: FetchError | BundleCheckError | None = None
        self._summary: BundleSummary | None = None
        self._discovered: tuple[str, int, str] | None = None  # host, port, default voice
        self._discovered_addon: str | None = None  # the slug of the add-on that announced it
        self._for_addon = False  # the voices chosen are the add-on's options
        self._addon_options: dict[str, Any] = {}
        self._engine_ready = False
        self._after_install = SOURCE_LOCAL
        self._engine_problem: LocalEngineUnavailableError | None = None

    @staticmethod
    @callback
    def async_get_options_flow(config_entry: ConfigEntry) -> YomiageOptionsFlow:
        return YomiageOptionsFlow()

    async def async_step_user(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """Where the voices come from. Where the engine cannot run (Home Assistant OS and
        Container: musl), only a server is offered, the add-on first where there is a
        Supervisor."""
        if problem := await self.hass.async_add_executor_job(platform_problem):
            self._engine_problem = LocalEngineUnavailableError(UNSUPPORTED_PLATFORM, problem)
            return self._offer_server(UNSUPPORTED_PLATFORM)
        return self.async_show_menu(
            step_id="user",
            menu_options=[
                *self._addon_choice(),
                SOURCE_OFFICIAL,
                SOURCE_AIVISHUB,
                SOURCE_HUGGINGFACE,
                SOURCE_LOCAL,
                SOURCE_WYOMING,
            ],
        )

    def _addon_choice(self) -> list[str]:
        return [SOURCE_ADDON] if supervisor_present(self.hass) else []

    # -- the engine on this machine: its native packages -----------------------------------------
    async def _async_engine_detour(self, step_id: str) -> ConfigFlowResult | None:
        """None when the engine can run here; else the install step, which returns to
        ``step_id`` once the packages are in (or explains why they cannot be)."""
        if self._engine_ready or await async_engine_importable(self.hass):
            self._engine_ready = True
            return None
        self._after_install = step_id
        return await self.async_step_install()

    async def async_step_install(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Install onnxruntime and pyopenjtalk-plus (minutes on a Raspberry Pi) with a spinner."""
        return await self._async_progress("install", self._async_install_engine)

    async def _async_install_engine(self) -> str:
        """Back to the step that needed the engine; else the menu that says why it cannot run."""
        try:
            await async_ensure_local_engine(self.hass)
        except LocalEngineUnavailableError as problem:
            self._engine_problem = problem
            return problem.reason
        self._engine_ready = True
        return self._after_install

    async def async_step_engine_unsupported(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        return self._offer_server(UNSUPPORTED_PLATFORM)

    async def async_step_engine_install_failed(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        return self._offer_server(INSTALL_FAILED)

    async def async_step_engine_import_failed(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        return self._offer_server(IMPORT_FAILED)

    def _offer_server(self, step_id: str) -> ConfigFlowResult:
        """Say in plain words why the engine cannot run here; offer a Yomiage server instead,
        and a voice from AivisHub that the add-on speaks (the in-process path's choice, here)."""
        detail = self._engine_problem.detail if self._engine_problem else ""
        addon = [SOURCE_ADDON, ADDON_AIVISHUB] if supervisor_present(self.hass) else []
        return self.async_show_menu(
            step_id=step_id,
            menu_options=[*addon, SOURCE_WYOMING],
            description_placeholders={"detail": detail},
        )

    # -- the Yomiage add-on, through the Supervisor ----------------------------------------------
    async def async_step_addon(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """Install the add-on (its voices chosen next), or start the one already installed."""
        await self.async_set_unique_id(ADDON_SLUG)
        self._abort_if_unique_id_configured()
        if (stop := await self._async_look_up_addon()) is not None:
            return stop
        if self._addon_now is not None:
            return await self.async_step_addon_start()  # its voices are its own options
        self._for_addon = True
        return self.async_show_menu(
            step_id=SOURCE_ADDON,
            menu_options=[SOURCE_OFFICIAL, SOURCE_HUGGINGFACE, ADDON_AIVISHUB, "addon_folder"],
        )

    async def async_step_addon_folder(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """A voice folder under /share or /media, which the add-on reads."""
        errors: dict[str, str] = {}
        placeholders = {"file": ""}
        if user_input is not None:
            # Normalised before the check: /share/../config is not under /share.
            folder = PurePosixPath(posixpath.normpath(str(user_input[CONF_PATH]).strip()))
            placeholders["file"] = str(folder)
            if not folder.is_absolute() or not any(
                folder.is_relative_to(root) for root in ADDON_FOLDERS
            ):
                errors["base"] = "addon_folder_not_shared"
            elif not await self.hass.async_add_executor_job(Path(folder).is_dir):
                errors["base"] = "not_a_folder"
            else:
                self._addon_options = {"voices": "local", "local_folder": str(folder)}
                return await self.async_step_addon_install()
        schema = vol.Schema({vol.Required(CONF_PATH, default=ADDON_DEFAULT_FOLDER): TextSelector()})
        return self.async_show_form(
            step_id="addon_folder",
            data_schema=self.add_suggested_values_to_schema(schema, user_input or {}),
            errors=errors,
            description_placeholders=placeholders,
        )

    async def async_step_addon_install(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Add the store repository, install the add-on, write the voices into its options."""
        install = partial(self._require_addon().async_install, self._addon_options)
        return await self._async_progress(
            "addon_install", partial(self._async_addon_job, install, "addon_start")
        )

    async def async_step_addon_start(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Start the add-on and wait until its server answers (the first start downloads the
        voices, or the AivisHub model and the language model, and prepares them for this CPU)."""
        job = partial(self._async_addon_job, self._async_start_addon, "addon_finish")
        if not self._aivishub_for_addon:
            return await self._async_progress("addon_start", job)
        model = self._require_aivishub_model()
        placeholders = {"name": model.name, "size": megabytes(model.file.size)}
        return await self._async_progress("addon_start", job, placeholders, "addon_start_aivishub")

    async def async_step_addon_finish(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        server = self._addon_server
        assert server is not None
        self._abort_if_unique_id_configured()  # the announcement's own flow may have been first
        self._async_abort_entries_match({CONF_HOST: server.host, CONF_PORT: server.port})
        return self._create_server_entry(
            server.host, server.port, server.default_voice, addon=ADDON_SLUG
        )

    async def _async_start_addon(self) -> None:
        self._addon_server = await async_connect_addon(await self._require_addon().async_start())

    # -- a voice from AivisHub for the add-on (the steps: addon_flow.py) -------------------------
    async def async_step_addon_aivishub(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Installed with the add-on, or added to the one installed."""
        await self.async_set_unique_id(ADDON_SLUG)
        return await super().async_step_addon_aivishub(user_input)

    async def _async_aivishub_confirmed(self) -> ConfigFlowResult:
        """No add-on yet: it is installed with the model as its voices."""
        if self._aivishub_for_addon and self._addon_now is None:
            model = self._require_aivishub_model()
            self._addon_options = {VOICES: "aivishub", AIVISHUB_MODELS: [model.uuid]}
            return await self.async_step_addon_install()
        return await super()._async_aivishub_confirmed()

    async def async_step_addon_aivishub_added(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """An add-on installed by hand, without an entry yet: now it has one."""
        if self._addon_entry() is None:
            return await self.async_step_addon_finish()
        return await super().async_step_addon_aivishub_added(user_input)

    async def async_step_hassio(self, discovery_info: HassioServiceInfo) -> ConfigFlowResult:
        """The add-on announced its server (it does once the server answers): confirm, then
        an entry with every option, whoever installed the add-on."""
        try:
            address = AddonAddress.from_discovery(discovery_info.config)
        except AddonSetupError:
            return self.async_abort(reason="not_yomiage_server")
        await self.async_set_unique_id(discovery_info.slug)
        self._abort_if_unique_id_configured(
            updates={CONF_HOST: address.host, CONF_PORT: address.port}
        )
        # The same server added by its address earlier (before the add-on announced itself).
        self._async_abort_entries_match({CONF_HOST: address.host, CONF_PORT: address.port})
        return await self._async_discovered(
            address.host, address.port, discovery_info.name, "hassio_confirm", discovery_info.slug
        )

    async def async_step_hassio_confirm(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        return self._confirm_discovered("hassio_confirm", user_input)

    # -- a Yomiage Wyoming server ----------------------------------------------------------------
    async def async_step_wyoming(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Host and port of a Yomiage Wyoming server (the add-on, or ``yomiage serve``)."""
        errors: dict[str, str] = {}
        placeholders = {"address": ""}
        if user_input is not None:
            host = str(user_input[CONF_HOST]).strip()
            port = int(user_input[CONF_PORT])
            await self.async_set_unique_id(f"tcp://{host}:{port}")
            self._abort_if_unique_id_configured()
            try:
                server = await WyomingBackend.async_connect(host, port)
            except YomiageError as err:
                _LOGGER.warning("No Yomiage server at %s:%s: %s", host, port, err)
                errors["base"] = err.translation_key
                placeholders["address"] = f"{host}:{port}"
            else:
                return self._create_server_entry(host, port, server.default_voice)
        schema = vol.Schema(
            {
                vol.Required(CONF_HOST): TextSelector(),
                vol.Required(CONF_PORT, default=DEFAULT_WYOMING_PORT): NumberSelector(
                    NumberSelectorConfig(min=1, max=65535, step=1, mode=NumberSelectorMode.BOX)
                ),
            }
        )
        return self.async_show_form(
            step_id=SOURCE_WYOMING,
            data_schema=self.add_suggested_values_to_schema(schema, user_input or {}),
            errors=errors,
            description_placeholders=placeholders,
        )

    def _create_server_entry(
        self, host: str, port: int, default_voice: str, addon: str | None = None
    ) -> ConfigFlowResult:
        """A server entry; ``addon``: the slug of the add-on that runs it."""
        data: dict[str, Any] = {CONF_SOURCE: SOURCE_WYOMING, CONF_HOST: host, CONF_PORT: port}
        if addon is not None:
            data[CONF_ADDON] = addon
        return self.async_create_entry(
            title=f"{ADDON_NAME} app" if addon is not None else f"Yomiage {host}",
            data=data,
            options={CONF_VOICE: default_voice},
        )

    async def async_step_zeroconf(self, discovery_info: ZeroconfServiceInfo) -> ConfigFlowResult:
        """A Wyoming server announced on the network; taken where it says it is Yomiage's
        (``yomiage serve --zeroconf``), then confirmed by the user: no address to type."""
        if ZEROCONF_MARK not in discovery_info.properties:
            return self.async_abort(reason="not_yomiage_server")
        host, port = discovery_info.host, discovery_info.port
        if port is None:
            return self.async_abort(reason="not_yomiage_server")
        await self.async_set_unique_id(f"tcp://{host}:{port}")
        self._abort_if_unique_id_configured()
        name = discovery_info.name.removesuffix(f".{discovery_info.type}")
        return await self._async_discovered(host, port, name, "zeroconf_confirm")

    async def async_step_zeroconf_confirm(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        return self._confirm_discovered("zeroconf_confirm", user_input)

    async def _async_discovered(
        self, host: str, port: int, name: str, confirm_step: str, addon: str | None = None
    ) -> ConfigFlowResult:
        """Ask the discovered server for its voices, then let the user confirm it; ``addon``:
        the slug of the add-on that announced it."""
        try:
            server = await WyomingBackend.async_connect(host, port)
        except YomiageError as err:
            _LOGGER.warning("The Yomiage server announced at %s:%s: %s", host, port, err)
            return self.async_abort(
                reason="server_unreachable", description_placeholders={"address": f"{host}:{port}"}
            )
        self._discovered = (host, port, server.default_voice)
        self._discovered_addon = addon
        self.context["title_placeholders"] = {"name": name, "address": f"{host}:{port}"}
        return self._confirm_discovered(confirm_step, None)

    def _confirm_discovered(
        self, step_id: str, user_input: dict[str, Any] | None
    ) -> ConfigFlowResult:
        assert self._discovered is not None
        host, port, default_voice = self._discovered
        if user_input is not None:
            return self._create_server_entry(host, port, default_voice, self._discovered_addon)
        self._set_confirm_only()
        return self.async_show_form(
            step_id=step_id,
            description_placeholders=self.context["title_placeholders"],
        )

    # -- a folder on disk ------------------------------------------------------------------------
    async def async_step_local(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        if (detour := await self._async_engine_detour(SOURCE_LOCAL)) is not None:
            return detour
        errors: dict[str, str] = {}
        placeholders = {"file": "", "config_dir": self.hass.config.config_dir}
        if user_input is not None:
            try:
                path = resolve_bundle_path(self.hass, user_input[CONF_PATH])
                await self.async_set_unique_id(str(path))
                self._abort_if_unique_id_configured()
                summary = await self.hass.async_add_executor_job(probe_bundle, path)
            except BundleCheckError as problem:
                errors["base"] = describe_failure(problem, placeholders)
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

    # -- AivisHub (the steps: aivishub_flow.py) --------------------------------------------------
    async def async_step_aivishub(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        if not self._aivishub_for_addon and (
            detour := await self._async_engine_detour(SOURCE_AIVISHUB)
        ):
            return detour
        return await super().async_step_aivishub(user_input)

    async def async_step_aivishub_finish(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The first model makes the AivisHub entry; another joins it."""
        if aivishub_entry(self.hass) is not None:
            return await super().async_step_aivishub_finish(user_input)
        model = self._require_aivishub_model()
        assert self._aivishub_summary is not None
        await self.async_set_unique_id(AIVISHUB_ID)
        self._abort_if_unique_id_configured()
        data = {
            CONF_SOURCE: SOURCE_AIVISHUB,
            CONF_PATH: str(aivishub_folder()),
            CONF_MODELS: [model.uuid],
        }
        return self._create_entry(AIVISHUB_TITLE, data, self._aivishub_summary)

    # -- the Hub ---------------------------------------------------------------------------------
    async def async_step_official(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The published voices: list them, then let the user pick speakers."""
        if not self._for_addon and (detour := await self._async_engine_detour(SOURCE_OFFICIAL)):
            return detour
        self._source = SOURCE_OFFICIAL
        try:
            await self._async_list(DEFAULT_REPO, revision=None, token=None)
        except FetchError as err:  # offline, most likely: say so and let the user try again
            placeholders = {"repo": DEFAULT_REPO, "revision": ""}
            return self.async_show_form(
                step_id=SOURCE_OFFICIAL,
                errors={"base": describe_failure(err, placeholders)},
                description_placeholders=placeholders,
            )
        return await self.async_step_speakers()

    async def async_step_huggingface(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Another repository with the same layout (private ones need a token; the add-on
        takes public ones, at their newest revision)."""
        if not self._for_addon and (detour := await self._async_engine_detour(SOURCE_HUGGINGFACE)):
            return detour
        self._source = SOURCE_HUGGINGFACE
        errors: dict[str, str] = {}
        placeholders = {"repo": "", "revision": ""}
        if user_input is not None:
            placeholders["repo"] = user_input[CONF_REPO_ID].strip()
            placeholders["revision"] = (user_input.get(CONF_REVISION) or "").strip()
            try:
                await self._async_list(
                    placeholders["repo"],
                    revision=placeholders["revision"] or None,
                    token=(user_input.get(CONF_TOKEN) or "").strip() or None,
                )
            except FetchError as err:
                errors["base"] = describe_failure(err, placeholders)
            else:
                return await self.async_step_speakers()
        fields: dict[vol.Marker, Any] = {vol.Required(CONF_REPO_ID): TextSelector()}
        if not self._for_addon:
            fields[vol.Optional(CONF_REVISION)] = TextSelector()
            fields[vol.Optional(CONF_TOKEN)] = TextSelector(
                TextSelectorConfig(type=TextSelectorType.PASSWORD)
            )
        schema = vol.Schema(fields)
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
            "revision": offer.commit,
            "shared_size": megabytes(offer.download_size([])),
            "file": "",
        }
        if self._download_error is not None:  # back here after a failed download: say why
            errors["base"] = describe_failure(self._download_error, placeholders)
            self._download_error = None
        elif user_input is not None:
            if not user_input.get(CONF_SPEAKERS):
                errors["base"] = "no_speaker_chosen"
            elif self._for_addon:
                self._speakers = list(user_input[CONF_SPEAKERS])
                self._addon_options = {
                    "voices": "official" if self._source == SOURCE_OFFICIAL else "hub",
                    "hub_repo": "" if self._source == SOURCE_OFFICIAL else offer.repo_id,
                    "speakers": self._speakers,
                }
                return await self.async_step_addon_install()
            else:
                await self.async_set_unique_id(str(download_folder(offer.repo_id)))
                self._abort_if_unique_id_configured()
                self._speakers = list(user_input[CONF_SPEAKERS])
                return await self.async_step_download()
        speaker_options = [
            SelectOptionDict(value=name, label=f"{name} ({megabytes(offer.speaker_size(name))})")
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
        return await self._async_progress(
            "download",
            partial(self._async_download, offer),
            {
                "repo": offer.repo_id,
                "speakers": ", ".join(self._speakers),
                "size": megabytes(offer.download_size(self._speakers)),
            },
        )

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
        # The official voices are named by their speakers, other repositories by themselves.
        title = ", ".join(self._speakers) if self._source == SOURCE_OFFICIAL else offer.repo_id
        return self._create_entry(title, data, self._summary)

    async def _async_list(self, repo_id: str, revision: str | None, token: str | None) -> None:
        self._offer = await self.hass.async_add_executor_job(
            partial(list_offer, repo_id, revision=revision, token=token)
        )
        self._token = token

    async def _async_download(self, offer: RepoOffer) -> str:
        """On to ``finish``; a failed download or check goes back to the speakers, which say
        why."""
        try:
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
            self._summary = await self.hass.async_add_executor_job(probe_bundle, Path(root))
        except (FetchError, BundleCheckError) as err:
            self._download_error = err
            return "speakers"
        return "finish"

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


class YomiageOptionsFlow(AddonSteps, OptionsFlow):
    """Default voice, synthesis parameters, the user dictionary and how the engine runs (a
    server entry: its default voice); saving reloads the entry. The AivisHub entry's also add
    and remove models, and so does the entry on the add-on (in the add-on's options)."""

    def __init__(self) -> None:
        super().__init__()
        self._addon_models_kept: list[str] = []  # what stays of the add-on's aivishub_models
        self._addon_models_removed: set[str] = set()

    async def async_step_init(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        source = self.config_entry.data.get(CONF_SOURCE)
        if source == SOURCE_WYOMING:
            if self.config_entry.data.get(CONF_ADDON) == ADDON_SLUG:
                return await self.async_step_addon_menu()
            return await self.async_step_server()
        if source == SOURCE_AIVISHUB and user_input is None:
            return await self.async_step_aivishub_menu()
        return await self._async_settings(user_input)

    async def async_step_addon_menu(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The add-on entry's: its voice settings, or an AivisHub model to add or to remove
        (those its server speaks)."""
        remove = ["addon_aivishub_remove"] if self._served_models() else []
        return self.async_show_menu(
            step_id="addon_menu", menu_options=["server", ADDON_AIVISHUB, *remove]
        )

    async def async_step_addon_aivishub_remove(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """AivisHub models the add-on no longer fetches nor speaks; where they are all its
        voices (voices: aivishub), one at least stays."""
        if (stop := await self._async_look_up_addon()) is not None:
            return stop
        options = self._addon_now or {}
        listed = addon_models(options)
        errors: dict[str, str] = {}
        if user_input is not None:
            chosen = set(user_input[CONF_MODELS])
            if not chosen:
                errors["base"] = "aivishub_none_chosen"
            elif chosen >= set(listed) and options.get(VOICES) == "aivishub":
                errors["base"] = "addon_aivishub_keep_one"
            else:
                self._addon_models_kept = [
                    item for uuid, item in listed.items() if uuid not in chosen
                ]
                self._addon_models_removed = chosen
                return await self.async_step_addon_restart()
        names = {uuid: model.name for uuid, model in self._served_models().items()}
        schema = _models_schema({uuid: names.get(uuid, uuid) for uuid in listed})
        return self.async_show_form(
            step_id="addon_aivishub_remove", data_schema=schema, errors=errors
        )

    def _addon_entry(self) -> ConfigEntry:
        return self.config_entry

    def _served_models(self) -> dict[str, InstalledModel]:
        """The AivisHub models the loaded entry's server speaks (none while it is not loaded)."""
        entry = self.config_entry
        if entry.state is not ConfigEntryState.LOADED:
            return {}
        models: dict[str, InstalledModel] = entry.runtime_data.backend.aivishub_models
        return models

    async def async_step_addon_restart(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The add-on restarts without the removed models (and deletes their files)."""
        removed = self._addon_models_removed
        change = partial(
            self._async_reconfigure,
            {AIVISHUB_MODELS: self._addon_models_kept},
            lambda server: not removed & server.aivishub_models.keys(),
        )
        return await self._async_progress(
            "addon_restart", partial(self._async_addon_job, change, "addon_restarted")
        )

    async def async_step_addon_restarted(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        self._refresh_addon_entry(self.config_entry)
        return self.async_abort(reason="addon_aivishub_models_removed")

    async def async_step_aivishub_menu(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The AivisHub entry's: its voice settings, or a model to add or to remove."""
        return self.async_show_menu(
            step_id="aivishub_menu", menu_options=["settings", "aivishub", "aivishub_remove"]
        )

    async def async_step_settings(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """The AivisHub entry's menu: the form of every local entry, which ``init`` saves."""
        return await self._async_settings(None)

    async def async_step_aivishub_remove(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Models to remove, their files deleted; one at least stays (deleting the entry
        removes them all)."""
        entry = self.config_entry
        models: list[str] = entry.data[CONF_MODELS]
        errors: dict[str, str] = {}
        if user_input is not None:
            chosen = set(user_input[CONF_MODELS])
            if not chosen:
                errors["base"] = "aivishub_none_chosen"
            elif chosen >= set(models):
                errors["base"] = "aivishub_keep_one"
            else:
                kept = [uuid for uuid in models if uuid not in chosen]
                self.hass.config_entries.async_update_entry(
                    entry, data={**entry.data, CONF_MODELS: kept}
                )
                await self.hass.async_add_executor_job(remove_models, chosen)
                self.hass.config_entries.async_schedule_reload(entry.entry_id)
                return self.async_abort(reason="aivishub_models_removed")
        names = await self.hass.async_add_executor_job(model_names, models)
        schema = _models_schema({uuid: names[uuid] for uuid in models})
        return self.async_show_form(step_id="aivishub_remove", data_schema=schema, errors=errors)

    async def _async_settings(self, user_input: dict[str, Any] | None) -> ConfigFlowResult:
        """The voice settings of an entry that runs here (step ``init``)."""
        errors: dict[str, str] = {}
        placeholders = {"about": ""}
        if user_input is not None:
            try:
                parse_user_words(user_input.get(CONF_USER_DICTIONARY, ""))
            except UserWordsError as problem:
                errors[CONF_USER_DICTIONARY] = problem.key
                placeholders.update(problem.placeholders)
            else:
                user_input[CONF_THREADS] = int(user_input[CONF_THREADS])
                return self.async_create_entry(data=user_input)
        try:
            voices, about = await self.hass.async_add_executor_job(
                _bundle_voices, self.config_entry.data[CONF_PATH]
            )
        except BundleError as err:
            _LOGGER.warning("%s", err)
            return self.async_abort(
                reason="bundle_broken", description_placeholders={"file": err.path}
            )
        placeholders["about"] = about
        schema = self._schema(voices)
        if user_input is not None:  # back with an error: keep what the user typed
            schema = self.add_suggested_values_to_schema(schema, user_input)
        return self.async_show_form(
            step_id="init", data_schema=schema, errors=errors, description_placeholders=placeholders
        )

    async def async_step_server(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """A server entry: the default voice and synthesis options its requests carry (the
        engine, threads and words are the server's)."""
        if user_input is not None:
            return self.async_create_entry(data=user_input)
        address = f"{self.config_entry.data[CONF_HOST]}:{self.config_entry.data[CONF_PORT]}"
        try:
            voices = await self._async_server_voices()
        except YomiageError as err:
            _LOGGER.warning("%s", err)
            return self.async_abort(
                reason=err.translation_key, description_placeholders={"address": address}
            )
        current = synthesis_defaults(self.config_entry.options, voice_choices(voices)[0][0])
        schema = vol.Schema(_synthesis_fields(voices, current))
        return self.async_show_form(
            step_id="server", data_schema=schema, description_placeholders={"address": address}
        )

    async def _async_server_voices(self) -> dict[str, list[str]]:
        """The loaded entry's voices, or the server's answer when the entry is not loaded."""
        entry = self.config_entry
        if entry.state is ConfigEntryState.LOADED:
            voices: dict[str, list[str]] = entry.runtime_data.backend.voices
            return voices
        server = await WyomingBackend.async_connect(entry.data[CONF_HOST], entry.data[CONF_PORT])
        return server.voices

    def _schema(self, voices: dict[str, list[str]]) -> vol.Schema:
        first_voice = voice_choices(voices)[0][0]
        current = synthesis_defaults(self.config_entry.options, first_voice)
        device, threads = runtime_settings(self.config_entry.options)
        fields = _synthesis_fields(voices, current)
        # A suggested value, not a default: a default would come back when the user empties it.
        words = self.config_entry.options.get(CONF_USER_DICTIONARY, "")
        fields[vol.Optional(CONF_USER_DICTIONARY, description={"suggested_value": words})] = (
            TextSelector(TextSelectorConfig(multiline=True))
        )
        fields[vol.Required(CONF_THREADS, default=threads)] = NumberSelector(
            NumberSelectorConfig(min=0, max=MAX_THREADS, step=1, mode=NumberSelectorMode.BOX)
        )
        fields[vol.Required(CONF_DEVICE, default=device)] = SelectSelector(
            SelectSelectorConfig(options=list(DEVICES), translation_key=CONF_DEVICE)
        )
        return vol.Schema(fields)


def _bundle_voices(path: str) -> tuple[dict[str, list[str]], str]:
    """Speaker -> styles from the bundle's configs (cheap: no graph is loaded), and what the
    voice files say of themselves (AIVMX: model, description, licence), a line each."""
    bundle = Bundle.open(path, downloaded_language_model())
    voices = {name: list(files.config.styles) for name, files in bundle.speakers.items()}
    about = [
        f"- {name}: {aivm.model_name} {aivm.version}"
        + (f" — {aivm.description}" if aivm.description else "")
        + f" ({aivm.license or '?'})"
        for name, files in bundle.speakers.items()
        if (aivm := files.aivm) is not None
    ]
    return voices, "\n".join(about)


def _models_schema(names: dict[str, str]) -> vol.Schema:
    """A choice of AivisHub models to remove: uuid -> the name shown."""
    options = [SelectOptionDict(value=uuid, label=name) for uuid, name in names.items()]
    selector = SelectSelectorConfig(options=options, multiple=True, mode=SelectSelectorMode.LIST)
    return vol.Schema({vol.Required(CONF_MODELS, default=[]): SelectSelector(selector)})


def _synthesis_fields(
    voices: dict[str, list[str]], current: dict[str, Any]
) -> dict[vol.Marker, Any]:
    """Default voice, numbers and switches (loudness, smooth start), at their ``current``
    values."""
    fields: dict[vol.Marker, Any] = {
        vol.Required(CONF_VOICE, default=current[CONF_VOICE]): _voice_selector(voices)
    }
    for name in SYNTHESIS_NUMBERS:
        fields[vol.Required(name, default=current[name])] = _number_selector(name)
    for name in SYNTHESIS_SWITCHES:
        fields[vol.Required(name, default=current[name])] = BooleanSelector()
    return fields


def _voice_selector(voices: dict[str, list[str]]) -> SelectSelector:
    options = [SelectOptionDict(value=value, label=label) for value, label in voice_choices(voices)]
    return SelectSelector(SelectSelectorConfig(options=options, mode=SelectSelectorMode.DROPDOWN))


def _number_selector(name: str) -> NumberSelector:
    low, high = OPTION_LIMITS[name]
    return NumberSelector(
        NumberSelectorConfig(
            min=low,
            max=high,
            step=_STEPS.get(name, _DEFAULT_STEP),
            mode=NumberSelectorMode.BOX if name in _NUMBER_FIELDS else NumberSelectorMode.SLIDER,
        )
    )
