"""Wyoming text-to-speech server: the engine for Home Assistant OS (the add-on) and Wyoming clients.

``yomiage serve --uri tcp://0.0.0.0:10200 --bundle DIR`` (or ``python -m
yomiage.wyoming_server`` with the same arguments). What a client gets:

- ``describe`` → ``info``: every speaker/style of the bundle is a voice (language ``ja``), and
  streaming text input is advertised.
- ``synthesize`` {text, voice?} → ``audio-start``, ``audio-chunk``…, ``audio-stop``: 16-bit mono
  PCM at the bundle's rate, sent sentence by sentence as each is ready, natural pauses included.
- ``synthesize-start`` {voice?}, ``synthesize-chunk`` {text}…, ``synthesize-stop``: each sentence is
  spoken as soon as its text is complete (``audio-start``/``-chunk``/``-stop`` per sentence), then
  ``synthesize-stopped``. A ``synthesize`` inside a stream is the copy clients send for older
  servers and is ignored.
- ``yomiage-aivishub-update`` {model} (a server started with ``--aivishub``): that AivisHub model's
  newest version fetched and loaded (``yomiage-aivishub-progress`` while it downloads), then
  ``yomiage-aivishub-updated`` {model, version}; requests go on with the engine they began with,
  later ones get the new one (voice_updates.py).
- Anything wrong → ``error`` {text, code}, and the connection stays usable. A client that stays
  silent for ``error_grace_s`` after an error outside a stream is disconnected: Home Assistant's
  Wyoming client ignores ``error`` events and would otherwise wait for audio forever; the closed
  connection makes it fail at once.

One Engine serves every client. Engine calls block, so each connection runs them on its own worker
thread (a stream waits there for its next sentence); the engine takes model runs in turn, sentence
by sentence, so a long text never holds up another client for more than a sentence.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from wyoming.event import Event, async_write_event
from wyoming.ping import Pong
from yomiage_engine import (
    AudioChunk,
    InvalidOptionError,
    SynthesisOptions,
    UnknownVoiceError,
    YomiageError,
)
from yomiage_engine.wyoming_contract import (
    AIVISHUB_UPDATE,
    SYNTHESIZE,
    SYNTHESIZE_CHUNK,
    SYNTHESIZE_START,
    SYNTHESIZE_STOP,
)

from .command_flags import add_engine_flags, add_synthesis_flags, engine_from, synthesis_options
from .voice_updates import AivisHubVoices
from .wyoming_protocol import (
    MalformedEventError,
    RequestError,
    aivishub_progress,
    aivishub_updated,
    audio_chunks,
    audio_start,
    audio_stop,
    error_event,
    info_event,
    read_event,
    request_text,
    requested_model,
    requested_options,
    requested_voice,
    synthesize_stopped,
)
from .wyoming_stream import TextStream, close_chunks

if TYPE_CHECKING:
    from yomiage_engine import Engine

_LOGGER = logging.getLogger(__name__)

DEFAULT_URI = "tcp://0.0.0.0:10200"
ERROR_GRACE_S = 5.0
_CLOSE_TIMEOUT_S = 5.0
_T = TypeVar("_T")


class _ClientGoneError(Exception):
    """The client closed the connection; stop working for it."""


# -- the server --------------------------------------------------------------------------------
class WyomingTtsServer:
    """Listens on a ``tcp://HOST:PORT`` or ``unix://PATH`` URI and serves every client."""

    def __init__(
        self,
        engine: Engine,
        *,
        voice: str | None = None,
        options: SynthesisOptions | None = None,
        error_grace_s: float = ERROR_GRACE_S,
        aivishub: AivisHubVoices | None = None,
    ) -> None:
        """``voice``: for requests that name none (None: the bundle's first); ``options``: the
        synthesis settings of every request, under what a request's ``yomiage_options`` set;
        ``aivishub``: the AivisHub models whose updates clients may ask for."""
        defaults = options or SynthesisOptions()
        if voice is not None:
            defaults = defaults.with_changes(voice=voice)
        if defaults.voice is not None:
            _check_voice(engine, defaults.voice)
        self.error_grace_s = error_grace_s
        self.aivishub = aivishub
        self.updating = asyncio.Lock()  # one model update at a time
        self._defaults = defaults.validated()
        self.use(engine)
        self._listener: asyncio.Server | None = None
        self._socket_path: Path | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def use(self, engine: Engine) -> None:
        """Serve new requests with ``engine`` (those under way keep the one they began with)."""
        self.engine = engine
        origins = self.aivishub.origins(engine) if self.aivishub is not None else None
        self.info = info_event(engine.voices, _version(), origins)

    def options_for(self, event: Event) -> SynthesisOptions:
        """The request's voice and ``yomiage_options`` over the server's settings."""
        voice = requested_voice(event)
        options = self._defaults if voice is None else self._defaults.with_changes(voice=voice)
        return options.with_values(requested_options(event))

    async def start(self, uri: str) -> None:
        """Bind and start accepting clients (port 0 picks a free port: see ``address``)."""
        scheme, host, port, path = _parse_uri(uri)
        if scheme == "unix":
            self._socket_path = Path(path)
            self._socket_path.unlink(missing_ok=True)  # a stale socket from a previous run
            self._listener = await asyncio.start_unix_server(self._serve_client, path=path)
        else:
            self._listener = await asyncio.start_server(self._serve_client, host, port)
        _LOGGER.info("serving %d voices on %s", _voice_count(self.engine), self.address)

    @property
    def address(self) -> str:
        """Where the server listens, as a URI (the real port when 0 was asked for)."""
        if self._listener is None:
            raise RuntimeError("the server has not been started")
        if self._socket_path is not None:
            return f"unix://{self._socket_path}"
        host, port = self._listener.sockets[0].getsockname()[:2]
        return f"tcp://{host}:{port}"

    @property
    def clients(self) -> int:
        """Connections open now."""
        return len(self._connections)

    async def stop(self) -> None:
        """Stop listening and end every connection (each finishes the sentence it is on)."""
        if self._listener is not None:
            self._listener.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None
        if self._socket_path is not None:
            self._socket_path.unlink(missing_ok=True)

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await _Connection(self, reader, writer).run()
        finally:
            self._connections.discard(task)


