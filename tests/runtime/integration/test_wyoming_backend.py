"""A machine where the engine cannot run (its modules do not import, installing them fails): the
integration still loads, the flow offers a Yomiage Wyoming server, and that server speaks through
Home Assistant's real tts component.

The server is the real one (``yomiage.wyoming_server`` on the tiny bundle), in a process of
its own on 127.0.0.1, as the add-on runs it. What it sends a plain ``wyoming`` client is the
reference for what Home Assistant must get.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import wave
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from homeassistant import config_entries
from homeassistant.components import media_source, tts
from homeassistant.components.tts import TTSAudioRequest
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator
from wyoming.audio import AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from wyoming.tts import Synthesize, SynthesizeVoice

from custom_components.yomiage.const import (
    CONF_HOST,
    CONF_PORT,
    CONF_SOURCE,
    CONF_VOICE,
    DOMAIN,
    SOURCE_OFFICIAL,
    SOURCE_WYOMING,
    SYNTHESIS_NUMBERS,
    SYNTHESIS_SWITCHES,
)
from custom_components.yomiage.engine.wyoming_contract import ZEROCONF_TYPE
from custom_components.yomiage.local_engine import NATIVE_REQUIREMENTS
from custom_components.yomiage.tts import YomiageTTSEntity
from yomiage.discovery import service_info

from ..wav import read_wav
from .common import LOOPBACK, HandFedMessage, shown, speak_on_player, zeroconf_discovery
from .no_engine import Installs, block_native_modules, fake_installs, past_install

HOST = LOOPBACK
SAMPLE_RATE = 44100
WAV_HEADER = 44
THREE_SENTENCES = "今日はいい天気ですね。散歩に行きましょう！公園まで歩けますか？"


@pytest.fixture(autouse=True)
def _loopback_sockets(socket_enabled: None) -> None:
    """The Home Assistant plugin blocks sockets; these tests talk over 127.0.0.1 only."""


@pytest.fixture(autouse=True)
def _own_config_dir(hass: HomeAssistant, tmp_path: Path) -> None:
    """A fresh config folder: Home Assistant's tts file cache must not serve earlier audio."""
    hass.config.config_dir = str(tmp_path)


@pytest.fixture
def installs(hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch) -> Installs:
    """No onnxruntime, pyopenjtalk, e2k here, and installing them fails."""
    block_native_modules(monkeypatch)
    return fake_installs(hass, monkeypatch)


# -- a plain Wyoming client: the reference --------------------------------------------------------
async def _server_pcm(port: int, text: str, voice: str) -> bytes:
    """The audio the server sends a plain client for ``synthesize``."""
    async with AsyncTcpClient(HOST, port) as client:
        await client.write_event(Synthesize(text, SynthesizeVoice(name=voice)).event())
        return await _pcm_until(client, "audio-stop")


async def _server_stream_pcm(
    port: int, pieces: list[str], voice: str, options: dict[str, Any] | None = None
) -> bytes:
    """The audio the server sends a plain client for a synthesize-start … stop stream, with
    ``options`` as the documented ``yomiage_options``."""
    start: dict[str, Any] = {"voice": {"name": voice}}
    if options:
        start["yomiage_options"] = options
    async with AsyncTcpClient(HOST, port) as client:
        await client.write_event(Event("synthesize-start", start))
        for piece in pieces:
            await client.write_event(Event("synthesize-chunk", {"text": piece}))
        await client.write_event(Event("synthesize-stop"))
        return await _pcm_until(client, "synthesize-stopped")


async def _pcm_until(client: AsyncTcpClient, last: str) -> bytes:
    pcm = b""
    while (event := await asyncio.wait_for(client.read_event(), 30)) is not None:
        assert event.type != "error", event.data
        if event.type == "audio-chunk":
            pcm += event.payload or b""
        if event.type == last:
            return pcm
    raise AssertionError("the server closed the connection")


