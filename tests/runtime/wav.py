"""Reading WAV as a player does: whole files and streams whose header says 0 frames."""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class WavAudio:
    sample_rate: int
    sample_width: int  # bytes
    channels: int
    pcm: bytes


def read_wav(data: bytes) -> WavAudio:
    """Format and samples of a WAV file. A streamed WAV (Home Assistant's wyoming client since
    2025.7, our entity) is written before its length is known: its data chunk says 0 bytes and
    runs to the end of the file."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", "not a WAV file"
    offset, fmt = 12, None
    while offset + 8 <= len(data):
        kind = data[offset : offset + 4]
        (size,) = struct.unpack("<I", data[offset + 4 : offset + 8])
        body = offset + 8
        if kind == b"fmt ":
            fmt = struct.unpack("<HHIIHH", data[body : body + 16])
        elif kind == b"data":
            assert fmt is not None and fmt[0] == 1, "PCM format chunk before the data"
            end = len(data) if size in (0, 0xFFFFFFFF) else body + size
            return WavAudio(fmt[2], fmt[5] // 8, fmt[1], data[body:end])
        offset = body + size + (size & 1)
    raise AssertionError("WAV without a data chunk")
