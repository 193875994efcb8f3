"""The add-on as Home Assistant OS runs it: the image built from this checkout (conftest.py),
started as the Supervisor starts it (Docker's init, /data mapped with the options, a voice
folder under /share, a discovery API to announce to), heard through Home Assistant's own
Wyoming integration, stopped with SIGTERM."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from homeassistant.core import HomeAssistant
from yomiage_engine import Engine, SynthesisOptions

from tests.runtime.wav import read_wav
from tests.runtime.wyoming.addon import ADDON, FakeSupervisor, free_port, wait_for
from tests.runtime.wyoming.home_assistant import add_from_discovery, tts_audio, tts_entity

from .conftest import RUN_NAME, TINY_BUNDLE, docker

MESSAGE = "リビングの照明をつけました。ほかに何かお手伝いできることはありますか？"
STARTUP_S = 120  # graphs prepared for this CPU at the first start, then the server's load


@dataclass
class Container:
    name: str
    port: int
    data: Path  # the add-on's /data

    def logs(self) -> str:
        done = subprocess.run(
            ["docker", "logs", self.name], check=False, capture_output=True, text=True
        )
        return done.stdout + done.stderr

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(docker("inspect", "--format={{json .State}}", self.name))
        return state


@pytest.fixture
def supervisor() -> Iterator[FakeSupervisor]:
    with FakeSupervisor() as fake:
        yield fake


@pytest.fixture
def container(image: str, tmp_path: Path, supervisor: FakeSupervisor) -> Iterator[Container]:
    """The add-on with its default options but a local voice folder, once it has announced
    itself. The host's network stands in for the add-on network: the container's name for
    itself is this machine's, and Home Assistant reaches it on 127.0.0.1."""
    defaults = yaml.safe_load((ADDON / "config.yaml").read_text())["options"]
    options = {**defaults, "voices": "local", "local_folder": "/share/yomiage"}
    (tmp_path / "options.json").write_text(json.dumps(options))
    started = Container(f"{RUN_NAME}-{tmp_path.name}", free_port(), tmp_path)
    docker(
        "run",
        "--detach",
        "--init",  # config.yaml's init: true
        "--network=host",
        f"--name={started.name}",
        f"--env=YOMIAGE_PORT={started.port}",
        f"--env=YOMIAGE_SUPERVISOR_URL={supervisor.url}",
        "--env=SUPERVISOR_TOKEN=token-3",
        f"--volume={tmp_path}:/data",
        f"--volume={TINY_BUNDLE}:/share/yomiage:ro",
        image,
    )
    try:
        wait_for(lambda: bool(supervisor.requests) or not started.state()["Running"], STARTUP_S)
        assert supervisor.requests, f"the add-on never announced itself:\n{started.logs()}"
        yield started
    finally:
        subprocess.run(["docker", "rm", "--force", started.name], check=False, capture_output=True)


@pytest.fixture
def quiet_engine() -> Iterator[Engine]:
    engine = Engine(TINY_BUNDLE, device="cpu", threads=1)
    yield engine
    engine.close()


async def test_home_assistant_speaks_through_the_add_on(
    hass: HomeAssistant,
    container: Container,
    supervisor: FakeSupervisor,
    quiet_engine: Engine,
    tmp_path: Path,
) -> None:
    ((path, headers, body),) = supervisor.requests
    assert (path, headers["Authorization"]) == ("/discovery", "Bearer token-3")
    assert body == {
        "service": "wyoming",
        "config": {"uri": f"tcp://{socket.gethostname()}:{container.port}"},
    }
    config = tmp_path / "home-assistant"
    config.mkdir()
    hass.config.config_dir = str(config)  # HA's tts cache starts empty
    entry = await add_from_discovery(hass, body["config"])

    voices = tts_entity(hass).async_get_supported_voices("ja")
    assert voices is not None
    assert {voice.voice_id for voice in voices} == {
        f"{speaker}/{style}" for speaker, styles in quiet_engine.voices.items() for style in styles
    }
    voice = quiet_engine.default_voice
    extension, data = await tts_audio(hass, MESSAGE, voice)
    assert extension == "wav"
    audio = read_wav(data)
    assert (audio.sample_rate, audio.sample_width, audio.channels) == (44100, 2, 1)
    # The add-on speaks with noise on (its default), so the samples differ from a quiet run's
    # but the length stays close (the durations' noise is small) and it is not silence.
    quiet = quiet_engine.synthesize(MESSAGE, SynthesisOptions(voice=voice, noise=0, noise_w=0))
    samples = np.frombuffer(audio.pcm, np.int16)
    assert 0.8 < samples.size / quiet.audio.size < 1.25
    assert np.abs(samples).max() > 1000
    # The image's health check, and the graphs prepared where backups leave them out.
    docker("exec", container.name, "python3", "/run.py", "healthcheck")
    assert any((container.data / "prepared-graphs").rglob("graph.onnx"))
    assert await hass.config_entries.async_unload(entry.entry_id)


def test_sigterm_stops_the_add_on_cleanly(container: Container) -> None:
    """The Supervisor stops an add-on with SIGTERM (Docker's init forwards it): the server
    finishes and the container exits 0 on its own (a container Docker had to kill after its
    30 s would exit 137)."""
    docker("stop", "--time=30", container.name, timeout_s=60)
    state = container.state()
    assert (state["Running"], state["ExitCode"], state["OOMKilled"]) == (False, 0, False)
    assert "stopping" in container.logs()