# -- Home Assistant side --------------------------------------------------------------------------
async def _add_server(hass: HomeAssistant, port: int) -> MockConfigEntry:
    """A server entry, set up (whether that works is for the caller to check)."""
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=f"Yomiage {HOST}",
        unique_id=f"tcp://{HOST}:{port}",
        data={CONF_SOURCE: SOURCE_WYOMING, CONF_HOST: HOST, CONF_PORT: port},
        options={},
    )
    entry.add_to_hass(hass)
    assert await async_setup_component(hass, "http", {})
    await hass.config_entries.async_setup(entry.entry_id)
    return entry


def _entity(hass: HomeAssistant) -> YomiageTTSEntity:
    (entity,) = hass.data[tts.DATA_COMPONENT].entities
    assert isinstance(entity, YomiageTTSEntity)
    return entity


async def _audio(
    hass: HomeAssistant, entity_id: str, message: str, options: dict[str, Any]
) -> tuple[str, bytes]:
    media_id = tts.generate_media_source_id(
        hass,
        message,
        engine=entity_id,
        language="ja",
        options={tts.ATTR_PREFERRED_FORMAT: "wav", **options},
    )
    return await asyncio.wait_for(tts.async_get_media_source_audio(hass, media_id), 60)


def _pcm_of(wav_bytes: bytes) -> bytes:
    """The samples of a WAV file of our format (Home Assistant streams: it may say 0 frames)."""
    audio = read_wav(wav_bytes)
    assert (audio.sample_rate, audio.sample_width, audio.channels) == (SAMPLE_RATE, 2, 1)
    return audio.pcm


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


# -- the acceptance test --------------------------------------------------------------------------
async def test_without_the_engine_the_flow_offers_a_server_that_speaks(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    assert await async_setup_component(hass, "http", {})
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await past_install(
        hass,
        await hass.config_entries.flow.async_configure(
            result["flow_id"], {"next_step_id": SOURCE_OFFICIAL}
        ),
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.MENU, "engine_install_failed")
    assert set(installs.attempted) == set(NATIVE_REQUIREMENTS)

    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"next_step_id": SOURCE_WYOMING}
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, SOURCE_WYOMING)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_HOST: HOST, CONF_PORT: server_port}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY, result.get("errors")
    assert result["data"] == {CONF_SOURCE: SOURCE_WYOMING, CONF_HOST: HOST, CONF_PORT: server_port}
    await hass.async_block_till_done()
    entry = result["result"]
    assert entry.state is ConfigEntryState.LOADED

    entity = _entity(hass)
    voices = [voice.voice_id for voice in entity.async_get_supported_voices("ja") or []]
    assert voices == [f"tiny-{s}/{t}" for s in "ab" for t in ("Neutral", "Happy", "Sad")]
    assert entity.supported_options == [CONF_VOICE, *SYNTHESIS_NUMBERS, *SYNTHESIS_SWITCHES]
    assert entity.default_options == {CONF_VOICE: voices[0]}, "the server's settings decide"

    # Home Assistant 2025.4 asks an entity that can stream for a stream of the one message.
    voice = voices[-1]
    extension, data = await _audio(hass, entity.entity_id, THREE_SENTENCES, {CONF_VOICE: voice})
    assert extension == "wav"
    pcm = _pcm_of(data)
    assert any(pcm), "speech, not silence"
    assert pcm == await _server_stream_pcm(server_port, [THREE_SENTENCES], voice)
    # The whole-message method (older callers) asks for it in one ``synthesize``.
    extension, data = await entity.async_get_tts_audio(THREE_SENTENCES, "ja", {CONF_VOICE: voice})
    with wave.open(io.BytesIO(data)) as wav:
        assert wav.getframerate() == SAMPLE_RATE
        pcm = wav.readframes(wav.getnframes())
    assert pcm == await _server_pcm(server_port, THREE_SENTENCES, voice)