def _parse_uri(uri: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of ``tcp://HOST:PORT`` or ``unix://PATH``."""
    parsed = urlparse(uri)
    try:
        port = parsed.port
    except ValueError:
        port = None
    if parsed.scheme == "tcp" and parsed.hostname and port is not None:
        return "tcp", parsed.hostname, port, ""
    if parsed.scheme == "unix" and (parsed.netloc or parsed.path):
        return "unix", "", 0, parsed.netloc + parsed.path
    raise InvalidOptionError(
        f"--uri must look like tcp://HOST:PORT or unix://PATH, not {uri!r}", "uri"
    )


def _check_voice(engine: Engine, voice: str) -> None:
    speaker, _, style = voice.partition("/")
    styles = engine.voices.get(speaker)
    if styles is None:
        raise UnknownVoiceError(
            f"unknown speaker {speaker!r}; speakers: {', '.join(engine.voices)}"
        )
    if style and style not in styles:
        raise UnknownVoiceError(
            f"speaker {speaker!r} has no style {style!r}; styles: {', '.join(styles)}"
        )


def _voice_count(engine: Engine) -> int:
    return sum(len(styles) for styles in engine.voices.values())


def _version() -> str | None:
    try:
        return metadata.version("yomiage")
    except metadata.PackageNotFoundError:
        return None


# -- one client --------------------------------------------------------------------------------
@dataclass
class _OpenStream:
    """A stream between synthesize-start and synthesize-stop.

    ``text`` is None when the stream could not start (the error has been sent): its chunks are
    dropped and synthesize-stop is still answered, so a streaming client is never left waiting.
    """

    text: TextStream | None = None
    pump: asyncio.Task[None] | None = None


class _Connection:
    def __init__(
        self, server: WyomingTtsServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._server = server
        self._engine = server.engine
        self._reader = reader
        self._writer = writer
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="yomiage-wyoming")
        self._stream: _OpenStream | None = None
        self._error_pending = False  # an error was sent outside a stream: see the module doc
        self._handlers: dict[str, Callable[[Event], Awaitable[None]]] = {
            "describe": self._describe,
            "ping": self._ping,
            SYNTHESIZE: self._synthesize,
            SYNTHESIZE_START: self._start_stream,
            SYNTHESIZE_CHUNK: self._stream_text,
            SYNTHESIZE_STOP: self._stop_stream,
            AIVISHUB_UPDATE: self._update_voice,
        }

    async def run(self) -> None:
        try:
            while (event := await self._next_event()) is not None:
                await self._handle(event)
        except _ClientGoneError:
            pass
        finally:
            await self._close()

    async def _next_event(self) -> Event | None:
        """The next well-formed event; None when the client is gone (or silent after an error)."""
        while True:
            idle_limit = self._server.error_grace_s if self._error_pending else None
            try:
                async with asyncio.timeout(idle_limit):
                    event = await read_event(self._reader)
            except MalformedEventError as err:
                await self._send_error(str(err), err.code)
                continue
            except TimeoutError:
                _LOGGER.debug("closing a connection that stayed silent after an error")
                return None
            except (ConnectionError, OSError):
                return None
            self._error_pending = False
            return event

    async def _handle(self, event: Event) -> None:
        handler = self._handlers.get(event.type)
        try:
            if handler is None:
                raise RequestError(
                    f"this text-to-speech server does not handle {event.type!r} events",
                    "unsupported_event",
                )
            await handler(event)
        except _ClientGoneError:
            raise
        except Exception as err:  # the connection (and the server) must outlive any request
            await self._send_failure(err)

    # -- events ------------------------------------------------------------------------------
    async def _describe(self, event: Event) -> None:
        await self._write(self._server.info)

    async def _ping(self, event: Event) -> None:
        text = event.data.get("text")
        await self._write(Pong(text=text if isinstance(text, str) else None).event())

    async def _synthesize(self, event: Event) -> None:
        if self._stream is not None:
            return  # the whole text, sent inside a stream for servers that cannot stream
        text = request_text(event)
        options = self._server.options_for(event)
        chunks = await self._blocking(self._engine.stream, text, options)  # validates first
        await self._write(audio_start(self._engine.sample_rate))
        try:
            while (chunk := await self._blocking(next, chunks, None)) is not None:
                await self._write_audio(chunk)
        except _ClientGoneError:
            raise
        except Exception as err:  # audio has started: say why it ends early, then end it
            await self._send_failure(err)
        finally:
            await self._blocking(close_chunks, chunks)
        await self._write(audio_stop())

    async def _start_stream(self, event: Event) -> None:
        if self._stream is not None:
            raise RequestError(
                "a stream is already open: send synthesize-stop first", "stream_already_open"
            )
        self._stream = stream = _OpenStream()
        options = self._server.options_for(event)
        stream.text = await self._blocking(TextStream, self._engine, options)
        stream.pump = asyncio.create_task(self._pump(stream.text))

    async def _stream_text(self, event: Event) -> None:
        stream = self._open_stream(event)
        text = request_text(event)
        if stream.text is not None:
            stream.text.add(text)

    async def _stop_stream(self, event: Event) -> None:
        stream = self._open_stream(event)
        if stream.text is not None and stream.pump is not None:
            stream.text.finish()
            await stream.pump  # the last sentences' audio (errors in it belong to the stream)
        self._stream = None
        await self._write(synthesize_stopped())

    def _open_stream(self, event: Event) -> _OpenStream:
        if self._stream is None:
            raise RequestError(
                f"{event.type} outside a stream: send synthesize-start first", "no_stream"
            )
        return self._stream

    async def _pump(self, text: TextStream) -> None:
        """Send each sentence's audio as soon as the engine has it (the start of the first one
        early), between audio-start and audio-stop, until the stream ends."""
        try:
            while (chunk := await self._blocking(text.next_chunk)) is not None:
                if chunk.starts_sentence:
                    await self._write(audio_start(chunk.sample_rate))
                await self._write_audio(chunk)
                if chunk.ends_sentence:
                    await self._write(audio_stop())
        except _ClientGoneError:
            text.cancel()
        except Exception as err:
            text.cancel()
            with contextlib.suppress(_ClientGoneError):
                await self._send_failure(err)
        finally:
            await self._blocking(text.close)

    async def _update_voice(self, event: Event) -> None:
        """An AivisHub model's newest version, loaded beside the engine that goes on speaking;
        the download's progress sent as it goes."""
        updates = self._server.aivishub
        if updates is None:
            raise RequestError("this server offers no AivisHub voices to update", "unknown_model")
        model = requested_model(event)
        loop = asyncio.get_running_loop()
        done: asyncio.Queue[float] = asyncio.Queue()

        def progress(fraction: float) -> None:  # the worker thread's: hop to the loop
            loop.call_soon_threadsafe(done.put_nowait, fraction)

        async def relay() -> None:
            sent = -1.0
            while True:
                fraction = await done.get()
                if fraction >= sent + 0.01 or fraction >= 1.0:
                    sent = fraction
                    await self._write(aivishub_progress(model, fraction))

        async with self._server.updating:
            relaying = asyncio.create_task(relay())
            try:
                engine, version = await self._blocking(updates.update, model, progress)
            finally:
                relaying.cancel()
                await asyncio.gather(relaying, return_exceptions=True)
            if engine is not None:
                self._server.use(engine)
                _LOGGER.info("AivisHub model %s updated to %s", model, version)
        await self._write(aivishub_updated(model, version))

    # -- writing -----------------------------------------------------------------------------
    async def _write_audio(self, chunk: AudioChunk) -> None:
        for event in audio_chunks(chunk.pcm.astype("<i2").tobytes(), chunk.sample_rate):
            await self._write(event)

    async def _send_failure(self, err: Exception) -> None:
        if isinstance(err, RequestError):
            await self._send_error(str(err), err.code)
        elif isinstance(err, YomiageError):
            await self._send_error(str(err), err.translation_key)
        else:
            _LOGGER.exception("request failed")
            await self._send_error(f"internal error: {err}", "internal_error")

    async def _send_error(self, message: str, code: str) -> None:
        _LOGGER.info("error for a client (%s): %s", code, message)
        self._error_pending = self._stream is None
        await self._write(error_event(message, code))

    async def _write(self, event: Event) -> None:
        if self._writer.is_closing():
            raise _ClientGoneError
        try:
            await async_write_event(event, self._writer)
        except (ConnectionError, OSError) as err:
            raise _ClientGoneError from err

    async def _blocking(self, function: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._worker, function, *args)

    async def _close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and stream.text is not None and stream.pump is not None:
            stream.text.cancel()  # the worker stops after the sentence it is on
            stream.pump.cancel()  # it may be waiting to write to a client that reads nothing
            await asyncio.gather(stream.pump, return_exceptions=True)
        # Joined off the loop: at most the sentence the worker is on (a cancelled request).
        # A stop that cancels this connection still waits for the join: the connection ends
        # only when its thread has, so nothing that checks for threads afterwards races it.
        joined = asyncio.ensure_future(asyncio.to_thread(self._worker.shutdown))
        cancelled = False
        while not joined.done():
            try:
                await asyncio.shield(joined)
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            self._writer.transport.abort()
            raise asyncio.CancelledError
        self._writer.close()
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT_S):
                await self._writer.wait_closed()
        except (TimeoutError, ConnectionError, OSError):
            self._writer.transport.abort()  # unsent audio for a client that stopped reading


