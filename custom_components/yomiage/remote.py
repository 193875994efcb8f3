"""A Yomiage Wyoming server as the speech backend: for machines where the engine cannot run.

Home Assistant OS cannot install onnxruntime, but the Yomiage add-on (or ``yomiage serve`` on
another machine) can; this client speaks the Wyoming protocol to it with the ``wyoming`` library:

- ``describe`` → ``info``: the server's voices (``speaker/style``, Japanese).
- ``synthesize`` {text, voice, yomiage_options} → ``audio-start``, ``audio-chunk``…,
  ``audio-stop``.
- ``synthesize-start`` {voice, yomiage_options}, ``synthesize-chunk`` {text}…,
  ``synthesize-stop`` → per sentence ``audio-start`` … ``audio-stop``, then
  ``synthesize-stopped``.
- ``error`` {text, code}: the code is the engine's error key when the engine refused the request.
- ``yomiage-aivishub-update`` {model} → ``yomiage-aivishub-progress`` {fraction}…, then
  ``yomiage-aivishub-updated`` (or ``error`` with the download's ``download_<reason>``): the
  server fetches an AivisHub model's newest version and swaps it in. Which models it keeps up to
  date its ``info`` says: their voices' attribution is the model's AivisHub page, with a version.

One connection per request, as Home Assistant's own Wyoming client does: a request never waits
behind another's unread audio, and a server restart costs nothing but the request it cut.
The synthesis options a request sets travel in ``yomiage_options`` (engine/wyoming_contract.py);
the server's own settings decide the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, get_args

from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.tts import Synthesize, SynthesizeVoice

from .backend import InstalledModel, InstallProgress, RequestOptions, SpeechPiece
from .const import CONF_VOICE
from .engine import UnknownVoiceError, YomiageError
from .engine.hub.aivishub import PAGE_ROOT
from .engine.hub.errors import AivisHubError, Reason
from .engine.text.split import split_sentences
from .engine.wyoming_contract import (
    AIVISHUB_PROGRESS,
    AIVISHUB_UPDATE,
    AIVISHUB_UPDATED,
    LANGUAGE,
    PROGRAM,
    SYNTHESIZE_CHUNK,
    SYNTHESIZE_START,
    SYNTHESIZE_STOP,
    SYNTHESIZE_STOPPED,
    YOMIAGE_OPTIONS,
)

CONNECT_TIMEOUT_S: Final = 10.0
# Between two events of an answer: one long sentence on a slow machine, or text still arriving.
EVENT_TIMEOUT_S: Final = 120.0
# Between two events of a model's update: the server loads the new version (several minutes on a
# Raspberry Pi) before it answers; a server that goes away closes the connection sooner.
UPDATE_TIMEOUT_S: Final = 1800.0
# Error codes of the server that are the engine's own error keys: translated like local errors.
# Not invalid_option: the entity checks options itself first, so the server refusing one is a
# mismatch between the two, a server error (its text names no option).
ENGINE_ERROR_CODES: Final = frozenset(
    {
        "engine_error",
        "invalid_text",
        "unknown_voice",
        "bundle_error",
        "device_unavailable",
        "user_dictionary_error",
    }
)


# A server's failed AivisHub download: its error's code is the engine's translation key.
AIVISHUB_ERROR_CODES: Final = frozenset(f"{AivisHubError.source}_{r}" for r in get_args(Reason))

_T = TypeVar("_T")


class ServerUnreachableError(YomiageError):
    """No connection, a timeout, or the server hung up mid-answer."""

    translation_key = "server_unreachable"


class NotYomiageServerError(YomiageError):
    """Something answers Wyoming there, but it offers no Yomiage voices."""

    translation_key = "not_yomiage_server"


class ServerError(YomiageError):
    """The server refused the request; ``translation_key`` follows its error code."""

    translation_key = "server_error"

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
        if code in ENGINE_ERROR_CODES | AIVISHUB_ERROR_CODES:
            self.translation_key = code


@dataclass
class WyomingBackend:
    """The voices of one Yomiage Wyoming server at ``host``:``port``."""

    host: str
    port: int
    voices: dict[str, list[str]]
    version: str | None = None
    sample_rate: int | None = None  # learnt from the first audio
    state_options: Mapping[str, str] = field(default_factory=dict)
    aivishub_models: dict[str, InstalledModel] = field(default_factory=dict)  # as it describes
    defaults_known = False  # the server's settings decide what a request leaves unset

    @classmethod
    async def async_connect(cls, host: str, port: int) -> WyomingBackend:
        """Ask the server what it offers; raises ServerUnreachableError, NotYomiageServerError."""
        async with _connection(host, port) as client:
            await _write(client, Describe().event())
            info = await _next_of(client, "info")
        program = _yomiage_program(info.data, f"{host}:{port}")
        return cls(
            host,
            port,
            _voices(program),
            version=program.get("version"),
            aivishub_models=_aivishub_models(program),
        )

    @property
    def default_voice(self) -> str:
        speaker, styles = next(iter(self.voices.items()))
        return f"{speaker}/{styles[0]}"

    async def async_synthesize(self, text: str, options: RequestOptions) -> SpeechPiece:
        voice = self._checked_voice(options)
        started = time.monotonic()
        async with _connection(self.host, self.port) as client:
            request = Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event()
            await _write(client, _with_options(request, options))
            rate, pcm = await self._audio(client)
        return SpeechPiece(
            pcm=pcm,
            sample_rate=rate,
            characters=len(text),
            sentences=len(split_sentences(text)),
            compute_s=time.monotonic() - started,
        )

    def stream(
        self, text: AsyncIterable[str], options: RequestOptions
    ) -> AsyncGenerator[SpeechPiece]:
        start = Event(type=SYNTHESIZE_START, data={"voice": {"name": self._checked_voice(options)}})
        return self._stream(text, _with_options(start, options))

    async def async_install_aivishub_model(self, uuid: str, progress: InstallProgress) -> None:
        """The server downloads the newest version and swaps it in; its voices speak on
        meanwhile. Its download's failure comes with AivisHub's translation key."""
        async with _connection(self.host, self.port) as client:
            await _write(client, Event(type=AIVISHUB_UPDATE, data={"model": uuid}))
            while (
                event := await _next_of(
                    client, AIVISHUB_PROGRESS, AIVISHUB_UPDATED, timeout_s=UPDATE_TIMEOUT_S
                )
            ).type == AIVISHUB_PROGRESS:
                progress(float(event.data.get("fraction") or 0.0))

    async def async_close(self) -> None:
        """Nothing to release: every request has its own connection."""

    def diagnostics(self) -> dict[str, Any]:
        return {
            "backend": "wyoming",
            "server_version": self.version,
            "sample_rate": self.sample_rate,
            "default_voice": self.default_voice,
            "voices": self.voices,
        }

    # -- internals -------------------------------------------------------------------------------
    def _checked_voice(self, options: RequestOptions) -> str:
        """``speaker/style`` to ask for; unknown voices fail here, before any connection."""
        voice = options.get(CONF_VOICE) or self.default_voice
        speaker, _, style = voice.partition("/")
        styles = self.voices.get(speaker)
        if styles is None:
            raise UnknownVoiceError(f"the server has no speaker {speaker!r}")
        if style and style not in styles:
            raise UnknownVoiceError(f"speaker {speaker!r} has no style {style!r} on the server")
        return f"{speaker}/{style or styles[0]}"

    async def _stream(self, text: AsyncIterable[str], start: Event) -> AsyncGenerator[SpeechPiece]:
        async with _connection(self.host, self.port) as client:
            await _write(client, start)
            sender = asyncio.create_task(_send_text(client, text))
            try:
                async for piece in self._sentences(client, sender):
                    yield piece
                await sender  # a failing text source fails the request too
            finally:
                if not sender.done():
                    sender.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await sender  # its error, if any, has been raised above or is moot now

    async def _sentences(
        self, client: AsyncTcpClient, sender: asyncio.Task[None]
    ) -> AsyncIterator[SpeechPiece]:
        """Each sentence's audio as the server sends it, until ``synthesize-stopped``."""
        started = time.monotonic()
        while True:
            next_sentence = _next_of(client, "audio-start", SYNTHESIZE_STOPPED)
            event = await _unless_failed(sender, next_sentence)
            if event.type == SYNTHESIZE_STOPPED:
                return
            rate, pcm = await self._audio(client, event)
            now = time.monotonic()
            yield SpeechPiece(pcm, rate, characters=0, sentences=1, compute_s=now - started)
            started = now

    async def _audio(self, client: AsyncTcpClient, start: Event | None = None) -> tuple[int, bytes]:
        """(rate, PCM) of one ``audio-start`` … ``audio-stop`` answer."""
        if start is None:
            start = await _next_of(client, "audio-start")
        rate = _rate(start)
        self.sample_rate = rate
        pcm = bytearray()
        while (event := await _next_of(client, "audio-chunk", "audio-stop")).type != "audio-stop":
            pcm += event.payload or b""
        return rate, bytes(pcm)


