"""The AivisHub models a Yomiage server offers updates for (``yomiage serve --aivishub``): what
its voices say of them, and a model's newest version fetched and loaded beside the engine that
keeps speaking until the new one is ready (engine/wyoming_contract.py has the events)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from yomiage_engine import InvalidOptionError
from yomiage_engine.hub.aivishub import (
    PAGE_ROOT,
    fetch_model,
    installed_models,
    model_detail,
    model_uuid,
)

from .wyoming_protocol import RequestError, VoiceOrigin

if TYPE_CHECKING:
    from yomiage_engine import Engine


@dataclass(frozen=True)
class AivisHubVoices:
    folder: Path  # the folder of voices the server speaks (--bundle)
    models: frozenset[str]  # their uuids
    engine_for: Callable[[], Engine]  # a new engine of the server's flags, on the folder

    @classmethod
    def of(
        cls, folder: Path, models: Iterable[str], engine_for: Callable[[], Engine]
    ) -> AivisHubVoices:
        """The models named (page URLs or uuids), each of which must be in ``folder``."""
        uuids = frozenset(model_uuid(model) for model in models)
        missing = sorted(uuids - installed_models(folder).keys())
        if missing:
            raise InvalidOptionError(
                f"AivisHub model {missing[0]} is not in {folder}: "
                f"fetch it first (yomiage fetch {missing[0]} --to {folder})",
                "aivishub",
            )
        return cls(folder, uuids, engine_for)

    def origins(self, engine: Engine) -> dict[str, VoiceOrigin]:
        """Speaker -> its model, for the speakers of these models."""
        return {
            name: VoiceOrigin(files.aivm.model_name, PAGE_ROOT + uuid, files.aivm.version)
            for name, files in engine.bundle.speakers.items()
            if files.aivm is not None and (uuid := files.aivm.model_uuid) in self.models
        }

    def update(self, model: str, progress: Callable[[float], None]) -> tuple[Engine | None, str]:
        """``model``'s newest version fetched into the folder and a new engine loaded on it
        (blocking; minutes on a Raspberry Pi); no engine where the newest is the one there.
        ``progress`` is told the fraction of the download done."""
        if model not in self.models:
            raise RequestError(
                f"this server offers no updates of AivisHub model {model!r}", "unknown_model"
            )
        detail = model_detail(model)
        if installed_models(self.folder).get(model) == detail.file.version:
            return None, detail.file.version
        fetch_model(self.folder, detail, progress=lambda done: progress(done.fraction))
        engine = self.engine_for()
        try:
            engine.load_all()
        except BaseException:
            engine.close()
            raise
        return engine, detail.file.version
