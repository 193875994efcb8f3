"""Voices from the Hugging Face Hub, as the integration uses them (the engine does the transfer).

A Hub entry remembers repo, commit and speakers; its bundle lives in the models folder, one
folder per repo. Start-up looks there first and makes no request when the bundle is complete.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import const
from .const import CONF_PATH, CONF_REPO_ID, CONF_REVISION, CONF_SOURCE, CONF_SPEAKERS, CONF_TOKEN
from .engine.hub.download import fetch_bundle, local_bundle


def download_folder(repo_id: str) -> Path:
    """Where a repo's voices go: ``<models>/<owner>--<name>``."""
    return const.MODELS_DIR.resolve() / repo_id.replace("/", "--")


def is_download(data: Mapping[str, Any]) -> bool:
    return data.get(CONF_SOURCE) in (const.SOURCE_OFFICIAL, const.SOURCE_HUGGINGFACE)


def ensure_bundle(data: Mapping[str, Any]) -> str:
    """The bundle folder of an entry, downloaded again if it is incomplete (blocking).

    Local entries are taken as they are: the engine reports what is wrong with them.
    """
    path: str = data[CONF_PATH]
    if not is_download(data):
        return path
    speakers = list(data[CONF_SPEAKERS])
    if local_bundle(path, speakers) is not None:
        return path
    root = fetch_bundle(
        path,
        data[CONF_REPO_ID],
        speakers=speakers,
        revision=data.get(CONF_REVISION),
        token=data.get(CONF_TOKEN),
    )
    return str(root)


def remove_download(data: Mapping[str, Any]) -> None:
    """Delete a Hub entry's folder (blocking); never anything outside the models folder."""
    folder = Path(data[CONF_PATH]).resolve()
    models = const.MODELS_DIR.resolve()
    if is_download(data) and folder.is_relative_to(models) and folder != models:
        shutil.rmtree(folder, ignore_errors=True)
