"""Bad requests get an ``error`` event and the connection stays usable."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from wyoming.event import Event, async_read_event
from yomiage_engine.synthesis.engine import Engine

from yomiage.wyoming_protocol import MAX_PAYLOAD_BYTES
from yomiage.wyoming_server import WyomingTtsServer

from .client import TIMEOUT_S, address, engine_pcm
from .conftest import ERROR_GRACE_S

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _line(header: dict[str, object]) -> bytes:
    return json.dumps(header).encode() + b"\n"


def _synthesize(**data: object) -> bytes:
    return _line({"type": "synthesize", "data": data})


# (what is sent, the error code, words the message must contain)
BAD_REQUESTS = [
    (b"this is not json\n", "malformed_event", "not JSON"),
    (b'["a", "list"]\n', "malformed_event", "JSON object"),
    (_line({"data": {"text": "x"}}), "malformed_event", "no 'type'"),
    (_line({"type": "synthesize", "data": "text"}), "malformed_event", "'data'"),
    (_line({"type": "synthesize", "data_length": 9}) + b"not json!", "malformed_event", "data"),
    (_line({"type": "synthesize", "data_length": -1}), "malformed_event", "data_length"),
    (
        _line({"type": "synthesize", "payload_length": MAX_PAYLOAD_BYTES + 1})
        + bytes(MAX_PAYLOAD_BYTES + 1),
        "malformed_event",
        "payload is larger",
    ),
    (_line({"type": "synthesize"}), "malformed_event", "'text'"),
    (_synthesize(text=7), "malformed_event", "'text'"),
    (_synthesize(text="こんにちは。", voice="Neutral"), "malformed_event", "'voice'"),
    (_synthesize(text=""), "invalid_text", "empty"),
    (_synthesize(text="あ" * 6000), "invalid_text", "limit"),
    (_synthesize(text="😀"), "invalid_text", "nothing speakable"),
    (_synthesize(text="こんにちは。", voice={"name": "nobody"}), "unknown_voice", "'nobody'"),
    (
        _synthesize(text="こんにちは。", voice={"language": "en"}),
        "unsupported_language",
        "'en'",
    ),
    (_synthesize(text="こんにちは。", yomiage_options=[1]), "invalid_option", "JSON object"),
    (_synthesize(text="こんにちは。", yomiage_options={"speed": 9}), "invalid_option", "speed"),
    (_synthesize(text="こんにちは。", yomiage_options={"speed": "x"}), "invalid_option", "number"),
    (_synthesize(text="こんにちは。", yomiage_options={"loud": 1}), "invalid_option", "'loud'"),
    (
        _synthesize(text="こんにちは。", yomiage_options={"voice": "tiny-a/Neutral"}),
        "invalid_option",
        "'voice'",
    ),
    (_line({"type": "transcribe"}), "unsupported_event", "'transcribe'"),
    (_line({"type": "synthesize-chunk", "data": {"text": "a"}}), "no_stream", "synthesize-start"),
]


@asynccontextmanager
async def _connection(server: WyomingTtsServer) -> AsyncIterator[Connection]:
    reader, writer = await asyncio.open_connection(*address(server))
    try:
        yield reader, writer
    finally:
        writer.close()
        await writer.wait_closed()


async def _send(connection: Connection, raw: bytes) -> Event:
    reader, writer = connection
    writer.write(raw)
    await writer.drain()
    event = await asyncio.wait_for(async_read_event(reader), TIMEOUT_S)
    assert event is not None
    return event


async def test_every_bad_request_gets_an_error_and_the_connection_goes_on(
    server: WyomingTtsServer, engine: Engine
) -> None:
    async with _connection(server) as connection:
        for raw, code, words in BAD_REQUESTS:
            event = await _send(connection, raw)
            assert (event.type, event.data["code"]) == ("error", code), raw[:80]
            assert words in event.data["text"], event.data["text"]
        assert (await _send(connection, _line({"type": "describe"}))).type == "info"
        pong = await _send(connection, _line({"type": "ping", "data": {"text": "1"}}))
        assert (pong.type, pong.data["text"]) == ("pong", "1")
        start = await _send(connection, _synthesize(text="こんにちは。"))
        audio = await _read_audio(connection[0])
    assert start.type == "audio-start"
    assert audio == engine_pcm(engine, "こんにちは。")


async def _read_audio(reader: asyncio.StreamReader) -> bytes:
    pcm = b""
    while (event := await asyncio.wait_for(async_read_event(reader), TIMEOUT_S)) is not None:
        if event.type == "audio-stop":
            return pcm
        assert event.type == "audio-chunk"
        pcm += event.payload or b""
    raise AssertionError("connection closed before audio-stop")


async def test_a_huge_event_line_gets_one_error_and_the_connection_goes_on(
    server: WyomingTtsServer,
) -> None:
    huge = _synthesize(text="a" * (10 << 20))  # a 10 MB header line
    async with _connection(server) as (reader, writer):
        writer.write(huge + _line({"type": "describe"}))
        await writer.drain()
        error = await asyncio.wait_for(async_read_event(reader), TIMEOUT_S)
        following = await asyncio.wait_for(async_read_event(reader), TIMEOUT_S)
    assert error is not None and (error.type, error.data["code"]) == ("error", "malformed_event")
    assert "too long" in error.data["text"]
    assert following is not None and following.type == "info", "one error, then the next event"


async def test_a_client_silent_after_an_error_is_let_go(server: WyomingTtsServer) -> None:
    """Home Assistant's Wyoming client ignores errors and waits for audio; closing frees it."""
    async with _connection(server) as connection:
        error = await _send(connection, _synthesize(text=""))
        started = asyncio.get_running_loop().time()
        closed = await asyncio.wait_for(async_read_event(connection[0]), TIMEOUT_S)
        waited = asyncio.get_running_loop().time() - started
    assert error.type == "error" and closed is None
    assert ERROR_GRACE_S * 0.8 <= waited < ERROR_GRACE_S + 5


async def test_a_quiet_client_without_errors_is_not_disconnected(
    server: WyomingTtsServer,
) -> None:
    async with _connection(server) as connection:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(async_read_event(connection[0]), ERROR_GRACE_S * 2)
        assert (await _send(connection, _line({"type": "describe"}))).type == "info"
