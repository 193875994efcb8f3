"""The tts entity ids the papers show are the ones the integration makes.

README.md's table under "In Home Assistant" (``| entry | entity name | entity id |``) says, for
each kind of entry, the entity's name and id. Each row is checked here by adding that entry
through the real config flow, every way the docs offer it (a server typed in and one found on the
network; the add-on installed by the flow and one installed by hand, which announces itself), and
reading the entity registry and the entity's state. Every ``tts.<id>`` that README.md,
scripts/demo, docs/*.md and the add-on's docs show (Home Assistant's tts actions, ``tts.speak``,
aside) must be one of the table's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from homeassistant import config_entries
from homeassistant.components import tts
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.service_info.hassio import HassioServiceInfo
from homeassistant.setup import async_setup_component
from wyoming.client import AsyncTcpClient

from custom_components.yomiage import remote
from custom_components.yomiage.const import (
    CONF_HOST,
    CONF_PATH,
    CONF_PORT,
    CONF_REPO_ID,
    DOMAIN,
    SOURCE_HUGGINGFACE,
    SOURCE_LOCAL,
    SOURCE_OFFICIAL,
    SOURCE_WYOMING,
)
from custom_components.yomiage.engine.hub.download import DEFAULT_REPO
from custom_components.yomiage.supervisor import ADDON_SLUG
from yomiage.discovery import service_info

from ..fakehub import FakeHub, FakeRepo
from ..supervisor_double import SupervisorDouble
from ..yomiage.addon import load_run_script
from .common import LOOPBACK, download_speakers, flow_menu, zeroconf_discovery
from .home_assistant_os import as_home_assistant_os, install_and_start, supervisor_at, to_speakers

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
# Every paper that may show an entity id.
PAPERS = [
    README,
    ROOT / "scripts" / "demo",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "addon").glob("*.md")),
]
TABLE_HEADER = "| entry | entity name | entity id |"
# The table's rows, by their entry cell: what the tests below add.
OFFICIAL_ONE = "Official voices, speaker jvnv-F1-jp"
OFFICIAL_TWO = "Official voices, speakers jvnv-F1-jp and jvnv-M1-jp"
REPOSITORY = "Another Hugging Face repository, owner/name"
FOLDER = "A local folder, voices/tiny"
SERVER = "A Yomiage server at 192.168.1.5, typed or found on the network"
ADDON = "The add-on, installed by the flow or by hand"
AIVISHUB = "Models from AivisHub, one entry for them all"
ROWS = {OFFICIAL_ONE, OFFICIAL_TWO, REPOSITORY, FOLDER, SERVER, ADDON, AIVISHUB}
# The docs' speakers, as the fake Hub's official voices name the tiny bundle's two.
SPEAKER_NAMES = {"tiny-a": "jvnv-F1-jp", "tiny-b": "jvnv-M1-jp"}
LAN_ADDRESS = "192.168.1.5"  # the README's server, routed to the tests' server on loopback
_ENTITY_ID = re.compile(r"(?<![\w.])tts\.(?!py\b)[a-z0-9_]+")  # tts.py: our module


def readme_table() -> dict[str, tuple[str, str]]:
    """The README's rows: entry -> (entity name, entity id)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(TABLE_HEADER) + 2  # past the header and its |---| line
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        entry, name, entity_id = (cell.strip() for cell in line.strip("|").split(" | "))
        rows[entry] = (name, entity_id.strip("`"))
    return rows


def tts_actions() -> set[str]:
    """Home Assistant's own tts actions (``tts.speak``...), which look like entity ids."""
    services = yaml.safe_load((Path(tts.__file__).parent / "services.yaml").read_text())
    return {f"tts.{name}" for name in services}


def assert_named_as_the_readme_says(hass: HomeAssistant, entry: ConfigEntry, row: str) -> None:
    assert entry.state is ConfigEntryState.LOADED
    entities = er.async_entries_for_config_entry(er.async_get(hass), entry.entry_id)
    (entity,) = [entity for entity in entities if entity.domain == tts.DOMAIN]
    state = hass.states.get(entity.entity_id)
    assert state is not None
    assert (state.name, entity.entity_id) == readme_table()[row]


# -- the papers ------------------------------------------------------------------------------------
def test_the_table_has_a_row_for_each_kind_of_entry_checked_here() -> None:
    assert set(readme_table()) == ROWS


def test_every_entity_id_the_papers_show_is_one_of_the_tables() -> None:
    ids = {entity_id for _, entity_id in readme_table().values()}
    shown = {
        f"{paper.relative_to(ROOT)}: {entity_id}"
        for paper in PAPERS
        for entity_id in _ENTITY_ID.findall(paper.read_text(encoding="utf-8"))
        if entity_id not in ids | tts_actions()
    }
    assert not shown, sorted(shown)


# -- the entries, added as the docs say ----------------------------------------------------------
@pytest.fixture(autouse=True)
async def _http(hass: HomeAssistant) -> None:
    assert await async_setup_component(hass, "http", {})


@pytest.fixture
def voices_hub(hub: FakeHub, tiny_bundle: Path) -> FakeHub:
    """The fake Hub with the official voices named as the docs' speakers, and owner/name."""
    hub.repos[DEFAULT_REPO] = FakeRepo.from_folder(tiny_bundle).with_speakers(SPEAKER_NAMES)
    hub.repos["owner/name"] = FakeRepo.from_folder(tiny_bundle)
    return hub


