"""The Wyoming protocol as the TTS server speaks it: reading events, the events it answers with.

Events are a JSON header line, optionally followed by ``data_length`` bytes of extra JSON data and
``payload_length`` bytes of payload. The ``wyoming`` library's reader ends the connection on the
first line it cannot parse; ours consumes a bad event whole and reports it, so the client gets an
``error`` event and can go on. The event names and the ``yomiage_options`` key it shares with
the integration's client: ``yomiage_engine.wyoming_contract``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from yomiage_engine.audio.wav import PCM_SAMPLE_WIDTH
from yomiage_engine.wyoming_contract import (
    AIVISHUB_PROGRESS,
    AIVISHUB_UPDATED,
    LANGUAGE,
    PROGRAM,
    SYNTHESIZE_STOPPED,
    YOMIAGE_OPTIONS,
)

PCM_CHANNELS = 1
SAMPLES_PER_CHUNK = 2048  # ≈ 46 ms at 44.1 kHz per audio-chunk event
MAX_DATA_BYTES = 1 << 20  # a request's JSON; the engine refuses texts long before this
MAX_PAYLOAD_BYTES = 1 << 20  # a TTS request carries no payload at all

PROJECT_URL = "https://github.com/yomiage/yomiage"
_ATTRIBUTION = Attribution(name="Yomiage", url=PROJECT_URL)
_VOICE_ATTRIBUTION = Attribution(
    name="Style-Bert-VITS2 JP-Extra", url="https://github.com/litagin02/Style-Bert-VITS2"
)
_DISCARD_BLOCK = 1 << 16


class RequestError(Exception):
    """A request the server cannot serve; answered with an ``error`` event carrying ``code``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class MalformedEventError(RequestError):
    """Bytes that are not a Wyoming event. They have been consumed: the connection can go on."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "malformed_event")


# -- reading -----------------------------------------------------------------------------------
async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event, or None when the client has closed the connection.

    Raises MalformedEventError after consuming a bad event (not JSON, no type, oversized data).
    """
    line = await _read_line(reader)
    if not line:
        return None
    header = _json_object(line, "event header")
    data_length = _length(header, "data_length")
    payload_length = _length(header, "payload_length")
    try:
        extra = await _read_block(reader, data_length, MAX_DATA_BYTES, "event data")
        payload = await _read_block(reader, payload_length, MAX_PAYLOAD_BYTES, "event payload")
    except asyncio.IncompleteReadError:
        return None
    return _event(header, extra, payload)


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    """The next line (what is left at the end of the stream). A line longer than the reader's
    limit is skipped to its end, however long, and refused once: one error per bad event."""
    too_long = False
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as err:
            line = err.partial
        except asyncio.LimitOverrunError as err:  # what it read stays buffered: drop it
            await reader.readexactly(err.consumed)
            too_long = True
            continue
        if too_long:
            raise MalformedEventError("event header line is too long")
        return line


def _event(header: dict[str, Any], extra: bytes, payload: bytes) -> Event:
    event_type = header.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise MalformedEventError("event has no 'type'")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise MalformedEventError(f"{event_type}: 'data' must be a JSON object")
    if extra:
        data = {**data, **_json_object(extra, f"{event_type} data")}
    return Event(type=event_type, data=data, payload=payload or None)


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise MalformedEventError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise MalformedEventError(f"{what} must be a JSON object")
    return value


def _length(header: dict[str, Any], key: str) -> int:
    value = header.get(key) or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedEventError(f"{key} must be a byte count, not {value!r}")
    return value


async def _read_block(reader: asyncio.StreamReader, length: int, limit: int, what: str) -> bytes:
    if length <= limit:
        return await reader.readexactly(length) if length else b""
    while length > 0:  # skip it to stay in step with the client, then refuse it
        length -= len(await reader.readexactly(min(length, _DISCARD_BLOCK)))
    raise MalformedEventError(f"{what} is larger than {limit} bytes")


# -- requests ----------------------------------------------------------------------------------
def request_text(event: Event) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise RequestError(f"{event.type} needs 'text' (a string)", "malformed_event")
    return text


def requested_options(event: Event) -> Mapping[str, Any]:
    """The event's ``yomiage_options`` (none: an empty mapping); the voice is not one of them."""
    options = event.data.get(YOMIAGE_OPTIONS) or {}
    if not isinstance(options, dict):
        raise RequestError(
            f"{event.type}: {YOMIAGE_OPTIONS!r} must be a JSON object", "invalid_option"
        )
    if "voice" in options:
        raise RequestError(
            f"{event.type}: the voice goes in 'voice', not in {YOMIAGE_OPTIONS!r}", "invalid_option"
        )
    return options


