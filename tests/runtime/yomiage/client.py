"""A small Wyoming client for the tests, on the ``wyoming`` library's own client and events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeVoice
from yomiage_engine.synthesis.engine import Engine
from yomiage_engine.synthesis.options import SynthesisOptions

from yomiage.wyoming_server import WyomingTtsServer

QUIET = SynthesisOptions(noise=0.0, noise_w=0.0)  # deterministic graphs
TIMEOUT_S = 30.0
THREE_SENTENCES = "今日はいい天気ですね。散歩に行きましょう！公園まで歩けますか？"


def address(server: WyomingTtsServer) -> tuple[str, int]:
    parsed = urlparse(server.address)
    assert parsed.hostname is not None and parsed.port is not None
    return parsed.hostname, parsed.port


@asynccontextmanager
async def connect(server: WyomingTtsServer) -> AsyncIterator[AsyncTcpClient]:
    async with AsyncTcpClient(*address(server)) as client:
        yield client


async def read(client: AsyncTcpClient, timeout_s: float = TIMEOUT_S) -> Event | None:
    event: Event | None = await asyncio.wait_for(client.read_event(), timeout_s)
    return event


async def read_until(client: AsyncTcpClient, *types: str) -> list[Event]:
    """Events up to and including the first of one of ``types``."""
    events: list[Event] = []
    while True:
        event = await read(client)
        assert event is not None, f"connection closed; got {[e.type for e in events]}"
        events.append(event)
        if event.type in types:
            return events


@dataclass
class Reply:
    events: list[Event]

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]

    @property
    def pcm(self) -> bytes:
        return b"".join(
            AudioChunk.from_event(e).audio for e in self.events if e.type == "audio-chunk"
        )

    @property
    def starts(self) -> list[AudioStart]:
        return [AudioStart.from_event(e) for e in self.events if e.type == "audio-start"]

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(e.data["code"], e.data["text"]) for e in self.events if e.type == "error"]


async def synthesize(client: AsyncTcpClient, text: str, voice: str | None = None) -> Reply:
    """One whole-text request: its events up to audio-stop (or a lone error)."""
    request = Synthesize(text=text, voice=SynthesizeVoice(name=voice) if voice else None)
    await client.write_event(request.event())
    events = await read_until(client, "audio-stop", "error")
    if events[-1].type == "error" and "audio-start" in [e.type for e in events]:
        events += await read_until(client, "audio-stop")
    return Reply(events)


async def wait_until_idle(server: WyomingTtsServer) -> None:
    """Until every connection has been closed and cleaned up by the server."""
    for _ in range(500):
        if server.clients == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{server.clients} connections still open")


def engine_pcm(engine: Engine, text: str, voice: str | None = None) -> bytes:
    """What the engine itself says for ``text`` (the reference for what the server sends)."""
    audio = engine.synthesize(text, QUIET.with_changes(voice=voice)).audio
    return audio.astype("<i2").tobytes()


def engine_stream_pcm(engine: Engine, sentences: Iterable[str], voice: str | None = None) -> bytes:
    chunks = engine.stream_sentences(iter(list(sentences)), QUIET.with_changes(voice=voice))
    return b"".join(chunk.pcm.astype("<i2").tobytes() for chunk in chunks)
