"""Float audio to PCM16, and digital silence (WAV framing: wav.py)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

_INT16_MAX = 32767


def to_pcm16(audio: NDArray[np.float32]) -> NDArray[np.int16]:
    """Float audio in [-1, 1] -> int16 samples; out-of-range values are clipped, not wrapped."""
    scaled = np.clip(audio, -1.0, 1.0) * _INT16_MAX
    return np.round(scaled).astype(np.int16)


def silence(seconds: float, sample_rate: int) -> NDArray[np.int16]:
    """True digital silence (zeros), rounded to whole samples."""
    return np.zeros(round(max(seconds, 0.0) * sample_rate), dtype=np.int16)
