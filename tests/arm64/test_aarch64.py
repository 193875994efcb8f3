"""The engine on arm64 (a Raspberry Pi's CPU), checked rather than assumed: the tiny bundle spoken
under qemu-user emulation (cortex-a72, as in a Pi 4B) inside a Debian bookworm arm64 rootfs that
scripts/setup builds, against the same run on this machine. Emulated speed means nothing; the
readings must be the same and every voice's audio within 2 LSB, with the graph rewrite and the
decoder split (the graph cache, as users run it) and with the graphs as published."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOTFS = ROOT / ".arm64"
BUNDLE = ROOT / "tests" / "fixtures" / "bundle-tiny"
SPEAK = Path(__file__).with_name("speak.py")


def _speak(command: list[str], published: bool) -> tuple[dict[str, np.ndarray], list[list[str]]]:
    flags = ["--published"] if published else []
    spoken = subprocess.run(
        [*command, str(SPEAK), str(BUNDLE), *flags],
        check=True,
        capture_output=True,
        timeout=600,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "QEMU_CPU": "cortex-a72"},
    )
    with np.load(io.BytesIO(spoken.stdout)) as packed:
        audio = {name: packed[name] for name in packed.files if name != "readings"}
        return audio, json.loads(str(packed["readings"]))


@pytest.mark.parametrize("published", [False, True], ids=["graph cache", "as published"])
def test_arm64_speaks_as_this_machine_does(published: bool) -> None:
    assert (ROOTFS / "opt" / "venv" / "pyvenv.cfg").is_file(), "no arm64 rootfs: run scripts/setup"
    here, here_readings = _speak([sys.executable], published)
    arm, arm_readings = _speak([str(ROOT / "scripts" / "chroot"), ".arm64", "python"], published)
    machine = subprocess.run(
        [str(ROOT / "scripts" / "chroot"), ".arm64", "uname", "-m"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert machine == "aarch64"
    assert arm_readings == here_readings
    # 2 speakers x 3 styles x 2 texts, and one streamed text
    assert sorted(arm) == sorted(here) and len(here) == 13
    for voice, samples in here.items():
        assert arm[voice].shape == samples.shape, voice
        assert np.abs(arm[voice].astype(np.int32) - samples).max() <= 2, voice
