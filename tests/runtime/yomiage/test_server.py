"""The Wyoming server driven by the ``wyoming`` client library: voices, whole-text synthesis,
several clients at once, clients that leave early, and the ``serve`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice
from yomiage_engine.errors import InvalidOptionError, UnknownVoiceError
from yomiage_engine.synthesis.engine import Engine
from yomiage_engine.wyoming_contract import ZEROCONF_MARK, ZEROCONF_TYPE

from yomiage import wyoming_server
from yomiage.discovery import default_name, service_info
from yomiage.wyoming_protocol import SAMPLES_PER_CHUNK
from yomiage.wyoming_server import (
    WyomingTtsServer,
    add_serve_command,
    main,
)

from ..voice_files import BROKEN
from .client import (
    QUIET,
    THREE_SENTENCES,
    Reply,
    connect,
    engine_pcm,
    read,
    read_until,
    synthesize,
    wait_until_idle,
)

LONG_TEXT = "".join(f"{n}番目の文を読みます。" for n in range(1, 9))


def _all_voices(engine: Engine) -> list[str]:
    return [f"{speaker}/{style}" for speaker, styles in engine.voices.items() for style in styles]


async def test_describe_lists_every_speaker_and_style_as_a_japanese_voice(
    server: WyomingTtsServer, engine: Engine
) -> None:
    async with connect(server) as client:
        await client.write_event(Describe().event())
        event = await read(client)
    assert event is not None and Info.is_type(event.type)
    (program,) = Info.from_event(event).tts
    assert program.installed and program.name == "yomiage"
    assert [voice.name for voice in program.voices] == _all_voices(engine)
    assert all(voice.languages == ["ja"] and voice.installed for voice in program.voices)
    assert event.data["tts"][0]["supports_synthesize_streaming"] is True


async def test_synthesize_sends_the_engine_audio_as_16_bit_pcm(
    server: WyomingTtsServer, engine: Engine
) -> None:
    voice = _all_voices(engine)[-1]
    async with connect(server) as client:
        reply = await synthesize(client, THREE_SENTENCES, voice)
    assert reply.types[0] == "audio-start" and reply.types[-1] == "audio-stop"
    assert reply.types.count("audio-start") == 1 and not reply.errors
    (start,) = reply.starts
    assert (start.rate, start.width, start.channels) == (engine.sample_rate, 2, 1)
    assert reply.pcm == engine_pcm(engine, THREE_SENTENCES, voice)
    chunk_sizes = [len(e.payload or b"") for e in reply.events if e.type == "audio-chunk"]
    assert max(chunk_sizes) == SAMPLES_PER_CHUNK * 2


async def test_voice_can_be_named_in_every_wyoming_form(
    server: WyomingTtsServer, engine: Engine
) -> None:
    speaker, styles = next(reversed(engine.voices.items()))
    text = "こんにちは。"
    async with connect(server) as client:
        by_path = await synthesize(client, text, f"{speaker}/{styles[-1]}")
        await client.write_event(
            Synthesize(text=text, voice=SynthesizeVoice(name=speaker, speaker=styles[-1])).event()
        )
        by_speaker_field = await read_until(client, "audio-stop")
        by_language = []
        # {"language": "ja"}, and {"name": "ja"}: what wyoming 1.5's from_dict turns it into.
        for voice in ({"language": "ja"}, {"name": "ja"}):
            await client.write_event(Event("synthesize", {"text": text, "voice": voice}))
            by_language.append(Reply(await read_until(client, "audio-stop")).pcm)
        default = await synthesize(client, text)
    assert b"".join(e.payload or b"" for e in by_speaker_field) == by_path.pcm
    assert by_path.pcm == engine_pcm(engine, text, f"{speaker}/{styles[-1]}")
    assert by_language == [default.pcm, default.pcm]
    assert default.pcm == engine_pcm(engine, text)
    assert default.pcm != by_path.pcm  # the voice really changes the audio


async def test_yomiage_options_set_a_request_over_the_server_settings(
    server: WyomingTtsServer, engine: Engine
) -> None:
    """The documented ``yomiage_options`` (what a Yomiage server entry sends) take the same
    values as the engine's options; a request without them keeps the server's settings."""
    changes = {"speed": 1.3, "volume": -6.0, "lead_silence": 250.0, "normalize": False}
    options = QUIET.with_values(changes)
    async with connect(server) as client:
        event = Synthesize(text=THREE_SENTENCES).event()
        event.data["yomiage_options"] = changes
        await client.write_event(event)
        whole = Reply(await read_until(client, "audio-stop"))
        start = Event("synthesize-start", {"yomiage_options": changes})
        await client.write_event(start)
        await client.write_event(Event("synthesize-chunk", {"text": THREE_SENTENCES}))
        await client.write_event(Event("synthesize-stop"))
        streamed = Reply(await read_until(client, "synthesize-stopped"))
        plain = await synthesize(client, THREE_SENTENCES)
    # Sent whole inside a stream (synthesize-start, one chunk, stop), the text is spoken as a
    # whole message, as a synthesize event's is.
    for reply, chunks in (
        (whole, engine.stream(THREE_SENTENCES, options)),
        (streamed, engine.stream(THREE_SENTENCES, options)),
    ):
        expected = np.concatenate([chunk.pcm for chunk in chunks]).astype(np.int32)
        got = np.frombuffer(reply.pcm, dtype="<i2")
        # Where the first piece is cut depends on this machine's decoding speed just then: a
        # sample may round to its neighbour (test_synthesis.py).
        assert got.shape == expected.shape and np.abs(got - expected).max() <= 1
    assert plain.pcm == engine_pcm(engine, THREE_SENTENCES) != whole.pcm


async def test_two_clients_at_once_are_both_served_and_a_short_text_is_not_held_up(
    server: WyomingTtsServer, engine: Engine
) -> None:
    short = "おはようございます。"
    long_is_speaking = asyncio.Event()
    finished: list[str] = []

    async def long_client() -> bytes:
        async with connect(server) as client:
            await client.write_event(Synthesize(text=LONG_TEXT).event())
            events = await read_until(client, "audio-chunk")
            long_is_speaking.set()
            events += await read_until(client, "audio-stop")
        finished.append("long")
        return Reply(events).pcm

    async def short_client() -> bytes:
        await long_is_speaking.wait()
        async with connect(server) as client:
            reply = await synthesize(client, short)
        finished.append("short")
        return reply.pcm

    long_pcm, short_pcm = await asyncio.gather(long_client(), short_client())
    assert long_pcm == engine_pcm(engine, LONG_TEXT)
    assert short_pcm == engine_pcm(engine, short)
    assert finished == ["short", "long"]  # served between two of the long text's sentences


async def test_a_client_leaving_mid_text_does_not_stop_the_server(
    server: WyomingTtsServer, engine: Engine
) -> None:
    async with connect(server) as client:
        await client.write_event(Synthesize(text=LONG_TEXT).event())
        await read_until(client, "audio-chunk")  # then hang up in the middle of the audio
    async with connect(server) as client:
        reply = await synthesize(client, "こんにちは。")
    assert reply.pcm == engine_pcm(engine, "こんにちは。")
    await wait_until_idle(server)
    assert not [t for t in threading.enumerate() if t.name.startswith("yomiage-wyoming")]


async def test_a_stop_returns_only_once_every_connection_thread_has_ended(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client hangs up mid-text, and the server is stopped while that connection is closing
    (waiting for its worker to finish the sentence): ``stop`` returns after the join, not
    before (Home Assistant's test harness checks for leftover threads right after)."""
    closing = asyncio.Event()
    close = wyoming_server._Connection._close

    async def noted(connection: wyoming_server._Connection) -> None:
        closing.set()
        await close(connection)

    monkeypatch.setattr(wyoming_server._Connection, "_close", noted)
    server = WyomingTtsServer(engine, options=QUIET)
    await server.start("tcp://127.0.0.1:0")
    try:
        async with connect(server) as client:
            await client.write_event(Synthesize(text=LONG_TEXT).event())
            await read_until(client, "audio-chunk")
        await closing.wait()
    finally:
        await server.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("yomiage-wyoming")]


