"""Streaming text input: synthesize-start, synthesize-chunk…, synthesize-stop.

Each sentence must be spoken as soon as its text is complete, before the next text arrives.
"""

from __future__ import annotations

import threading

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.tts import Synthesize
from yomiage_engine.synthesis.engine import Engine

from yomiage.wyoming_server import WyomingTtsServer

from .client import Reply, connect, engine_stream_pcm, read, read_until, wait_until_idle

PIECES = ["今日はいい天", "気ですね。散歩に", "行きましょう！公園まで", "歩けますか？"]
SENTENCES = ["今日はいい天気ですね。", "散歩に行きましょう！", "公園まで歩けますか？"]


def _start(voice: str | None = None) -> Event:
    return Event("synthesize-start", {"voice": {"name": voice}} if voice else {})


def _chunk(text: str) -> Event:
    return Event("synthesize-chunk", {"text": text})


async def _nothing_arrives(client: AsyncTcpClient) -> None:
    with pytest.raises(TimeoutError):
        await read(client, timeout_s=0.3)


async def test_each_sentence_is_spoken_before_the_next_text_arrives(
    server: WyomingTtsServer, engine: Engine
) -> None:
    voice = f"{next(iter(engine.voices))}/{next(iter(engine.voices.values()))[-1]}"
    async with connect(server) as client:
        await client.write_event(_start(voice))
        await client.write_event(_chunk(PIECES[0]))
        await _nothing_arrives(client)  # no sentence is complete yet
        await client.write_event(_chunk(PIECES[1]))
        first = await read_until(client, "audio-stop")
        await _nothing_arrives(client)
        await client.write_event(_chunk(PIECES[2]))
        second = await read_until(client, "audio-stop")
        await client.write_event(_chunk(PIECES[3]))
        third = await read_until(client, "audio-stop")  # its end mark came: no wait for more
        # The whole text, as clients send it for servers that cannot stream: ignored here.
        await client.write_event(Synthesize(text="".join(PIECES)).event())
        await client.write_event(Event("synthesize-stop"))
        rest = await read_until(client, "synthesize-stopped")
    assert Reply(rest).types == ["synthesize-stopped"]
    for sentence in (first, second, third):
        types = Reply(sentence).types
        assert types[0] == "audio-start" and types[-1] == "audio-stop"
        assert set(types[1:-1]) == {"audio-chunk"}
    audio = Reply(first + second + third)
    assert audio.pcm == engine_stream_pcm(engine, SENTENCES, voice)
    assert len(audio.starts) == 3


async def test_a_sentence_is_spoken_while_the_client_waits_for_its_audio(
    server: WyomingTtsServer, engine: Engine
) -> None:
    """An LLM that stops after its first sentence (a tool call) until it is heard."""
    async with connect(server) as client:
        await client.write_event(_start())
        await client.write_event(_chunk("おはようございます。"))
        first = Reply(await read_until(client, "audio-stop"))
        await client.write_event(_chunk("」今日は晴れです。"))  # a late mark goes with the next
        second = Reply(await read_until(client, "audio-stop"))
        await client.write_event(Event("synthesize-stop"))
        assert Reply(await read_until(client, "synthesize-stopped")).types == ["synthesize-stopped"]
    assert first.pcm == engine_stream_pcm(engine, ["おはようございます。"])
    assert len(second.starts) == 1 and second.pcm


async def test_a_stream_that_cannot_start_is_still_answered_at_its_end(
    server: WyomingTtsServer,
) -> None:
    async with connect(server) as client:
        await client.write_event(_start("nobody/Neutral"))
        await client.write_event(_chunk("こんにちは。"))
        await client.write_event(Event("synthesize-stop"))
        reply = Reply(await read_until(client, "synthesize-stopped"))
        await client.write_event(Describe().event())
        info = await read(client)
    assert [code for code, _ in reply.errors] == ["unknown_voice"]
    assert reply.types == ["error", "synthesize-stopped"]
    assert info is not None and info.type == "info"


async def test_a_stream_with_nothing_speakable_gets_an_error_then_stopped(
    server: WyomingTtsServer,
) -> None:
    async with connect(server) as client:
        await client.write_event(_start())
        await client.write_event(_chunk("。。。"))
        await client.write_event(Event("synthesize-stop"))
        reply = Reply(await read_until(client, "synthesize-stopped"))
    assert reply.types == ["error", "synthesize-stopped"]
    assert reply.errors[0][0] == "invalid_text"


async def test_stream_events_out_of_order_are_refused_and_the_open_stream_goes_on(
    server: WyomingTtsServer, engine: Engine
) -> None:
    async with connect(server) as client:
        await client.write_event(_chunk("こんにちは。"))
        no_stream = Reply(await read_until(client, "error"))
        await client.write_event(_start())
        await client.write_event(_start())
        already_open = Reply(await read_until(client, "error"))
        await client.write_event(_chunk(SENTENCES[0]))
        await client.write_event(Event("synthesize-stop"))
        spoken = Reply(await read_until(client, "synthesize-stopped"))
        await client.write_event(Event("synthesize-stop"))
        stop_without_stream = Reply(await read_until(client, "error"))
    assert no_stream.errors[0][0] == "no_stream"
    assert already_open.errors[0][0] == "stream_already_open"
    assert stop_without_stream.errors[0][0] == "no_stream"
    assert spoken.pcm == engine_stream_pcm(engine, SENTENCES[:1])


async def test_a_client_leaving_mid_stream_does_not_stop_the_server(
    server: WyomingTtsServer, engine: Engine
) -> None:
    async with connect(server) as client:
        await client.write_event(_start())
        await client.write_event(_chunk("".join(SENTENCES[:2]) + "まだ"))
        await read_until(client, "audio-chunk")  # leave while sentences are being spoken
    async with connect(server) as client:
        await client.write_event(_start())
        await client.write_event(_chunk(SENTENCES[2]))
        await client.write_event(Event("synthesize-stop"))
        reply = Reply(await read_until(client, "synthesize-stopped"))
    assert reply.pcm == engine_stream_pcm(engine, SENTENCES[2:])
    await wait_until_idle(server)
    assert not [t for t in threading.enumerate() if t.name.startswith("yomiage-wyoming")]