def _with_options(request: Event, options: RequestOptions) -> Event:
    """The request carrying the synthesis options it sets (not the voice: that has its field)."""
    chosen = {name: value for name, value in options.items() if name != CONF_VOICE}
    if chosen:
        request.data[YOMIAGE_OPTIONS] = chosen
    return request


async def _send_text(client: AsyncTcpClient, text: AsyncIterable[str]) -> None:
    """Forward the text as it arrives (the server cuts sentences), then end the stream."""
    async for piece in text:
        if piece:
            await _write(client, Event(type=SYNTHESIZE_CHUNK, data={"text": piece}))
    await _write(client, Event(type=SYNTHESIZE_STOP))


async def _unless_failed(sender: asyncio.Task[None], read: Awaitable[_T]) -> _T:
    """``read``'s result, unless the text source fails first: then its error. The stream is
    dropped without ``synthesize-stop``, so the server never speaks the half sentence."""
    reading = asyncio.ensure_future(read)
    try:
        if not sender.done():
            await asyncio.wait({reading, sender}, return_when=asyncio.FIRST_COMPLETED)
        if sender.done() and not sender.cancelled() and (error := sender.exception()) is not None:
            raise error
        return await reading
    finally:
        if not reading.done():  # the text source failed, or we were cancelled
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, YomiageError):
                await reading


