"""Home Assistant fixtures: the real tts component and the real engine on the tiny bundle.

Bundles are copied into a temporary config folder, because entries may only point inside it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import entity_registry as er
from homeassistant.setup import async_setup_component
from huggingface_hub import constants
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

# Imported before the `hass` fixture runs: the plugin mounts its own `custom_components` package,
# which would otherwise hide ours.
import custom_components.yomiage  # noqa: F401
from custom_components.yomiage import const
from custom_components.yomiage.const import CONF_PATH, CONF_SOURCE, DOMAIN, SOURCE_LOCAL
from custom_components.yomiage.engine.hub.aivishub import API_VARIABLE
from custom_components.yomiage.engine.hub.download import DEFAULT_REPO

from ..fakeaivishub import FakeAivisHub, FakeModel
from ..fakehub import FakeHub, FakeRepo
from ..supervisor_double import SupervisorDouble
from ..yomiage.addon import RunScriptAddon
from .common import (
    AIVISHUB_PAGE,
    DUO,
    LOOPBACK,
    PRIVATE,
    SPEAKERS,
    TINY_A,
    TINY_A_UUID,
    TOKEN,
    aivishub_confirmation,
    download_confirmed,
    engine_of,
)
from .home_assistant_os import as_home_assistant_os, speakers_of, supervisor_at
from .satellite import Satellite, add_satellite

SERVER_START_S = 60.0
_LISTENING = re.compile(r"serving \d+ voices on tcp://127\.0\.0\.1:(\d+)")


@pytest.fixture(autouse=True)
def _custom_integrations(enable_custom_integrations: None) -> None:
    """Let Home Assistant load custom_components/yomiage."""


@pytest.fixture(autouse=True)
def _no_graph_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load graphs as published: every test copies the bundle to a new folder, and the engine's
    prepared-graph cache (keyed by path) would prepare and store each graph again each time."""
    monkeypatch.setenv("YOMIAGE_GRAPH_CACHE", "0")


@pytest.fixture
def config_dir(hass: HomeAssistant, tmp_path: Path) -> Path:
    """A fresh config folder (the plugin's default one is shared and read-only in spirit)."""
    folder = tmp_path / "config"
    folder.mkdir()
    hass.config.config_dir = str(folder)
    return folder


@pytest.fixture
def bundle_dir(config_dir: Path, tiny_bundle: Path) -> Path:
    """A writable copy of the tiny bundle inside the config folder."""
    target = config_dir / "voices" / "tiny"
    shutil.copytree(tiny_bundle, target)
    return target


@pytest.fixture
def first_speaker(bundle_dir: Path) -> Path:
    return sorted(p for p in (bundle_dir / SPEAKERS).iterdir() if p.is_dir())[0]


@pytest.fixture
def mock_entry(hass: HomeAssistant, bundle_dir: Path) -> MockConfigEntry:
    entry = MockConfigEntry(
        domain=DOMAIN,
        title="tiny",
        unique_id=str(bundle_dir),
        data={CONF_SOURCE: SOURCE_LOCAL, CONF_PATH: str(bundle_dir)},
        options={},
    )
    entry.add_to_hass(hass)
    return entry


@pytest.fixture
async def loaded_entry(hass: HomeAssistant, mock_entry: MockConfigEntry) -> MockConfigEntry:
    """The entry set up for real (engine on the tiny bundle, tts entity added)."""
    assert await async_setup_component(hass, "http", {})
    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    await hass.async_block_till_done()
    return mock_entry


@pytest.fixture
def entity_id(hass: HomeAssistant, loaded_entry: MockConfigEntry) -> str:
    entries = er.async_entries_for_config_entry(er.async_get(hass), loaded_entry.entry_id)
    assert len(entries) == 1
    return entries[0].entity_id


@pytest.fixture
def voices(loaded_entry: MockConfigEntry) -> list[str]:
    """Every voice id of the tiny bundle."""
    engine = engine_of(loaded_entry)
    return [f"{speaker}/{style}" for speaker, styles in engine.voices.items() for style in styles]


@pytest.fixture
async def satellite(
    hass: HomeAssistant, hass_client: ClientSessionGenerator, entity_id: str
) -> Satellite:
    """An Assist satellite whose pipeline speaks with the Yomiage entity (satellite.py)."""
    return await add_satellite(hass, hass_client, entity_id)