async def test_serves_on_a_unix_socket(engine: Engine, tmp_path: Path) -> None:
    socket_path = tmp_path / "tts.sock"
    server = WyomingTtsServer(engine, options=QUIET)
    await server.start(f"unix://{socket_path}")
    assert server.address == f"unix://{socket_path}"
    try:
        # A client in another process: the test plugin blocks Unix-socket connects in this one.
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", UNIX_DESCRIBE, str(socket_path), stdout=asyncio.subprocess.PIPE
        )
        header, _ = await asyncio.wait_for(client.communicate(), 30)
    finally:
        await server.stop()
    assert json.loads(header)["type"] == "info"
    assert not socket_path.exists()


UNIX_DESCRIBE = """
import socket, sys
with socket.socket(socket.AF_UNIX) as client:
    client.connect(sys.argv[1])
    client.sendall(b'{"type": "describe"}\\n')
    sys.stdout.buffer.write(client.makefile("rb").readline())
"""


def test_default_voice_and_options_are_checked_when_the_server_is_made(engine: Engine) -> None:
    with pytest.raises(UnknownVoiceError, match="nobody"):
        WyomingTtsServer(engine, voice="nobody")
    speaker = next(iter(engine.voices))
    with pytest.raises(UnknownVoiceError, match="no style 'Shouting'"):
        WyomingTtsServer(engine, voice=f"{speaker}/Shouting")
    with pytest.raises(InvalidOptionError, match="speed"):
        WyomingTtsServer(engine, options=QUIET.with_changes(speed=0.0))