@pytest.fixture
def lan_server(server_port: int, monkeypatch: pytest.MonkeyPatch, socket_enabled: None) -> int:
    """The tests' Yomiage server, reached at the README's address as over a LAN."""

    class Routed(AsyncTcpClient):
        def __init__(self, host: str, port: int) -> None:
            super().__init__(LOOPBACK if host == LAN_ADDRESS else host, port)

    monkeypatch.setattr(remote, "AsyncTcpClient", Routed)
    return server_port


async def _official(hass: HomeAssistant, speakers: list[str]) -> ConfigEntry:
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    result = await download_speakers(hass, result["flow_id"], speakers)
    return _created(result)


def _created(result: config_entries.ConfigFlowResult) -> ConfigEntry:
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    entry: ConfigEntry = result["result"]
    return entry


@pytest.mark.usefixtures("models_dir")
async def test_official_voices_with_one_speaker(hass: HomeAssistant, voices_hub: FakeHub) -> None:
    entry = await _official(hass, ["jvnv-F1-jp"])
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, OFFICIAL_ONE)


@pytest.mark.usefixtures("models_dir")
async def test_official_voices_with_two_speakers(hass: HomeAssistant, voices_hub: FakeHub) -> None:
    entry = await _official(hass, ["jvnv-F1-jp", "jvnv-M1-jp"])
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, OFFICIAL_TWO)


@pytest.mark.usefixtures("models_dir")
async def test_another_repository(hass: HomeAssistant, voices_hub: FakeHub) -> None:
    result = await flow_menu(hass, SOURCE_HUGGINGFACE)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_REPO_ID: "owner/name"}
    )
    assert result["step_id"] == "speakers", result
    entry = _created(await download_speakers(hass, result["flow_id"], ["tiny-a"]))
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, REPOSITORY)


async def test_models_from_aivishub(hass: HomeAssistant, aivishub_entry: ConfigEntry) -> None:
    """A model's page pasted (the first model makes the entry; others join it)."""
    assert_named_as_the_readme_says(hass, aivishub_entry, AIVISHUB)


async def test_a_local_folder(hass: HomeAssistant, bundle_dir: Path) -> None:
    assert bundle_dir.relative_to(hass.config.config_dir) == Path("voices/tiny")
    result = await flow_menu(hass, SOURCE_LOCAL)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_PATH: "voices/tiny"}
    )
    entry = _created(result)
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, FOLDER)


async def test_a_server_typed_in(hass: HomeAssistant, lan_server: int) -> None:
    result = await flow_menu(hass, SOURCE_WYOMING)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_HOST: LAN_ADDRESS, CONF_PORT: lan_server}
    )
    entry = _created(result)
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, SERVER)


async def test_a_server_found_on_the_network(hass: HomeAssistant, lan_server: int) -> None:
    """``yomiage serve --zeroconf`` on the machine at the README's address."""
    announced = service_info("kitchen-pc", LAN_ADDRESS, lan_server).decoded_properties
    result = await hass.config_entries.flow.async_init(
        DOMAIN,
        context={"source": config_entries.SOURCE_ZEROCONF},
        data=zeroconf_discovery("kitchen-pc", LAN_ADDRESS, lan_server, announced),
    )
    assert result["step_id"] == "zeroconf_confirm", result
    entry = _created(await hass.config_entries.flow.async_configure(result["flow_id"], {}))
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, SERVER)


class AnnouncingAddon:
    """The add-on as the Supervisor double starts it, its server already serving (the tests'
    server): once started it announces that server, as the run script does, and is healthy."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.announced = threading.Event()

    def start(self, options: dict[str, Any], environment: dict[str, str]) -> None:
        # In a thread of its own: the double answers the announcement once this call returns.
        threading.Thread(target=self._announce, args=(environment,), daemon=True).start()

    def _announce(self, environment: dict[str, str]) -> None:
        url, token = environment["YOMIAGE_SUPERVISOR_URL"], environment["SUPERVISOR_TOKEN"]
        load_run_script().announce(url, token, LOOPBACK, self.port)
        self.announced.set()

    def stop(self) -> None:
        self.announced.clear()

    def exit_code(self) -> int | None:
        return None

    def healthy(self) -> bool:
        return self.announced.is_set()


@pytest.fixture
async def supervisor(
    hass: HomeAssistant,
    server_port: int,
    socket_enabled: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> AsyncIterator[SupervisorDouble]:
    """Home Assistant OS with a Supervisor whose add-on serves the tests' server."""
    as_home_assistant_os(hass, monkeypatch, tmp_path / "config")
    with SupervisorDouble(AnnouncingAddon(server_port)) as double:
        supervisor_at(hass, double)
        yield double


async def test_the_add_on_installed_by_the_flow(
    hass: HomeAssistant, supervisor: SupervisorDouble, voices_hub: FakeHub
) -> None:
    result = await install_and_start(hass, await to_speakers(hass), "jvnv-F1-jp")
    entry = _created(result)
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, ADDON)


@pytest.mark.usefixtures("socket_enabled")
async def test_the_add_on_installed_by_hand(hass: HomeAssistant, server_port: int) -> None:
    """It announces itself; the user confirms the discovered Yomiage."""
    discovery = HassioServiceInfo(
        config={"host": LOOPBACK, "port": server_port}, name="Yomiage", slug=ADDON_SLUG, uuid="1"
    )
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_HASSIO}, data=discovery
    )
    assert result["step_id"] == "hassio_confirm", result
    entry = _created(await hass.config_entries.flow.async_configure(result["flow_id"], {}))
    await hass.async_block_till_done()
    assert_named_as_the_readme_says(hass, entry, ADDON)