def requested_voice(event: Event) -> str | None:
    """``speaker/style`` from the event's ``voice`` (None: the server's default voice).

    Accepts ``{"name": "speaker/style"}``, ``{"name": "speaker", "speaker": "style"}`` (Wyoming's
    multi-speaker form) and ``{"language": "ja"}``.
    """
    voice = event.data.get("voice") or {}
    if not isinstance(voice, dict):
        raise RequestError(f"{event.type}: 'voice' must be a JSON object", "malformed_event")
    name, style, language = (voice.get(key) for key in ("name", "speaker", "language"))
    for key, value in (("name", name), ("speaker", style), ("language", language)):
        if value is not None and not isinstance(value, str):
            raise RequestError(f"{event.type}: voice {key} must be a string", "malformed_event")
    if name and not _is_japanese(name):  # wyoming 1.5 turns {"language": "ja"} into a name
        return f"{name}/{style}" if style and "/" not in name else name
    if language and not _is_japanese(language):
        raise RequestError(
            f"language {language!r} is not supported; this server speaks {LANGUAGE}",
            "unsupported_language",
        )
    return None


def _is_japanese(language: str) -> bool:
    """Whether a tag (ja, ja-JP, ja_JP) means Japanese; a speaker/style never does."""
    return "/" not in language and language.replace("_", "-").lower().split("-")[0] == LANGUAGE


# -- answers -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class VoiceOrigin:
    """Where a speaker's voice comes from, as a client may update it: its AivisHub model."""

    model: str  # the model's name
    page: str  # the model's AivisHub page (its uuid at the end)
    version: str


def info_event(
    voices: Mapping[str, list[str]],
    version: str | None,
    origins: Mapping[str, VoiceOrigin] | None = None,
) -> Event:
    """``info``: every speaker/style as a voice, and streaming text input advertised; a voice of
    an AivisHub model names the model's page and gives its version (``origins`` by speaker)."""
    origins = origins or {}
    program = TtsProgram(
        name=PROGRAM,
        description="Yomiage: Japanese text to speech (Style-Bert-VITS2 JP-Extra)",
        attribution=_ATTRIBUTION,
        installed=True,
        version=version,
        voices=[
            TtsVoice(
                name=f"{speaker}/{style}",
                description=f"{speaker} ({style})",
                attribution=_voice_attribution(origins.get(speaker)),
                installed=True,
                version=origins[speaker].version if speaker in origins else None,
                languages=[LANGUAGE],
            )
            for speaker, styles in voices.items()
            for style in styles
        ],
    )
    event: Event = Info(tts=[program]).event()
    # wyoming >= 1.7 reads this flag; older clients skip fields they do not know.
    event.data["tts"][0]["supports_synthesize_streaming"] = True
    return event


def _voice_attribution(origin: VoiceOrigin | None) -> Attribution:
    return _VOICE_ATTRIBUTION if origin is None else Attribution(name=origin.model, url=origin.page)


def aivishub_progress(model: str, fraction: float) -> Event:
    return Event(type=AIVISHUB_PROGRESS, data={"model": model, "fraction": fraction})


def aivishub_updated(model: str, version: str) -> Event:
    return Event(type=AIVISHUB_UPDATED, data={"model": model, "version": version})


def requested_model(event: Event) -> str:
    """The model uuid an ``AIVISHUB_UPDATE`` names."""
    model = event.data.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(f"{event.type}: 'model' must be a model's uuid", "malformed_event")
    return model


def audio_start(sample_rate: int) -> Event:
    start: Event = AudioStart(
        rate=sample_rate, width=PCM_SAMPLE_WIDTH, channels=PCM_CHANNELS
    ).event()
    return start


def audio_chunks(raw: bytes, sample_rate: int) -> Iterator[Event]:
    """``audio-chunk`` events of at most SAMPLES_PER_CHUNK of the little-endian 16-bit samples."""
    step = SAMPLES_PER_CHUNK * PCM_SAMPLE_WIDTH
    for offset in range(0, len(raw), step):
        chunk = AudioChunk(
            rate=sample_rate,
            width=PCM_SAMPLE_WIDTH,
            channels=PCM_CHANNELS,
            audio=raw[offset : offset + step],
        )
        yield chunk.event()


def audio_stop() -> Event:
    stop: Event = AudioStop().event()
    return stop


def synthesize_stopped() -> Event:
    return Event(type=SYNTHESIZE_STOPPED)


def error_event(message: str, code: str) -> Event:
    error: Event = Error(text=message, code=code).event()
    return error
