"""No Yomiage code Home Assistant runs in its event loop does blocking file I/O there.

Home Assistant's own detection (homeassistant/block_async_io.py) leaves file calls out in tests;
this puts the same kind of guard on them, for calls made from Yomiage's code in the loop thread:
diagnostics, speaking, the options form.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import pathlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from homeassistant.components import tts
from homeassistant.core import HomeAssistant
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.yomiage.diagnostics import async_get_config_entry_diagnostics

OURS = os.sep + os.path.join("custom_components", "yomiage") + os.sep


def _called_from_our_code_in_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False  # an executor thread: blocking is fine there
    frame = sys._getframe(2)
    while frame is not None:
        if OURS in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _guarded(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        if _called_from_our_code_in_the_loop():
            raise RuntimeError(f"blocking call to {name} in the event loop from Yomiage")
        return original(*args, **kwargs)

    return guard


@pytest.fixture
def blocking_calls_fail(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for owner, name in (
        (builtins, "open"),
        (os, "listdir"),
        (os, "scandir"),
        (pathlib.Path, "read_text"),
        (pathlib.Path, "read_bytes"),
        (pathlib.Path, "iterdir"),
        (pathlib.Path, "open"),
    ):
        monkeypatch.setattr(owner, name, _guarded(getattr(owner, name), name))
    yield


def test_the_guard_catches_a_blocking_call_from_our_code() -> None:
    """Not vacuous: the guard sees a read made in the loop from our package."""
    from custom_components.yomiage.engine.onnx import cores

    async def read_quota() -> int:
        return cores.usable_cores()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pathlib.Path, "read_text", _guarded(pathlib.Path.read_text, "read_text"))
        patch.setattr(pathlib.Path, "open", _guarded(pathlib.Path.open, "open"))
        with pytest.raises(RuntimeError, match="blocking call"):
            asyncio.run(read_quota())


async def test_diagnostics_speaking_and_options_do_no_blocking_io_in_the_loop(
    hass: HomeAssistant,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    blocking_calls_fail: None,
) -> None:
    diagnostics = await async_get_config_entry_diagnostics(hass, loaded_entry)
    assert diagnostics["engine"]["threads"] >= 1
    media_id = tts.generate_media_source_id(
        hass, "はい。", engine=entity_id, language="ja", options={tts.ATTR_PREFERRED_FORMAT: "wav"}
    )
    extension, data = await tts.async_get_media_source_audio(hass, media_id)
    assert extension == "wav" and len(data) > 1000
    form = await hass.config_entries.options.async_init(loaded_entry.entry_id)
    assert form["step_id"] == "init"