async def test_default_voice_is_used_when_a_request_names_none(
    engine: Engine,
) -> None:
    voice = _all_voices(engine)[-1]
    server = WyomingTtsServer(engine, voice=voice, options=QUIET)
    await server.start("tcp://127.0.0.1:0")
    try:
        async with connect(server) as client:
            reply = await synthesize(client, "こんにちは。")
    finally:
        await server.stop()
    assert reply.pcm == engine_pcm(engine, "こんにちは。", voice)


def test_serve_command_arguments(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="yomiage")
    add_serve_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--bundle", str(tmp_path), "--speed", "1.2"])
    assert args.uri == "tcp://0.0.0.0:10200" and args.voice == "default"
    assert args.speed == 1.2 and args.threads is None and args.device == "auto"
    assert callable(args.handler)


@pytest.mark.parametrize("uri", ["http://127.0.0.1:10200", "tcp://127.0.0.1", "tcp://:10", "x"])
def test_a_bad_uri_is_refused_before_loading_anything(
    uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--uri", uri, "--bundle", str(tmp_path)]) == 2
    assert "--uri must look like tcp://HOST:PORT" in capsys.readouterr().err


def test_a_missing_bundle_is_named_in_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-bundle"
    assert main(["--uri", "tcp://127.0.0.1:0", "--bundle", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err


@pytest.mark.parametrize("defect", sorted(BROKEN))
def test_a_voice_that_does_not_fit_stops_the_server_at_start_with_one_line(
    tiny_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], defect: str
) -> None:
    """What the add-on's log shows: the server does not start on a voice it could not speak
    with, and says which file and why (never the first request's traceback)."""
    bundle = BROKEN[defect].bundle(tiny_bundle, tmp_path / "bundle")
    assert main(["--uri", "tcp://127.0.0.1:0", "--bundle", str(bundle)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert re.search(BROKEN[defect].message, line), line


def test_zeroconf_announces_a_tcp_server_only(
    tiny_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--zeroconf`` with a Unix socket is refused before the voices load, in one line."""
    uri = f"unix://{tmp_path / 'yomiage.sock'}"
    assert main(["--uri", uri, "--bundle", str(tiny_bundle), "--zeroconf"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--zeroconf announces a TCP server" in line


def test_the_announcement_names_the_server_and_marks_it_as_yomiage() -> None:
    """What Home Assistant's zeroconf sees (its flows are tested in tests/runtime/integration)."""
    info = service_info("kitchen-pc", "192.0.2.7", 10200)
    assert info.type == ZEROCONF_TYPE == "_wyoming._tcp.local."
    assert info.name == "kitchen-pc._wyoming._tcp.local."
    assert info.parsed_addresses() == ["192.0.2.7"] and info.port == 10200
    assert info.decoded_properties == {ZEROCONF_MARK: "1"}
    assert default_name().startswith("yomiage-")
