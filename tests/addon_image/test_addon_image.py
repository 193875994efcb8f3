"""The add-on's image, built from this checkout (conftest.py), run as its users run it.

- Home Assistant OS: the Supervisor double installs and starts it as the Supervisor does
  (Docker's init, /data with the options file, the host's network standing in for the add-on
  network), and Yomiage's flow goes from "integration installed" to speech; the Supervisor's
  SIGTERM stops it cleanly. A voice from AivisHub likewise (the fake AivisHub), then a newer
  version of it installed from the entry's update entity, which the image downloads.
- Home Assistant Container: the README's ``docker run`` command, as written but for this run's
  names; Home Assistant adds the server by address and speaks. The compose file's server is
  found by zeroconf on the host network.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
import pytest_socket
import yaml
from homeassistant import config_entries
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.service_info.zeroconf import ZeroconfServiceInfo
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import async_fire_time_changed

from custom_components.yomiage.aivishub_updates import CHECK_INTERVAL
from custom_components.yomiage.const import CONF_HOST, CONF_PORT, DOMAIN, SOURCE_WYOMING
from custom_components.yomiage.engine.hub.aivishub import API_VARIABLE
from custom_components.yomiage.engine.hub.download import DEFAULT_REPO
from custom_components.yomiage.engine.wyoming_contract import ZEROCONF_MARK, ZEROCONF_TYPE
from custom_components.yomiage.supervisor import ADDON_SLUG
from tests.runtime.fakeaivishub import FakeAivisHub, FakeModel, with_manifest
from tests.runtime.fakehub import FakeHub, FakeRepo
from tests.runtime.integration.common import AIVISHUB_PAGE, TINY_A, TINY_A_UUID, aivishub_speech
from tests.runtime.integration.home_assistant_os import (
    app_aivishub_confirmation,
    as_home_assistant_os,
    choose,
    install_and_start,
    past_progress,
    speak,
    supervisor_at,
    to_speakers,
)
from tests.runtime.supervisor_double import SupervisorDouble
from tests.runtime.wav import read_wav
from tests.runtime.yomiage.addon import ADDON, REPO_ROOT, free_port, load_run_script, wait_for

from .conftest import RUN_NAME, TINY_BUNDLE, docker

MESSAGE = "リビングの照明をつけました。ほかに何かお手伝いできることはありますか？"
STARTUP_S = 180  # voices fetched, graphs prepared for this CPU at the first start, then served
# The README's example speaker: the fake Hub serves the tiny bundle's first speaker under its name.
README_SPEAKER = "jvnv-F1-jp"


@dataclass
class DockerAddon:
    """The image as the Supervisor runs an add-on: the double's ``AddonRunner``."""

    image: str
    data: Path  # the add-on's /data
    name: str
    environment: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    created: bool = False

    def start(self, options: dict[str, Any], environment: dict[str, str]) -> None:
        self.remove()
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "options.json").write_text(json.dumps(options))
        env = {
            **self.environment,
            **environment,
            "YOMIAGE_PORT": str(self.port),
            "YOMIAGE_ANNOUNCE_HOST": "127.0.0.1",  # the add-on network's name for it
        }
        docker(
            "run",
            "--detach",
            "--init",  # config.yaml's init: true
            "--network=host",
            f"--name={self.name}",
            *(f"--env={key}={value}" for key, value in env.items()),
            f"--volume={self.data}:/data",
            self.image,
        )
        self.created = True

    def stop(self) -> None:
        if self.created and self.state()["Running"]:
            docker("stop", "--time=30", self.name, timeout_s=60)

    def exit_code(self) -> int | None:
        state = self.state()
        return None if state["Running"] else int(state["ExitCode"])

    def healthy(self) -> bool:
        """What Docker's health check (the image's HEALTHCHECK) says, as the Supervisor reads."""
        return bool(self.state().get("Health", {}).get("Status") == "healthy")

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(docker("inspect", "--format={{json .State}}", self.name))
        return state

    def logs(self) -> str:
        return _logs(self.name)

    def remove(self) -> None:
        subprocess.run(["docker", "rm", "--force", self.name], check=False, capture_output=True)
        self.created = False


