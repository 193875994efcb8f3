"""Setting up an entry whose voices run here: native packages, bundle, engine, user dictionary.

Every failure becomes the exception Home Assistant expects from setup (translated), and a broken
bundle also raises a repair issue naming the file.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeassistant.config_entries import ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import ConfigEntryError, ConfigEntryNotReady
from homeassistant.helpers import issue_registry as ir

from . import const
from .const import (
    CONF_PATH,
    CONF_SOURCE,
    CONF_USER_DICTIONARY,
    DOMAIN,
    SOURCE_AIVISHUB,
    TRANSIENT_DOWNLOAD_REASONS,
)
from .engine import BundleError, DeviceUnavailableError, DownloadError
from .engine.bundle import find_language_model
from .engine.text.readings.user_dict import UserDictionary, UserDictionaryError
from .entry_options import runtime_settings
from .local_backend import LocalBackend
from .local_engine import INSTALL_FAILED, LocalEngineUnavailableError, async_ensure_local_engine
from .shared_dictionary import shared_dictionary
from .translated_errors import entry_placeholders, translated
from .user_words import UserWordsError, parse_user_words

_LOGGER = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .engine import Engine


def load_engine(path: str, device: str, threads: int | None) -> Engine:
    """Create the engine (blocking: imports onnxruntime, loads BERT; run it in an executor)."""
    from .engine import Engine

    return Engine(
        path,
        device=device,
        threads=threads,
        graph_cache=prepared_graphs(path),
        language_model=downloaded_language_model(),
    )


def downloaded_language_model() -> Path | None:
    """A downloaded bundle (models folder) whose BERT serves a folder of voices that has none
    (.aivmx files; engine/bundle.py also looks beside the folder). Blocking: reads the disk."""
    models = const.MODELS_DIR
    if not models.is_dir():
        return None
    return find_language_model(sorted(p for p in models.iterdir() if p.is_dir()))


def prepared_graphs(bundle: str) -> Path:
    """Where the engine keeps the graphs it prepared for this CPU from ``bundle``: in the
    models folder (HACS keeps it, a backup holds it), a folder per bundle, so that the config
    flow's check and the entry share them and removing the entry removes them."""
    key = hashlib.sha256(str(Path(bundle).resolve()).encode()).hexdigest()[:16]
    return const.MODELS_DIR.resolve() / const.PREPARED_GRAPHS_DIRNAME / key


def remove_prepared_graphs(bundle: str) -> None:
    """Delete a bundle's prepared graphs (blocking)."""
    shutil.rmtree(prepared_graphs(bundle), ignore_errors=True)


def bundle_issue_id(entry: ConfigEntry) -> str:
    return f"bundle_broken_{entry.entry_id}"


async def async_load_local_backend(hass: HomeAssistant, entry: ConfigEntry) -> LocalBackend:
    """The engine with every voice loaded and the entry's words applied, ready to serve."""
    await _async_ensure_packages(hass)
    words = _entry_words(entry.options)
    engine = await _async_load_engine(hass, entry)
    ir.async_delete_issue(hass, DOMAIN, bundle_issue_id(entry))
    dictionary = shared_dictionary(hass)
    try:
        await dictionary.async_set(hass, entry.entry_id, words)
    except UserDictionaryError as err:
        await hass.async_add_executor_job(engine.close)
        raise translated(ConfigEntryError, err) from err
    # The AivisHub entry's backend keeps its models up to date; a local folder is the user's.
    aivishub = Path(entry.data[CONF_PATH]) if entry.data[CONF_SOURCE] == SOURCE_AIVISHUB else None
    return LocalBackend(hass, engine, dictionary, aivishub)


async def async_unload_local_backend(
    hass: HomeAssistant, entry: ConfigEntry, backend: LocalBackend
) -> None:
    """Release the sessions; the entry's words leave the shared dictionary."""
    await backend.async_close()
    await shared_dictionary(hass).async_set(hass, entry.entry_id, None)


async def _async_ensure_packages(hass: HomeAssistant) -> None:
    try:
        await async_ensure_local_engine(hass)
    except LocalEngineUnavailableError as err:
        # A failed install may succeed later (the network was down); a platform without wheels
        # or a broken install needs the user.
        error = ConfigEntryNotReady if err.reason == INSTALL_FAILED else ConfigEntryError
        raise error(
            translation_domain=DOMAIN,
            translation_key=err.reason,
            translation_placeholders={"detail": err.detail},
        ) from err


def _entry_words(options: Mapping[str, Any]) -> UserDictionary:
    """The entry's words (checked when they were saved; checked again, rules may have moved)."""
    try:
        return parse_user_words(str(options.get(CONF_USER_DICTIONARY) or ""))
    except UserWordsError as err:
        raise ConfigEntryError(
            translation_domain=DOMAIN,
            translation_key="user_dictionary_invalid",
            translation_placeholders=err.placeholders,
        ) from err


def _load_entry_engine(data: Mapping[str, Any], device: str, threads: int | None) -> Engine:
    """The bundle (downloaded again when a Hub entry's is incomplete, or a file of the AivisHub
    entry's has gone), then the engine with every speaker's sessions created: the first request
    must not pay for them."""
    from .aivishub import ensure_models, is_aivishub
    from .hub import ensure_bundle

    folder = ensure_models(data) if is_aivishub(data) else ensure_bundle(data)
    engine = load_engine(folder, device, threads)
    try:
        engine.load_all()
    except BaseException:
        engine.close()
        raise
    return engine


async def _async_load_engine(hass: HomeAssistant, entry: ConfigEntry) -> Engine:
    """The engine for this entry, or the setup exception Home Assistant expects."""
    device, threads = runtime_settings(entry.options)
    try:
        return await hass.async_add_executor_job(
            _load_entry_engine, entry.data, device, threads or None
        )
    except BundleError as err:
        _create_bundle_issue(hass, entry, err)
        _LOGGER.error("%s cannot be used: %s", err.path, err.problem)
        raise ConfigEntryError(
            translation_domain=DOMAIN,
            translation_key="bundle_broken",
            translation_placeholders={"file": err.path},
        ) from err
    except DownloadError as err:
        # A Hub entry whose bundle was incomplete and could not be downloaded again.
        transient = getattr(err, "reason", "") in TRANSIENT_DOWNLOAD_REASONS
        error = ConfigEntryNotReady if transient else ConfigEntryError
        raise translated(error, err, **entry_placeholders(entry.data)) from err
    except DeviceUnavailableError as err:
        # Retrying cannot help: the user has to pick another device in the options.
        raise translated(ConfigEntryError, err) from err
    except (OSError, MemoryError) as err:
        # A disk that is not mounted yet, memory that other add-ons hold: worth another try.
        _LOGGER.warning("The voices of %s cannot be loaded yet: %r", entry.title, err)
        raise ConfigEntryNotReady(
            translation_domain=DOMAIN, translation_key="engine_not_ready"
        ) from err


def _create_bundle_issue(hass: HomeAssistant, entry: ConfigEntry, err: BundleError) -> None:
    ir.async_create_issue(
        hass,
        DOMAIN,
        bundle_issue_id(entry),
        is_fixable=False,
        severity=ir.IssueSeverity.ERROR,
        translation_key="bundle_broken",
        translation_placeholders={"title": entry.title, "file": err.path},
    )
