"""The add-on's image, built once per run from this checkout on the stand-in base that
scripts/setup imports (the registry's python:3.13-slim is out of reach here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Imported before the `hass` fixture runs: the plugin mounts its own `custom_components` package,
# which would otherwise hide ours.
import custom_components.yomiage  # noqa: F401
from tests.runtime.yomiage.addon import ADDON, REPO_ROOT

BASE_IMAGE = "yomiage-addon-base:trixie"  # scripts/setup
# Names of this run only: two runs on one machine (CI and a checkout) must not meet.
RUN_NAME = f"yomiage-addon-test-{os.getpid()}"
IMAGE = f"yomiage-addon:test-{os.getpid()}"
TINY_BUNDLE = REPO_ROOT / "tests" / "fixtures" / "bundle-tiny"


def docker(*args: str, timeout_s: float = 120) -> str:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert done.returncode == 0, f"docker {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.strip()


def _checkout_archive(archive: Path) -> None:
    """The working tree as git sees it (tracked files and new ones it does not ignore), as the
    release tarball holds the tagged tree: no venvs, caches or build output."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    with tarfile.open(archive, "w") as tar:
        for name in filter(None, listed.split("\0")):
            if (REPO_ROOT / name).is_file():  # a deleted file is still listed until committed
                tar.add(REPO_ROOT / name, arcname=name, recursive=False)


@pytest.fixture(autouse=True)
def _loopback_sockets(socket_enabled: None) -> None:
    """The Home Assistant plugin blocks sockets; Home Assistant reaches the container here."""


@pytest.fixture(autouse=True)
def _custom_integrations(enable_custom_integrations: None) -> None:
    """Let Home Assistant load custom_components/yomiage (the flow that sets the image up)."""


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The add-on folder as the Supervisor's build context, the source from this checkout."""
    assert subprocess.run(["docker", "info"], check=False, capture_output=True).returncode == 0, (
        "dockerd is not running: run scripts/setup"
    )
    docker("image", "inspect", BASE_IMAGE)  # built by scripts/setup
    context = tmp_path_factory.mktemp("addon-context")
    shutil.copytree(ADDON, context, dirs_exist_ok=True)
    _checkout_archive(context / "yomiage-source.tar")
    # pip inside the build fetches the wheels: the registry is reached through the host's network.
    docker(
        "build",
        "--network=host",
        f"--build-arg=BUILD_FROM={BASE_IMAGE}",
        "--build-arg=YOMIAGE_SOURCE=yomiage-source.tar",
        f"--tag={IMAGE}",
        str(context),
        timeout_s=900,
    )
    yield IMAGE
    docker("image", "rm", IMAGE)  # with its layers: ~0.6 GB a run otherwise