def _official_voices() -> FakeRepo:
    """The tiny bundle as the official repository, its first speaker named as the README's."""
    repo = FakeRepo.from_folder(TINY_BUNDLE)
    first = sorted(
        {path.split("/")[2] for path in repo.files if path.startswith("onnx/speakers/")}
    )[0]
    return repo.with_speakers({first: README_SPEAKER})


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """Reachable from the host network and from Docker's bridge."""
    with FakeHub({DEFAULT_REPO: _official_voices()}, host="0.0.0.0") as hub:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.port}")
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        yield hub


@pytest.fixture
def addon(image: str, tmp_path: Path, hub: FakeHub) -> Iterator[DockerAddon]:
    started = DockerAddon(
        image,
        tmp_path / "addon-data",
        f"{RUN_NAME}-{tmp_path.name}",
        {"HF_ENDPOINT": f"http://127.0.0.1:{hub.port}", "HF_HUB_DISABLE_TELEMETRY": "1"},
    )
    yield started
    started.remove()


@pytest.fixture
async def home_assistant(hass: HomeAssistant) -> HomeAssistant:
    assert await async_setup_component(hass, "http", {})
    return hass


async def test_home_assistant_os_from_the_flow_to_speech_then_a_clean_stop(
    home_assistant: HomeAssistant,
    addon: DockerAddon,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hass = home_assistant
    as_home_assistant_os(hass, monkeypatch, tmp_path / "config")
    with SupervisorDouble(addon) as double:
        supervisor_at(hass, double)
        result = await install_and_start(hass, await to_speakers(hass), README_SPEAKER)
        assert result["type"] is FlowResultType.CREATE_ENTRY, (result, addon.logs())
        assert result["data"][CONF_PORT] == addon.port
        await hass.async_block_till_done()

        audio = read_wav(await speak(hass, MESSAGE))
        assert (audio.sample_rate, audio.sample_width, audio.channels) == (44100, 2, 1)
        assert len(audio.pcm) > 2 * 44100  # more than a second of speech
        docker("exec", addon.name, "python3", "/run.py", "healthcheck")
        assert any((addon.data / "prepared-graphs").rglob("graph.onnx"))  # outside backups
        assert await hass.config_entries.async_unload(result["result"].entry_id)

        # The Supervisor stops an add-on with SIGTERM, which Docker's init forwards: the server
        # finishes and exits 0 on its own (one Docker had to kill after 30 s would exit 137).
        assert double.answer("POST", f"/addons/{ADDON_SLUG}/stop", {})[0] == 200
        state = addon.state()
        assert (state["Running"], state["ExitCode"], state["OOMKilled"]) == (False, 0, False)
        assert "stopping" in addon.logs()


@pytest.fixture
def aivis_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAivisHub]:
    """tiny-a 1.0.0, reachable from the host network (Home Assistant, the add-on) too."""
    with FakeAivisHub([FakeModel([TINY_A])], host="0.0.0.0") as fake:
        monkeypatch.setenv(API_VARIABLE, f"http://127.0.0.1:{fake.port}/v1")
        yield fake


