"""The engine's native packages: not in manifest.json, installed by the flow where they can be.

Home Assistant OS (musl) has no wheels for onnxruntime and pyopenjtalk-plus; these tests simulate
it (and failed installs) with the real requirements manager and config flow.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from packaging import tags
from packaging.requirements import Requirement
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.yomiage import local_engine
from custom_components.yomiage.addon_flow import ADDON_AIVISHUB
from custom_components.yomiage.const import DOMAIN, SOURCE_ADDON, SOURCE_LOCAL, SOURCE_WYOMING
from custom_components.yomiage.local_engine import (
    NATIVE_MODULES,
    NATIVE_REQUIREMENTS,
    async_ensure_local_engine,
    platform_problem,
)

from .no_engine import (
    NATIVE_DISTRIBUTIONS,
    block_native_modules,
    fake_installs,
    musl,
    past_install,
)

ROOT = Path(__file__).resolve().parents[3]
INTEGRATION = ROOT / "custom_components" / DOMAIN


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if text := line.split("#")[0].strip():
            requirement = Requirement(text)
            pins[requirement.name] = str(requirement.specifier)
    return pins


def test_native_requirements_match_the_runtime_pins() -> None:
    runtime = _pins(ROOT / "requirements" / "runtime.txt")
    for line in NATIVE_REQUIREMENTS:
        requirement = Requirement(line)
        assert runtime[requirement.name] == str(requirement.specifier), line


def test_manifest_requires_only_pure_python_packages() -> None:
    manifest = json.loads((INTEGRATION / "manifest.json").read_text(encoding="utf-8"))
    names = {Requirement(line).name for line in manifest["requirements"]}
    assert names.isdisjoint(NATIVE_DISTRIBUTIONS)
    for name in names:  # a pure wheel installs on musl as well as on glibc
        wheel = metadata.distribution(name).read_text("WHEEL") or ""
        assert "Root-Is-Purelib: true" in wheel, name


def test_the_integration_imports_without_the_native_modules() -> None:
    """Every module Home Assistant imports to load the integration, with onnxruntime,
    pyopenjtalk, e2k and numpy made unimportable (a fresh interpreter: nothing imported them
    yet). numpy arrives with onnxruntime; Home Assistant core does not depend on it, so a
    server entry on an install without it must load all the same."""
    engine_only = [*NATIVE_MODULES, "numpy"]
    modules = [
        f"custom_components.{DOMAIN}{suffix}"
        for suffix in ("", ".config_flow", ".tts", ".diagnostics", ".remote")
    ]
    script = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in {engine_only!r}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
for module in {modules!r}:
    __import__(module)
leaked = sorted(n for n in {engine_only!r} if n in sys.modules)
print("leaked:", leaked)
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "leaked: []"


@pytest.mark.parametrize(
    ("platforms", "problem"),
    [
        (["manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "linux_x86_64"], None),
        (["manylinux_2_28_aarch64", "linux_aarch64"], None),
        (["musllinux_1_2_x86_64", "linux_x86_64"], "musllinux_1_2_x86_64"),
        (["manylinux_2_17_x86_64", "linux_x86_64"], "linux_x86_64"),  # glibc older than 2.28
        (["manylinux_2_36_armv7l", "linux_armv7l"], "linux_armv7l"),  # 32-bit Raspberry Pi OS
    ],
)
def test_platforms_without_wheels_are_recognised(
    monkeypatch: pytest.MonkeyPatch, platforms: list[str], problem: str | None
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(tags, "platform_tags", lambda: iter(platforms))
    assert platform_problem() == problem


async def test_nothing_is_installed_when_the_modules_import(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    installs = fake_installs(hass, monkeypatch)
    await async_ensure_local_engine(hass)
    assert installs.attempted == []


async def test_the_native_modules_are_imported_one_import_at_a_time_with_home_assistants(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy imported from two threads at once can deadlock (a 2026.11 start did): the native
    modules are imported in Home Assistant's import executor, as its integrations are."""
    threads: list[str] = []
    real_import = importlib.import_module

    def recording_import(name: str, package: str | None = None) -> ModuleType:
        if name in NATIVE_MODULES:
            threads.append(threading.current_thread().name)
        return real_import(name, package)

    monkeypatch.setattr(local_engine.importlib, "import_module", recording_import)
    await async_ensure_local_engine(hass)
    await _pick_local(hass)
    assert len(threads) == 2 * len(NATIVE_MODULES)
    assert all(name.startswith("ImportExecutor") for name in threads), threads


