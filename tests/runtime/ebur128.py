"""Loudness as ffmpeg's ``ebur128`` filter measures it (EBU R128 / ITU-R BS.1770): the meter the
acceptance figures are read with, independent of the engine's own."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
from numpy.typing import NDArray


@dataclass(frozen=True)
class Loudness:
    integrated_lufs: float
    true_peak_dbtp: float


_FFMPEG_EBUR128 = ("ffmpeg", "-nostats", "-hide_banner", "-af", "ebur128=peak=true", "-f", "null")


def measure_file(path: Path) -> Loudness:
    command = [*_FFMPEG_EBUR128[:3], "-i", str(path), *_FFMPEG_EBUR128[3:], "-"]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
    )
    summary = result.stderr[result.stderr.rindex("Summary:") :]
    integrated = re.search(r"I:\s+(-?[\d.]+|-inf) LUFS", summary)
    peak = re.search(r"Peak:\s+(-?[\d.]+|-inf) dBFS", summary)
    assert integrated and peak, summary
    return Loudness(float(integrated.group(1)), float(peak.group(1)))


def measure(pcm: NDArray[np.int16], sample_rate: int) -> Loudness:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "audio.wav"
        soundfile.write(path, pcm, sample_rate, subtype="PCM_16")
        return measure_file(path)
