"""WAV framing of 16-bit mono PCM: whole files and the streaming header. No numpy, so that
the integration's tts platform imports it on installs that only reach a Yomiage server."""

from __future__ import annotations

import io
import struct
import wave

PCM_SAMPLE_WIDTH = 2  # bytes per sample: 16-bit mono everywhere


def wav_file(pcm: bytes, sample_rate: int) -> bytes:
    """A complete mono 16-bit WAV file around little-endian ``pcm``."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(PCM_SAMPLE_WIDTH)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm)
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
