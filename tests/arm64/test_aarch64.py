"""The engine on arm64 (a Raspberry Pi's CPU), checked rather than assumed: the tiny bundle spoken
under qemu-user emulation (cortex-a72, as in a Pi 4B) inside a Debian bookworm arm64 rootfs that
scripts/setup builds, against the same run on this machine. Emulated speed means nothing; the
readings must be the same and every voice's audio within 2 LSB, with the graph rewrite and the
decoder split (the graph cache, as users run it) and with the graphs as published; and a wide
decoder stage prepared there as only such a CPU prepares it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.runtime.engine.onnx.sample_graphs import (
    TOLERANCE,
    run,
    upsampling_feeds,
    upsampling_stack,
)

ROOT = Path(__file__).resolve().parents[2]
ROOTFS = ROOT / ".arm64"
BUNDLE = ROOT / "tests" / "fixtures" / "bundle-tiny"
SPEAK = Path(__file__).with_name("speak.py")
RUN_GRAPH = Path(__file__).with_name("run_graph.py")


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


def test_a_wide_decoder_stage_prepared_on_arm64_computes_the_published_one() -> None:
    """The passes only a CPU without blocked kernels runs, minimal filtering of the 128-channel
    convolutions among them, chosen and run by the emulated arm64 onnxruntime itself: kernels
    3, 7 and 11 at dilations 1, 3 and 5, a length that fills no whole tile; the output is the
    published graph's on this machine, to float rounding."""
    convolutions = [(128, 3, 1, True), (128, 7, 3, False), (128, 11, 5, True), (128, 11, 1, True)]
    graph = upsampling_stack(convolutions)
    feeds = upsampling_feeds(graph, 37)
    (expected,) = run(graph, feeds)
    packed = io.BytesIO()
    np.savez(packed, graph=np.frombuffer(graph, dtype=np.uint8), **feeds)
    prepared = subprocess.run(
        [str(ROOT / "scripts" / "chroot"), ".arm64", "python", str(RUN_GRAPH)],
        input=packed.getvalue(),
        check=True,
        capture_output=True,
        timeout=600,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "QEMU_CPU": "cortex-a72"},
    )
    with np.load(io.BytesIO(prepared.stdout)) as result:
        output, ops = result["output"], json.loads(str(result["ops"]))
    # each in minimal filtering form (its products and its output transform, two MatMuls), and
    # the frame-rate one in front of the ConvTranspose
    assert ops.count("MatMul") == 2 * (len(convolutions) + 1)
    assert output.shape == expected.shape
    assert np.abs(output - expected).max() <= TOLERANCE * np.abs(expected).max()
