"""Can the engine run on this machine? Its native packages, installed only where they can be.

manifest.json lists only packages that install everywhere Home Assistant runs. The engine's
native ones (onnxruntime, pyopenjtalk-plus) publish wheels for glibc Linux on x86_64 and aarch64
(and macOS, Windows) but none for musl: Home Assistant OS and the official container are Alpine,
where a manifest requiring them would make the whole integration fail to install. So they are
installed here, through Home Assistant's own requirements machinery, when a local voice bundle is
set up, and nothing is attempted where no wheel can exist (pyopenjtalk-plus would otherwise try
to compile OpenJTalk from source for minutes and fail).
"""

from __future__ import annotations

import importlib
import sys
from typing import Final

from homeassistant.core import HomeAssistant
from homeassistant.requirements import RequirementsNotFound, async_process_requirements
from packaging import tags

from .const import DOMAIN

# Keep in step with requirements/runtime.txt (a test compares them).
NATIVE_REQUIREMENTS: Final = (
    "onnxruntime==1.32.0",  # first: where it has no wheel, the install fails at once
    "pyopenjtalk-plus==0.4.1.post10",
    "e2k==0.8.1",
)
NATIVE_MODULES: Final = ("onnxruntime", "pyopenjtalk", "e2k")
# Linux platforms both onnxruntime 1.32 and pyopenjtalk-plus publish wheels for.
LINUX_WHEEL_PLATFORMS: Final = frozenset({"manylinux_2_28_x86_64", "manylinux_2_28_aarch64"})

# LocalEngineUnavailableError.reason values; each is a config flow step and a strings.json key.
UNSUPPORTED_PLATFORM: Final = "engine_unsupported"
INSTALL_FAILED: Final = "engine_install_failed"
IMPORT_FAILED: Final = "engine_import_failed"


class LocalEngineUnavailableError(Exception):
    """The engine cannot run here. ``reason`` is one of the constants above; ``detail`` names
    the platform, the requirements or the modules (no prose: it goes into translated text)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def missing_modules() -> list[str]:
    """``module (why)`` for each native module that does not import (blocking: imports them)."""
    importlib.invalidate_caches()  # packages installed a moment ago must be found
    missing = []
    for name in NATIVE_MODULES:
        try:
            importlib.import_module(name)
        except (ImportError, OSError) as err:  # OSError: a shared library that does not load
            missing.append(f"{name} ({err})")
    return missing


def platform_problem() -> str | None:
    """This platform's tag when the native packages have no wheel for it, else None (blocking:
    reads the interpreter's binary to tell musl from glibc)."""
    if not sys.platform.startswith("linux"):
        return None  # macOS and Windows have wheels; pip decides
    platforms = list(tags.platform_tags())
    musl = [tag for tag in platforms if tag.startswith("musllinux_")]
    if musl:
        return musl[0]
    if LINUX_WHEEL_PLATFORMS.isdisjoint(platforms):
        plain = [tag for tag in platforms if tag.startswith("linux_")]
        return (plain or platforms or [sys.platform])[0]
    return None


async def async_engine_importable(hass: HomeAssistant) -> bool:
    """Whether the native modules import now (cheap once they are loaded)."""
    return not await _async_missing_modules(hass)


async def _async_missing_modules(hass: HomeAssistant) -> list[str]:
    """missing_modules in Home Assistant's import executor, one import at a time with the
    integrations it loads: numpy imported at once from two threads can deadlock (Python 3.14
    raised _DeadlockError at a Home Assistant 2026.11 start, camera's import against ours)."""
    return await hass.async_add_import_executor_job(missing_modules)


async def async_ensure_local_engine(hass: HomeAssistant) -> None:
    """Install the native packages when they are missing and can be; raises
    LocalEngineUnavailableError when the engine still cannot run."""
    if not (missing := await _async_missing_modules(hass)):
        return
    if problem := await hass.async_add_executor_job(platform_problem):
        raise LocalEngineUnavailableError(UNSUPPORTED_PLATFORM, problem)
    if hass.config.skip_pip:  # the user turned package installs off
        raise LocalEngineUnavailableError(IMPORT_FAILED, "; ".join(missing))
    try:
        await async_process_requirements(hass, DOMAIN, list(NATIVE_REQUIREMENTS))
    except RequirementsNotFound as err:
        raise LocalEngineUnavailableError(INSTALL_FAILED, ", ".join(err.requirements)) from err
    if missing := await _async_missing_modules(hass):
        raise LocalEngineUnavailableError(IMPORT_FAILED, "; ".join(missing))
