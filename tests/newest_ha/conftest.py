"""Options and fixtures of the newest-release tests (tests/newest_ha): a real ``hass -c DIR``
with Yomiage copied in as HACS copies it, and the tiny voices in its configuration folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.yomiage.addon import free_port

from .hass import REPO_ROOT, TINY_BUNDLE, Hass


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--allow-installs",
        action="store_true",
        help="Home Assistant may install what it asks for from the registry (bump-newest-ha)",
    )


@pytest.fixture(autouse=True)
def _loopback_sockets(socket_enabled: None) -> None:
    """The Home Assistant plugin blocks sockets; this test talks to a real hass on 127.0.0.1."""


@pytest.fixture
def hass_process(request: pytest.FixtureRequest) -> Iterator[Hass]:
    # Under the repository: scripts/chroot binds it at the same path, so hass sees this folder.
    (REPO_ROOT / ".cache").mkdir(exist_ok=True)
    config = Path(tempfile.mkdtemp(prefix="newest-ha-", dir=REPO_ROOT / ".cache"))
    port = free_port()
    (config / "configuration.yaml").write_text(
        "logger:\n  default: warning\n  logs:\n"
        "    custom_components.yomiage: debug\n    homeassistant.components.tts: debug\n"
    )
    shutil.copytree(REPO_ROOT / "custom_components" / "yomiage",
                    config / "custom_components" / "yomiage")  # fmt: skip
    shutil.copytree(TINY_BUNDLE, config / "voices" / "tiny")
    hass = Hass(config, port, allow_installs=request.config.getoption("--allow-installs"))
    try:
        yield hass
    finally:
        hass.stop()
        print(hass.log()[-8000:])  # shown by pytest when the test fails
        if not os.environ.get("KEEP"):
            shutil.rmtree(config, ignore_errors=True)
