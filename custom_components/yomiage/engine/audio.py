"""PCM16 conversion and WAV framing (whole files and Home Assistant's streaming header)."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
from numpy.typing import NDArray

PCM_SAMPLE_WIDTH = 2  # bytes per sample: 16-bit mono everywhere
_INT16_MAX = 32767


def to_pcm16(audio: NDArray[np.float32]) -> NDArray[np.int16]:
    """Float audio in [-1, 1] -> int16 samples; out-of-range values are clipped, not wrapped."""
    scaled = np.clip(audio, -1.0, 1.0) * _INT16_MAX
    return np.round(scaled).astype(np.int16)


def silence(seconds: float, sample_rate: int) -> NDArray[np.int16]:
    """True digital silence (zeros), rounded to whole samples."""
    return np.zeros(round(max(seconds, 0.0) * sample_rate), dtype=np.int16)


def to_wav_bytes(pcm: NDArray[np.int16], sample_rate: int) -> bytes:
    """A complete mono 16-bit WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(PCM_SAMPLE_WIDTH)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm.astype("<i2").tobytes())
    return buffer.getvalue()


def wav_stream_header(sample_rate: int) -> bytes:
    """A 44-byte WAV header with zero data length, for audio whose length is not known yet.

    Players (and Home Assistant's streaming TTS) read such a header followed by raw PCM until EOF.
    Separate WAV files per sentence could not simply be concatenated.
    """
    byte_rate = sample_rate * PCM_SAMPLE_WIDTH
    return b"".join(
        (
            b"RIFF",
            struct.pack("<I", 36),
            b"WAVE",
            b"fmt ",
            struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, byte_rate, PCM_SAMPLE_WIDTH, 16),
            b"data",
            struct.pack("<I", 0),
        )
    )
