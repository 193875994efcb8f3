"""A machine where the engine cannot run, simulated in this process without uninstalling anything.

- ``block_native_modules``: ``import onnxruntime`` (pyopenjtalk, e2k) raises ModuleNotFoundError,
  as where they are not installed. Modules that imported them earlier keep their references.
- ``Installs``: Home Assistant's package installer (the real requirements manager, with only its
  pip call replaced) sees the native packages as not installed and records every install.
- ``musl``: the interpreter reports musl platform tags, as on Home Assistant OS.
- ``past_install``: the config flow's step after its install step, on every Home Assistant.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
from homeassistant import config_entries
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.util import package as pkg_util
from packaging import tags
from packaging.requirements import Requirement

from custom_components.yomiage.local_engine import NATIVE_MODULES, NATIVE_REQUIREMENTS

NATIVE_DISTRIBUTIONS = frozenset(Requirement(line).name for line in NATIVE_REQUIREMENTS)
MUSL_TAGS = ("musllinux_1_2_aarch64", "musllinux_1_1_aarch64", "linux_aarch64")


class _NativeBlocker(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if fullname.partition(".")[0] in NATIVE_MODULES:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def block_native_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NATIVE_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NativeBlocker(), *sys.meta_path])


@dataclass
class Installs:
    """What Home Assistant was asked to install; ``succeed`` decides each answer."""

    succeed: Callable[[str], bool] = lambda requirement: False
    attempted: list[str] = field(default_factory=list)

    def install(self, requirement: str, **kwargs: Any) -> bool:
        self.attempted.append(requirement)
        return self.succeed(requirement)


def fake_installs(hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch) -> Installs:
    """Native packages count as missing; installing them goes to an Installs record."""
    installs = Installs()
    real_is_installed = pkg_util.is_installed

    def is_installed(requirement: str) -> bool:
        if Requirement(requirement).name in NATIVE_DISTRIBUTIONS:
            return False
        return real_is_installed(requirement)

    monkeypatch.setattr(pkg_util, "is_installed", is_installed)
    monkeypatch.setattr(pkg_util, "install_package", installs.install)
    hass.config.skip_pip = False  # the test harness turns installs off; a real system has them
    return installs


def musl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tags, "platform_tags", lambda: iter(MUSL_TAGS))


async def past_install(
    hass: HomeAssistant, result: config_entries.ConfigFlowResult
) -> config_entries.ConfigFlowResult:
    """The step the install step leads to. Home Assistant shows the install's progress while it
    runs, then moves on by itself; one whose task is already done (2026.x) moves on at once."""
    if result["type"] is FlowResultType.SHOW_PROGRESS:
        assert (result["step_id"], result["progress_action"]) == ("install", "install")
        await hass.async_block_till_done()
        result = await hass.config_entries.flow.async_configure(result["flow_id"])
    return result