async def _pick_local(hass: HomeAssistant) -> config_entries.ConfigFlowResult:
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert SOURCE_WYOMING in result["menu_options"], "the server is always a choice"
    return await hass.config_entries.flow.async_configure(
        result["flow_id"], {"next_step_id": SOURCE_LOCAL}
    )


async def test_on_musl_nothing_is_tried_and_the_server_is_offered(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Home Assistant Container (musl, no Supervisor): the first screen says why and offers a
    server only; the engine's sources, which could not run, are not offered."""
    block_native_modules(monkeypatch)
    installs = fake_installs(hass, monkeypatch)
    musl(monkeypatch)
    monkeypatch.setattr(sys, "platform", "linux")

    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.MENU, "engine_unsupported")
    assert result["menu_options"] == [SOURCE_WYOMING], "no Supervisor: no add-on to install"
    assert result["description_placeholders"] == {"detail": "musllinux_1_2_aarch64"}
    assert installs.attempted == [], "no wheel exists: pip would only fail (or build for ages)"


async def test_a_failed_install_says_so_and_offers_the_server(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    block_native_modules(monkeypatch)
    installs = fake_installs(hass, monkeypatch)

    result = await past_install(hass, await _pick_local(hass))
    assert (result["type"], result["step_id"]) == (FlowResultType.MENU, "engine_install_failed")
    assert result["menu_options"] == [SOURCE_WYOMING]
    assert set(installs.attempted) == set(NATIVE_REQUIREMENTS)
    failed = result["description_placeholders"]["detail"].split(", ")
    assert set(failed) == set(NATIVE_REQUIREMENTS)


async def test_a_successful_install_continues_where_the_user_was_going(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    installs = fake_installs(hass, monkeypatch)
    with pytest.MonkeyPatch.context() as missing:
        block_native_modules(missing)

        def install(requirement: str) -> bool:
            missing.undo()  # pip put the packages in: from now on the modules import
            return True

        installs.succeed = install
        result = await past_install(hass, await _pick_local(hass))
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, SOURCE_LOCAL)
    assert set(installs.attempted) == set(NATIVE_REQUIREMENTS)


async def test_installed_but_unimportable_packages_are_reported(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    block_native_modules(monkeypatch)
    fake_installs(hass, monkeypatch).succeed = lambda requirement: True

    result = await past_install(hass, await _pick_local(hass))
    assert (result["type"], result["step_id"]) == (FlowResultType.MENU, "engine_import_failed")
    assert "onnxruntime" in result["description_placeholders"]["detail"]


@pytest.mark.parametrize(
    ("on_musl", "state", "key"),
    [
        (False, ConfigEntryState.SETUP_RETRY, "engine_install_failed"),
        (True, ConfigEntryState.SETUP_ERROR, "engine_unsupported"),
    ],
)
async def test_setup_of_a_local_entry_ensures_the_packages(
    hass: HomeAssistant,
    mock_entry: MockConfigEntry,
    monkeypatch: pytest.MonkeyPatch,
    on_musl: bool,
    state: ConfigEntryState,
    key: str,
) -> None:
    block_native_modules(monkeypatch)
    installs = fake_installs(hass, monkeypatch)
    if on_musl:
        musl(monkeypatch)
        monkeypatch.setattr(sys, "platform", "linux")

    assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert mock_entry.state is state
    assert bool(installs.attempted) is not on_musl
    strings = json.loads((INTEGRATION / "strings.json").read_text(encoding="utf-8"))
    expected = strings["exceptions"][key]["message"].split("{detail}")[0]
    assert mock_entry.reason is not None and mock_entry.reason.startswith(expected)


def test_every_reason_has_a_translated_step_and_exception() -> None:
    for name in ("strings.json", "translations/en.json", "translations/ja.json"):
        strings = json.loads((INTEGRATION / name).read_text(encoding="utf-8"))
        for key in ("engine_unsupported", "engine_install_failed", "engine_import_failed"):
            step = strings["config"]["step"][key]
            assert "{detail}" in step["description"], (name, key)
            offered = {SOURCE_ADDON, ADDON_AIVISHUB, SOURCE_WYOMING}
            assert step["menu_options"].keys() == offered, (name, key)
            assert "{detail}" in strings["exceptions"][key]["message"], (name, key)
        assert strings["config"]["progress"]["install"], name