# -- command line ------------------------------------------------------------------------------


def add_serve_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``serve`` to the ``yomiage`` command (its handler is ``serve_command``)."""
    serve = subparsers.add_parser(
        "serve",
        help="Wyoming text-to-speech server (Home Assistant's Wyoming integration)",
        description="Serve a voice bundle over the Wyoming protocol.",
    )
    _add_serve_arguments(serve)
    serve.set_defaults(handler=serve_command)
    return serve


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--uri", default=DEFAULT_URI, help=f"where to listen ({DEFAULT_URI})")
    add_engine_flags(parser)
    parser.add_argument(
        "--voice",
        default="default",
        help="speaker/style for requests that name no voice ('default': the bundle's first)",
    )
    add_synthesis_flags(parser, "requests that do not set it")
    parser.add_argument(
        "--aivishub",
        action="append",
        default=[],
        metavar="MODEL",
        help="an AivisHub model (its page URL or UUID) in --bundle whose updates clients may "
        "install; repeat it (fetch each first: yomiage fetch MODEL --to BUNDLE)",
    )
    parser.add_argument(
        "--zeroconf",
        nargs="?",
        const="",
        default=None,
        metavar="NAME",
        help="announce the server on the local network, as NAME (default: yomiage-<host>), so "
        "that Home Assistant finds it (TCP only)",
    )
    parser.add_argument("--debug", action="store_true", help="log every request")


def serve_command(args: argparse.Namespace) -> int:
    """Load the bundle, then serve until SIGTERM / SIGINT."""
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    scheme, *_ = _parse_uri(args.uri)  # a bad URI fails before minutes of model loading
    if args.zeroconf is not None and scheme != "tcp":
        raise YomiageError("--zeroconf announces a TCP server: give a tcp:// --uri")
    aivishub = (
        AivisHubVoices.of(args.bundle, args.aivishub, lambda: engine_from(args))
        if args.aivishub
        else None
    )
    engine = engine_from(args)
    try:
        engine.load_all()  # the first request should not pay for session creation
        voice = None if args.voice == "default" else args.voice
        server = WyomingTtsServer(
            engine, voice=voice, options=synthesis_options(args, None), aivishub=aivishub
        )
        asyncio.run(_serve_until_signalled(server, args.uri, args.zeroconf))
        engine = server.engine  # an update may have replaced it
    finally:
        engine.close()
    return 0


async def _serve_until_signalled(
    server: WyomingTtsServer, uri: str, zeroconf_name: str | None
) -> None:
    """``zeroconf_name``: announce the server under it ("" for the default; None: not)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await server.start(uri)
    announcement = None
    if zeroconf_name is not None:
        from .discovery import Announcement, default_name, outward_address, service_info

        _, host, port, _ = _parse_uri(server.address)
        address = outward_address() if host in ("0.0.0.0", "") else host
        announcement = Announcement(service_info(zeroconf_name or default_name(), address, port))
        await announcement.start()
    try:
        await stop.wait()
    finally:
        _LOGGER.info("stopping")
        if announcement is not None:
            await announcement.stop()
        await server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="yomiage-wyoming", description="Serve a voice bundle over the Wyoming protocol."
    )
    _add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return serve_command(args)
    except YomiageError as err:
        print(f"yomiage serve: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