@pytest.fixture
def hub(
    tiny_bundle: Path, monkeypatch: pytest.MonkeyPatch, socket_enabled: None
) -> Iterator[FakeHub]:
    repos = {
        DEFAULT_REPO: FakeRepo.from_folder(tiny_bundle),
        PRIVATE: FakeRepo.from_folder(tiny_bundle, token=TOKEN),
    }
    with FakeHub(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)  # the downloader reads it at call time
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.delenv("HF_TOKEN", raising=False)
        # Small reads, so that a cut connection leaves a partial file as with real 500 MB files.
        monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
        yield hub


@pytest.fixture
def aivis_hub(monkeypatch: pytest.MonkeyPatch, socket_enabled: None) -> Iterator[FakeAivisHub]:
    """A fake AivisHub offering the fixtures' tiny-a and two-speaker models, version 1.0.0."""
    with FakeAivisHub([FakeModel([TINY_A]), FakeModel([DUO])]) as fake:
        monkeypatch.setenv(API_VARIABLE, fake.api)
        yield fake


@pytest.fixture
def aivis_hubs(aivis_hub: FakeAivisHub, hub: FakeHub, models_dir: Path) -> FakeAivisHub:
    """AivisHub for the voices, the Hugging Face Hub for the official language model."""
    return aivis_hub


@pytest.fixture
async def aivishub_entry(hass: HomeAssistant, aivis_hubs: FakeAivisHub) -> ConfigEntry:
    """tiny-a from AivisHub through Add integration: the AivisHub entry, loaded."""
    confirmation = await aivishub_confirmation(hass, AIVISHUB_PAGE + TINY_A_UUID)
    result = await download_confirmed(hass, confirmation["flow_id"])
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    await hass.async_block_till_done(wait_background_tasks=True)  # AivisHub's versions too
    entry: ConfigEntry = result["result"]
    assert entry.state is ConfigEntryState.LOADED
    return entry


@pytest.fixture
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Downloads go to a temporary models folder, not into the source tree."""
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setattr(const, "MODELS_DIR", folder)
    return folder


# -- a Yomiage server, as the add-on runs it -------------------------------------------------------
@pytest.fixture(scope="module")
def server_port(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A Yomiage Wyoming server on a free loopback port (noise off: equal requests, equal audio)."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    command = [
        *(sys.executable, "-m", "yomiage.wyoming_server"),
        *("--uri", f"tcp://{LOOPBACK}:0", "--bundle", str(tiny_bundle)),
        *("--device", "cpu", "--threads", "1", "--noise", "0", "--noise-w", "0"),
    ]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield _wait_for_port(process, log)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _wait_for_port(process: subprocess.Popen[bytes], log: Path) -> int:
    """The port the server says it listens on (it logs that once it accepts clients)."""
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if match := _LISTENING.search(log.read_text()):
            return int(match.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the server did not start:\n{log.read_text()}")


# -- Home Assistant OS: the Supervisor double, our add-on a process of its run script -------------
@pytest.fixture
def addon(tmp_path: Path, hub: FakeHub) -> RunScriptAddon:
    """The Hub's address (and AivisHub's, where a test has one) come with os.environ."""
    return RunScriptAddon(tmp_path / "addon-data")


@pytest.fixture
def double(addon: RunScriptAddon) -> Iterator[SupervisorDouble]:
    with SupervisorDouble(addon) as double:
        yield double


@pytest.fixture
def home_assistant_os(hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    as_home_assistant_os(hass, monkeypatch, tmp_path / "config")


@pytest.fixture
async def supervised(
    hass: HomeAssistant, home_assistant_os: None, double: SupervisorDouble
) -> SupervisorDouble:
    """The add-on not installed yet."""
    supervisor_at(hass, double)
    return double


@pytest.fixture
async def installed(
    hass: HomeAssistant, home_assistant_os: None, addon: RunScriptAddon, tiny_bundle: Path
) -> AsyncIterator[SupervisorDouble]:
    """The add-on installed by hand (the official voices' first speaker), not started."""
    with SupervisorDouble(addon, installed=True) as double:
        supervisor_at(hass, double)
        double.options.update(voices="official", speakers=[speakers_of(tiny_bundle)[0]])
        yield double
