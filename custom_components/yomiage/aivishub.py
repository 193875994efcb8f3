"""Voices from AivisHub as the integration keeps them (the engine does the transfer).

One entry holds every AivisHub model of this Home Assistant: its ``<uuid>.aivmx`` files in one
folder, ``<models>/aivishub``, which takes the language model (BERT) of the official voices' folder
beside it: downloaded once, with the first model, where no downloaded bundle has one, and shared
with the official voices' entry. The entry lists its models' uuids; start-up makes no request when
each has its file and a language model is there. Blocking functions: run them in an executor.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from . import const
from .const import CONF_MODELS, CONF_SOURCE, SOURCE_AIVISHUB
from .engine import BundleError
from .engine.aivm import SUFFIX, read_aivmx
from .engine.hub.aivishub import AivisModel, fetch_model, forget_model, model_detail, model_uuid
from .engine.hub.download import (
    DEFAULT_REPO,
    Progress,
    ProgressCallback,
    fetch_bundle,
    list_offer,
)
from .engine.onnx import graph_cache
from .hub import download_folder
from .local_setup import downloaded_language_model, prepared_graphs

UNIQUE_ID: Final = "aivishub"  # the one AivisHub entry
TITLE: Final = "AivisHub"


def aivishub_folder() -> Path:
    return const.MODELS_DIR.resolve() / const.AIVISHUB_DIRNAME


def is_aivishub(data: Mapping[str, Any]) -> bool:
    return data.get(CONF_SOURCE) == SOURCE_AIVISHUB


def model_file(uuid: str) -> Path:
    return aivishub_folder() / f"{uuid}{SUFFIX}"


def look_up(text: str) -> AivisModel:
    """The model a page's URL or a UUID names, as AivisHub describes it (one request)."""
    return model_detail(model_uuid(text))


def fetch_voice(model: AivisModel, progress: ProgressCallback | None = None) -> None:
    """``model``'s file into the folder, then the official voices' language model where none is
    downloaded yet; ``progress`` over both."""
    offer = None if downloaded_language_model() is not None else list_offer(DEFAULT_REPO)
    total = model.file.size + (offer.download_size([]) if offer is not None else 0)
    report = progress or _ignore

    def moved(offset: int) -> ProgressCallback:
        return lambda step: report(Progress(offset + step.done_bytes, total, step.path))

    fetch_model(aivishub_folder(), model, progress=moved(0))
    if offer is not None:
        _fetch_language_model(offer.commit, moved(model.file.size))


def ensure_models(data: Mapping[str, Any]) -> str:
    """The entry's folder, a model whose file has gone fetched again (its newest version), the
    language model too; nothing is asked of the network when all are there."""
    for uuid in data[CONF_MODELS]:
        if not model_file(uuid).is_file():
            fetch_voice(look_up(uuid))
    if downloaded_language_model() is None:
        _fetch_language_model(None, _ignore)
    return str(aivishub_folder())


def model_names(uuids: Iterable[str]) -> dict[str, str]:
    """uuid -> the model's name as its file's manifest says (the uuid where it cannot be read)."""
    names = {}
    for uuid in uuids:
        try:
            voices = read_aivmx(model_file(uuid)).voices
        except BundleError:
            voices = []
        names[uuid] = voices[0].model_name if voices else uuid
    return names


def remove_models(uuids: Iterable[str]) -> None:
    """Delete models' files, what cut transfers of them left, and the graphs prepared from
    them."""
    folder = aivishub_folder()
    graphs = prepared_graphs(str(folder))
    for uuid in uuids:
        graph_cache.drop_source(model_file(uuid), graphs)
        forget_model(folder, uuid)


def remove_folder() -> None:
    """The entry is deleted: its folder goes (the shared language model lies elsewhere)."""
    shutil.rmtree(aivishub_folder(), ignore_errors=True)


def _fetch_language_model(commit: str | None, progress: ProgressCallback) -> None:
    """BERT and its tokenizer of the official voices, without a speaker, where the official
    voices' entry keeps its bundle (it then downloads only its speakers)."""
    fetch_bundle(
        download_folder(DEFAULT_REPO),
        DEFAULT_REPO,
        speakers=[],
        revision=commit,
        progress=progress,
    )


def _ignore(progress: Progress) -> None:
    """Progress no one watches (start-up's downloads)."""
