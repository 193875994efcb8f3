"""Values and helpers shared by the Home Assistant tests."""

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

from homeassistant.config_entries import ConfigEntry

from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.local_backend import LocalBackend

SPEAKERS = Path("onnx/speakers")  # speaker folders inside a bundle


def engine_of(entry: ConfigEntry) -> Engine:
    """The engine a loaded local entry speaks with."""
    backend = entry.runtime_data.backend
    assert isinstance(backend, LocalBackend)
    return backend.engine


class HandFedMessage:
    """A message generator the test feeds by hand, like an LLM writing its reply."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.finished = False

    async def generate(self) -> AsyncGenerator[str]:
        while (piece := await self.queue.get()) is not None:
            yield piece
        self.finished = True