async def test_streaming_speaks_the_first_sentence_before_the_text_ends(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    await _add_server(hass, server_port)
    pieces = HandFedMessage()
    response = await _entity(hass).async_stream_tts_audio(
        TTSAudioRequest("ja", {}, pieces.generate())
    )
    assert response.extension == "wav"
    audio: AsyncIterator[bytes] = response.data_gen
    text = ["今日は", "いい天気ですね。散歩", "に行きましょう！"]
    await pieces.queue.put(text[0])
    await pieces.queue.put(text[1])

    header = await asyncio.wait_for(anext(audio), 60)
    assert len(header) == WAV_HEADER and header[40:44] == b"\0\0\0\0"
    with wave.open(io.BytesIO(header)) as wav:
        assert wav.getframerate() == SAMPLE_RATE
    first = await asyncio.wait_for(anext(audio), 60)
    assert not pieces.finished, "audio for sentence 1 came while the text was still arriving"

    await pieces.queue.put(text[2])
    await pieces.queue.put(None)
    rest = [chunk async for chunk in audio]
    assert pieces.finished
    assert rest, "the second sentence (and the rest of the first) came after the text ended"
    voice = _entity(hass).default_options[CONF_VOICE]
    assert first + b"".join(rest) == await _server_stream_pcm(server_port, text, voice)


async def test_a_failing_message_generator_fails_the_stream(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    await _add_server(hass, server_port)
    first_heard = asyncio.Event()

    async def broken() -> AsyncGenerator[str]:
        yield "最初の文です。次の"
        await first_heard.wait()
        raise ConnectionError("the LLM went away")

    response = await _entity(hass).async_stream_tts_audio(TTSAudioRequest("ja", {}, broken()))
    received: list[bytes] = []
    with pytest.raises(ConnectionError, match="LLM went away"):
        async for chunk in response.data_gen:
            received.append(chunk)
            if len(received) == 2:  # the header and the first sentence
                first_heard.set()
    voice = _entity(hass).default_options[CONF_VOICE]
    complete = await _server_stream_pcm(server_port, ["最初の文です。"], voice)
    assert received[1:] == [complete], "the sentence that was complete, not the half one"


@pytest.mark.parametrize(
    ("message", "options", "key"),
    [
        ("こんにちは。", {CONF_VOICE: "nobody/Neutral"}, "unknown_voice"),  # refused here
        ("こんにちは。", {CONF_VOICE: "tiny-a/Angry"}, "unknown_voice"),
        ("。。。", {}, "invalid_text"),  # refused by the server's engine
    ],
)
async def test_refused_requests_raise_translated_errors(
    hass: HomeAssistant,
    installs: Installs,
    server_port: int,
    message: str,
    options: dict[str, str],
    key: str,
) -> None:
    await _add_server(hass, server_port)
    entity = _entity(hass)
    with pytest.raises(HomeAssistantError) as caught:
        await entity.async_get_tts_audio(message, "ja", options)
    assert (caught.value.translation_domain, caught.value.translation_key) == (DOMAIN, key)
    await shown(hass, "ja", f"exceptions.{key}.message", caught.value.translation_placeholders)
    extension, data = await _audio(hass, entity.entity_id, "大丈夫です。", {})
    assert extension == "wav" and any(_pcm_of(data)), "the next request is served"


async def test_every_option_reaches_the_server(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    """A request's synthesis options travel to the server (``yomiage_options``): the audio is
    what a client asking with them gets, not the server's settings."""
    await _add_server(hass, server_port)
    entity = _entity(hass)
    voice = entity.default_options[CONF_VOICE]
    options = {"speed": 1.2, "volume": -6.0, "lead_silence": 300.0, "pause_scale": 2.0}
    _, data = await _audio(hass, entity.entity_id, THREE_SENTENCES, options)
    expected = await _server_stream_pcm(server_port, [THREE_SENTENCES], voice, options)
    settings = await _server_stream_pcm(server_port, [THREE_SENTENCES], voice)
    assert _pcm_of(data) == expected != settings
    assert not any(expected[: round(0.3 * SAMPLE_RATE) * 2])  # the lead silence
    _, raw = await _audio(hass, entity.entity_id, "こんにちは。", {"normalize": False})
    assert _pcm_of(raw) == await _server_stream_pcm(
        server_port, ["こんにちは。"], voice, {"normalize": False}
    )


async def test_the_readme_speak_example_works_on_a_server_entry(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    """``tts.speak`` with ``options: {speed: 1.2}`` (README) plays on a server entry too."""
    await _add_server(hass, server_port)
    assert await async_setup_component(hass, "media_source", {})
    calls = async_mock_service(hass, "media_player", "play_media")
    await hass.services.async_call(
        tts.DOMAIN,
        "speak",
        {
            "entity_id": _entity(hass).entity_id,
            "media_player_entity_id": "media_player.kitchen",
            "message": "おはようございます。",
            "options": {"speed": 1.2},
        },
        blocking=True,
    )
    (call,) = calls
    media = await media_source.async_resolve_media(hass, call.data["media_content_id"], None)
    _, data = await asyncio.wait_for(
        tts.async_get_media_source_audio(hass, call.data["media_content_id"]), 60
    )
    assert media.url and data


async def test_a_message_prepared_on_a_server_entry_plays_without_asking_again(
    hass: HomeAssistant, installs: Installs, server_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``yomiage.prepare`` (README, alarms) on a server entry: the server speaks the message
    now; the later ``tts.speak`` with the same message and options plays it from Home
    Assistant's cache and the server is not asked again."""
    entry = await _add_server(hass, server_port)
    backend = entry.runtime_data.backend
    asked: list[str] = []
    original = backend.stream

    def counted(*args: Any) -> Any:
        asked.append("stream")
        return original(*args)

    monkeypatch.setattr(backend, "stream", counted)
    assert await async_setup_component(hass, "media_source", {})
    entity_id = _entity(hass).entity_id
    message, options = "おはようございます。七時です。", {"speed": 1.1}
    await hass.services.async_call(
        DOMAIN,
        "prepare",
        {"entity_id": entity_id, "message": message, "options": options},
        blocking=True,
    )
    assert asked == ["stream"]
    media_id = await speak_on_player(hass, entity_id, message, options)
    _, data = await asyncio.wait_for(tts.async_get_media_source_audio(hass, media_id), 60)
    assert len(data) > 1000
    assert asked == ["stream"], "played from the cache: the server was asked once"


@pytest.mark.parametrize(
    ("options", "problem"),
    [({"volume": 99}, "volume must be between"), ({"normalize": "loud"}, "normalize must be")],
)
async def test_a_bad_option_fails_as_on_a_local_entry(
    hass: HomeAssistant,
    installs: Installs,
    server_port: int,
    options: dict[str, Any],
    problem: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _add_server(hass, server_port)
    with pytest.raises(HomeAssistantError) as caught:
        await _entity(hass).async_get_tts_audio("こんにちは。", "ja", options)
    assert caught.value.translation_key == "invalid_option"
    assert problem in caplog.text


async def test_a_server_that_is_gone(
    hass: HomeAssistant, installs: Installs, server_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    closed = _closed_port()
    entry = await _add_server(hass, closed)
    assert entry.state is ConfigEntryState.SETUP_RETRY
    assert entry.reason is not None
    address = {"address": f"{HOST}:{closed}"}
    expected = await shown(hass, "en", "exceptions.server_unreachable.message", address)
    assert entry.reason.rstrip(".") == expected.rstrip(".")  # 2025.4 drops the full stop
    assert f"cannot connect to {HOST}" in caplog.text

    loaded = await _add_server(hass, server_port)
    assert loaded.state is ConfigEntryState.LOADED
    loaded.runtime_data.backend.port = closed  # the server went away after setup
    with pytest.raises(HomeAssistantError) as caught:
        await _entity(hass).async_get_tts_audio("こんにちは。", "ja", {})
    assert caught.value.translation_key == "server_unreachable"


async def test_the_flow_names_the_address_it_cannot_reach(
    hass: HomeAssistant, installs: Installs
) -> None:
    closed = _closed_port()
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"next_step_id": SOURCE_WYOMING}
    )
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_HOST: f" {HOST} ", CONF_PORT: closed}
    )
    assert (result["type"], result["errors"]) == (
        FlowResultType.FORM,
        {"base": "server_unreachable"},
    )
    assert result["description_placeholders"]["address"] == f"{HOST}:{closed}"
    assert installs.attempted == [], "choosing the server installs nothing"


def _fake_server(program: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]:
    """A Wyoming server that describes one tts program with one Japanese voice, starts the audio
    of a ``synthesize`` and hangs up."""
    voice = TtsVoice(
        name="fake/Neutral",
        description="",
        attribution=Attribution(name="", url=""),
        installed=True,
        version=None,
        languages=["ja"],
    )
    info = Info(
        tts=[
            TtsProgram(
                name=program,
                description=program,
                attribution=Attribution(name="", url=""),
                installed=True,
                version="1.0",
                voices=[voice],
            )
        ]
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (event := await async_read_event(reader)) is not None:
            if event.type == "describe":
                await async_write_event(info.event(), writer)
            elif event.type == "synthesize":
                await async_write_event(
                    AudioStart(rate=SAMPLE_RATE, width=2, channels=1).event(), writer
                )
                break
        writer.close()

    return serve


@asynccontextmanager
async def _serving(program: str) -> AsyncIterator[int]:
    server = await asyncio.start_server(_fake_server(program), HOST, 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_the_flow_refuses_a_wyoming_server_that_is_not_yomiage(
    hass: HomeAssistant, installs: Installs, caplog: pytest.LogCaptureFixture
) -> None:
    async with _serving("piper") as port:
        result = await hass.config_entries.flow.async_init(
            DOMAIN, context={"source": config_entries.SOURCE_USER}
        )
        result = await hass.config_entries.flow.async_configure(
            result["flow_id"], {"next_step_id": SOURCE_WYOMING}
        )
        result = await hass.config_entries.flow.async_configure(
            result["flow_id"], {CONF_HOST: HOST, CONF_PORT: port}
        )
    assert result["errors"] == {"base": "not_yomiage_server"}
    text = await shown(
        hass, "ja", "config.error.not_yomiage_server", result["description_placeholders"]
    )
    assert text == f"{HOST}:{port} は応答しましたが、Yomiage サーバーではありません。"
    assert "piper" in caplog.text, "what it offers instead is in the log"


async def test_a_server_that_hangs_up_mid_answer(
    hass: HomeAssistant, installs: Installs, caplog: pytest.LogCaptureFixture
) -> None:
    async with _serving("yomiage") as port:
        entry = await _add_server(hass, port)
        assert entry.state is ConfigEntryState.LOADED
        with pytest.raises(HomeAssistantError) as caught:
            await _entity(hass).async_get_tts_audio("こんにちは。", "ja", {})
    assert caught.value.translation_key == "server_unreachable"
    assert caught.value.translation_placeholders == {"address": f"{HOST}:{port}"}
    assert f"{HOST}:{port} closed the connection" in caplog.text


async def test_options_choose_the_voice_and_synthesis_options_requests_carry(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    entry = await _add_server(hass, server_port)
    entity = _entity(hass)
    assert entity.default_options == {CONF_VOICE: entity.default_options[CONF_VOICE]}, (
        "nothing stored yet: the server's settings decide"
    )
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "server")
    assert list(result["data_schema"].schema) == [
        CONF_VOICE,
        *SYNTHESIS_NUMBERS,
        *SYNTHESIS_SWITCHES,
    ]
    assert result["description_placeholders"] == {"address": f"{HOST}:{server_port}"}
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {CONF_VOICE: "tiny-b/Happy", "speed": 1.3, "volume": -3.0, "noise": 0.0, "noise_w": 0.0},
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    entity = _entity(hass)
    assert entity.default_options[CONF_VOICE] == "tiny-b/Happy"
    assert (entity.default_options["speed"], entity.default_options["volume"]) == (1.3, -3.0)
    _, data = await _audio(hass, entity.entity_id, "こんにちは。", {})
    stored = {
        name: entity.default_options[name] for name in (*SYNTHESIS_NUMBERS, *SYNTHESIS_SWITCHES)
    }
    expected = await _server_stream_pcm(server_port, ["こんにちは。"], "tiny-b/Happy", stored)
    assert _pcm_of(data) == expected


async def test_diagnostics_of_a_server_entry(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    installs: Installs,
    server_port: int,
) -> None:
    entry = await _add_server(hass, server_port)
    await _entity(hass).async_get_tts_audio("こんにちは。元気です。", "ja", {})
    assert await async_setup_component(hass, "diagnostics", {})
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, entry)
    json.dumps(diagnostics)  # serialisable
    report = diagnostics["engine"]
    assert report["backend"] == "wyoming"
    assert report["sample_rate"] == SAMPLE_RATE
    assert set(report["voices"]) == {"tiny-a", "tiny-b"}
    (request,) = report["recent_requests"]
    assert request["sentences"] == 2 and request["audio_s"] > 0
    assert "bundle_folder" not in diagnostics["entry"]


# -- a server found on the network (yomiage serve --zeroconf) -------------------------------------
async def test_a_server_announced_on_the_network_is_set_up_without_an_address(
    hass: HomeAssistant, installs: Installs, server_port: int
) -> None:
    announced = service_info("kitchen-pc", HOST, server_port)  # what `serve --zeroconf` sends
    assert (announced.type, announced.port) == (ZEROCONF_TYPE, server_port)
    discovery = zeroconf_discovery("kitchen-pc", HOST, server_port, announced.decoded_properties)
    assert await async_setup_component(hass, "http", {})
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_ZEROCONF}, data=discovery
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "zeroconf_confirm")
    assert result["description_placeholders"] == {
        "name": "kitchen-pc",
        "address": f"{HOST}:{server_port}",
    }
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"] == {CONF_SOURCE: SOURCE_WYOMING, CONF_HOST: HOST, CONF_PORT: server_port}
    await hass.async_block_till_done()
    assert result["result"].state is ConfigEntryState.LOADED
    # Announced again (every restart of the server): already set up.
    again = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_ZEROCONF}, data=discovery
    )
    assert (again["type"], again["reason"]) == (FlowResultType.ABORT, "already_configured")