@asynccontextmanager
async def _connection(host: str, port: int) -> AsyncIterator[AsyncTcpClient]:
    client = AsyncTcpClient(host, port)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            await client.connect()
    except (OSError, TimeoutError) as err:
        raise ServerUnreachableError(f"cannot connect to {host}:{port} ({_reason(err)})") from err
    try:
        yield client
    finally:
        with contextlib.suppress(OSError):
            await client.disconnect()


async def _write(client: AsyncTcpClient, event: Event) -> None:
    try:
        await client.write_event(event)
    except OSError as err:
        raise ServerUnreachableError(_lost(client, err)) from err


async def _next_of(
    client: AsyncTcpClient, *types: str, timeout_s: float = EVENT_TIMEOUT_S
) -> Event:
    """The next event of one of ``types`` (others are skipped); ``error`` raises ServerError."""
    while True:
        try:
            async with asyncio.timeout(timeout_s):
                event = await client.read_event()
        except TimeoutError:
            raise ServerUnreachableError(
                f"no answer within {timeout_s:g} s (waiting for {' or '.join(types)})"
            ) from None
        except OSError as err:
            raise ServerUnreachableError(_lost(client, err)) from err
        if event is None:
            raise ServerUnreachableError(f"{client.host}:{client.port} closed the connection")
        if event.type == "error":
            raise ServerError(str(event.data.get("text") or "error"), str(event.data.get("code")))
        if event.type in types:
            return event


def _yomiage_program(info: Mapping[str, Any], address: str) -> Mapping[str, Any]:
    for program in info.get("tts") or []:
        if isinstance(program, Mapping) and program.get("name") == PROGRAM:
            return program
    names = [str(p.get("name")) for p in info.get("tts") or [] if isinstance(p, Mapping)]
    offered = ", ".join(names) or "no text-to-speech program"
    raise NotYomiageServerError(f"{address} offers {offered}, not {PROGRAM}")


def _voices(program: Mapping[str, Any]) -> dict[str, list[str]]:
    """Speaker -> styles from the server's ``speaker/style`` voice names (Japanese ones)."""
    voices: dict[str, list[str]] = {}
    for voice in program.get("voices") or []:
        name = str(voice.get("name") or "")
        speaker, _, style = name.partition("/")
        if speaker and style and LANGUAGE in (voice.get("languages") or []):
            voices.setdefault(speaker, []).append(style)
    if not voices:
        raise NotYomiageServerError("the Yomiage server offers no voices")
    return voices


def _aivishub_models(program: Mapping[str, Any]) -> dict[str, InstalledModel]:
    """The AivisHub models the server keeps up to date: voices attributed to a model's page,
    with its version (a server older than that protocol names none)."""
    models: dict[str, InstalledModel] = {}
    for voice in program.get("voices") or []:
        attribution = voice.get("attribution") or {}
        page, version = str(attribution.get("url") or ""), voice.get("version")
        if page.startswith(PAGE_ROOT) and version:
            uuid = page.removeprefix(PAGE_ROOT)
            models[uuid] = InstalledModel(uuid, str(attribution.get("name") or uuid), str(version))
    return models


def _rate(start: Event) -> int:
    rate = start.data.get("rate")
    if not isinstance(rate, int) or rate <= 0:
        raise ServerError(f"audio-start without a sample rate: {start.data}", "malformed_event")
    return rate


def _lost(client: AsyncTcpClient, err: BaseException) -> str:
    return f"lost the connection to {client.host}:{client.port} ({_reason(err)})"


def _reason(err: BaseException) -> str:
    return str(err) or type(err).__name__