async def test_home_assistant_os_a_voice_from_aivishub_then_its_newer_version(
    home_assistant: HomeAssistant,
    addon: DockerAddon,
    aivis_hub: FakeAivisHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page pasted, the confirmation, the install and the first start (the image fetches the
    model and the language model): the entry speaks the model. AivisHub publishes 1.1.0: the
    entry's update entity shows it, Install has the image download it, the voice speaks on."""
    hass = home_assistant
    as_home_assistant_os(hass, monkeypatch, tmp_path / "config")
    addon.environment[API_VARIABLE] = f"http://127.0.0.1:{aivis_hub.port}/v1"
    with SupervisorDouble(addon) as double:
        supervisor_at(hass, double)
        confirmation = await app_aivishub_confirmation(hass, AIVISHUB_PAGE + TINY_A_UUID)
        assert confirmation["step_id"] == "aivishub_confirm", confirmation
        result = await past_progress(hass, await choose(hass, confirmation, {}), "addon_install")
        result = await past_progress(hass, result, "addon_start", "addon_start_aivishub")
        assert result["type"] is FlowResultType.CREATE_ENTRY, (result, addon.logs())
        assert double.options["aivishub_models"] == [TINY_A_UUID]
        await hass.async_block_till_done(wait_background_tasks=True)
        await aivishub_speech(hass, "tiny-a/Happy", "tts.yomiage_app")

        entry = result["result"]
        (update,) = [
            entity.entity_id
            for entity in er.async_entries_for_config_entry(er.async_get(hass), entry.entry_id)
            if entity.domain == "update"
        ]
        aivis_hub.add(FakeModel([TINY_A, with_manifest(TINY_A, version="1.1.0")]))
        async_fire_time_changed(hass, dt_util.utcnow() + CHECK_INTERVAL + timedelta(seconds=1))
        await hass.async_block_till_done(wait_background_tasks=True)
        state = hass.states.get(update)
        assert state is not None and state.attributes["latest_version"] == "1.1.0", state

        await hass.services.async_call("update", "install", {"entity_id": update}, blocking=True)
        await hass.async_block_till_done(wait_background_tasks=True)
        state = hass.states.get(update)
        assert state is not None and state.attributes["installed_version"] == "1.1.0", state
        assert aivis_hub.file_gets()[-1].endswith("/1.1.0.aivmx"), "the image downloaded it"
        await aivishub_speech(hass, "tiny-a/Sad", "tts.yomiage_app")
        assert await hass.config_entries.async_unload(entry.entry_id)


# -- Home Assistant Container ----------------------------------------------------------------------
def _readme_docker_run() -> list[str]:
    """The ``docker run`` command of the README's Container section, as words."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("### Home Assistant Container", 1)[1]
    block = re.search(r"```sh\n(docker run .*?)```", section, re.DOTALL)
    assert block is not None, "the Container section shows its docker run command"
    return shlex.split(block.group(1).replace("\\\n", " "))


def _this_runs_names(
    words: list[str], image: str, name: str, port: int, data: Path, hub: FakeHub
) -> list[str]:
    """The README's command with this run's container name, host port, data folder and image,
    and the fake Hub's address on this host (the one thing the real command does not need)."""
    replaced: list[str] = []
    for word in words:
        if word == "yomiage" and replaced[-1:] == ["--name"]:
            replaced.append(name)
        elif word == "10200:10200":
            replaced.append(f"{port}:10200")
        elif word.endswith(":/data"):
            replaced.append(f"{data}:/data")
        elif word.startswith("ghcr.io/yomiage/"):
            replaced += [
                "--add-host=host.docker.internal:host-gateway",
                f"--env=HF_ENDPOINT=http://host.docker.internal:{hub.port}",
                image,
            ]
        else:
            replaced.append(word)
    return replaced


def _logs(name: str) -> str:
    done = subprocess.run(["docker", "logs", name], check=False, capture_output=True, text=True)
    return done.stdout + done.stderr


def _answers(port: int) -> bool:
    """What the image's health check asks (run.py's own), from this host."""
    answers: bool = load_run_script().answers_describe(port)
    return answers


async def test_the_readme_container_command_serves_home_assistant(
    home_assistant: HomeAssistant, image: str, hub: FakeHub, tmp_path: Path
) -> None:
    hass = home_assistant
    config = tmp_path / "config"
    config.mkdir()
    hass.config.config_dir = str(config)
    words = _readme_docker_run()
    assert words[:2] == ["docker", "run"] and "--voices" in words
    port, name = free_port(), f"{RUN_NAME}-container"
    command = _this_runs_names(words, image, name, port, tmp_path / "data", hub)
    assert len(command) == len(words) + 2, "only names changed, the Hub's address added"
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    try:
        await asyncio.to_thread(wait_for, lambda: _answers(port), STARTUP_S)
        assert _answers(port), _logs(name)

        result = await hass.config_entries.flow.async_init(
            DOMAIN, context={"source": config_entries.SOURCE_USER}
        )
        result = await hass.config_entries.flow.async_configure(
            result["flow_id"], {"next_step_id": SOURCE_WYOMING}
        )
        result = await hass.config_entries.flow.async_configure(
            result["flow_id"], {CONF_HOST: "127.0.0.1", CONF_PORT: port}
        )
        assert result["type"] is FlowResultType.CREATE_ENTRY, result
        await hass.async_block_till_done()
        audio = read_wav(await speak(hass, MESSAGE))
        assert len(audio.pcm) > 2 * 44100
        assert await hass.config_entries.async_unload(result["result"].entry_id)
        # The voices stay in the data volume for the next start.
        assert (tmp_path / "data" / "voices" / "lemondouble--hayakoe").is_dir()
    finally:
        subprocess.run(["docker", "rm", "--force", name], check=False, capture_output=True)


def test_the_compose_file_runs_the_readme_command_beside_home_assistant() -> None:
    """The compose file's server is the README's command on the host network, announced by
    zeroconf (Home Assistant's own service there too, as its documentation has it)."""
    compose = yaml.safe_load((ADDON / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["homeassistant"]["network_mode"] == "host"
    server = services["yomiage"]
    words = _readme_docker_run()
    image = next(word for word in words if word.startswith("ghcr.io/yomiage/"))
    assert server["image"] == image
    arguments = words[words.index(image) + 1 :]
    assert server["command"] == [*arguments, "--zeroconf"]
    assert server["network_mode"] == "host" and server["restart"] == "unless-stopped"
    assert [volume.split(":")[1] for volume in server["volumes"]] == ["/data"]


async def test_the_compose_files_server_is_found_by_zeroconf(
    home_assistant: HomeAssistant, image: str, hub: FakeHub, tmp_path: Path
) -> None:
    """Started as the compose file starts it (host network, its command), the server announces
    itself; what a zeroconf browser finds is what Home Assistant hands Yomiage's flow."""
    hass = home_assistant
    config = tmp_path / "config"
    config.mkdir()
    hass.config.config_dir = str(config)
    server = yaml.safe_load((ADDON / "docker-compose.yml").read_text())["services"]["yomiage"]
    port, name = free_port(), f"{RUN_NAME}-compose"
    docker(
        "run",
        "--detach",
        "--network=host",
        f"--name={name}",
        f"--env=YOMIAGE_PORT={port}",
        f"--env=HF_ENDPOINT=http://127.0.0.1:{hub.port}",
        f"--volume={tmp_path / 'data'}:/data",
        image,
        *server["command"],
    )
    try:
        await asyncio.to_thread(wait_for, lambda: _answers(port), STARTUP_S)
        found = await _browse(port)
        assert found is not None, _logs(name)
        # Home Assistant connects to the address announced: this host's own, beside loopback.
        pytest_socket.socket_allow_hosts(["127.0.0.1", str(found.ip_address)])
        result = await hass.config_entries.flow.async_init(
            DOMAIN, context={"source": config_entries.SOURCE_ZEROCONF}, data=found
        )
        assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "zeroconf_confirm")
        result = await hass.config_entries.flow.async_configure(result["flow_id"], {})
        assert result["type"] is FlowResultType.CREATE_ENTRY
        await hass.async_block_till_done()
        assert len(read_wav(await speak(hass, "こんにちは。")).pcm) > 0
        assert await hass.config_entries.async_unload(result["result"].entry_id)
    finally:
        subprocess.run(["docker", "rm", "--force", name], check=False, capture_output=True)


# What a zeroconf browser on this host finds: run apart from the test, whose sockets the Home
# Assistant plugin limits to 127.0.0.1 (mDNS answers come from the host's own address).
_BROWSER = """
import asyncio, json, sys
from zeroconf import InterfaceChoice, IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

async def main(service_type, port):
    names = asyncio.Queue()
    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Added:
            names.put_nowait(name)
    # IPv4 on the default interface, as the server announces (this box has no IPv6 multicast).
    zeroconf = AsyncZeroconf(interfaces=InterfaceChoice.Default, ip_version=IPVersion.V4Only)
    browser = AsyncServiceBrowser(zeroconf.zeroconf, service_type, handlers=[changed])
    try:
        while True:
            name = await names.get()
            info = AsyncServiceInfo(service_type, name)
            if await info.async_request(zeroconf.zeroconf, 3000) and info.port == port:
                properties = {k.decode(): (v or b"").decode() for k, v in info.properties.items()}
                print(json.dumps({"name": name, "addresses": info.parsed_addresses(),
                                  "server": info.server, "properties": properties}))
                return
    finally:
        await browser.async_cancel()
        await zeroconf.async_close()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def _browse(port: int) -> ZeroconfServiceInfo | None:
    """The Yomiage server on ``port`` as a zeroconf browser sees it within 30 s."""
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", _BROWSER, ZEROCONF_TYPE, str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    found = json.loads(done.stdout)
    assert ZEROCONF_MARK in found["properties"]
    addresses = [ip_address(address) for address in found["addresses"]]
    return ZeroconfServiceInfo(
        ip_address=addresses[0],
        ip_addresses=addresses,
        port=port,
        hostname=found["server"],
        type=ZEROCONF_TYPE,
        name=found["name"],
        properties=found["properties"],
    )