async def test_our_manifest_matches_what_the_server_announces_and_not_other_servers(
    hass: HomeAssistant,
) -> None:
    """Home Assistant hands Yomiage's flow the Wyoming services whose properties match the
    manifest's (fnmatch, as its zeroconf does); a plain Wyoming server goes to its own
    integration alone, and a flow started for one anyway says why it stops."""
    manifest = json.loads(
        (
            Path(__file__).resolve().parents[3] / "custom_components" / DOMAIN / "manifest.json"
        ).read_text(encoding="utf-8")
    )
    (matcher,) = manifest["zeroconf"]
    assert matcher["type"] == ZEROCONF_TYPE
    announced = service_info("kitchen-pc", HOST, 10200).decoded_properties

    def matches(properties: dict[str, str | None]) -> bool:
        return all(
            properties.get(key) is not None and fnmatch(str(properties[key]).lower(), pattern)
            for key, pattern in matcher["properties"].items()
        )

    assert matches(announced)
    assert not matches({})  # wyoming-piper and other servers announce no properties
    result = await hass.config_entries.flow.async_init(
        DOMAIN,
        context={"source": config_entries.SOURCE_ZEROCONF},
        data=zeroconf_discovery("piper", HOST, 10200, {}),
    )
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "not_yomiage_server")
