"""The tts entity through Home Assistant's real tts component: files, formats, streaming, errors."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import tempfile
import wave
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np
import pytest
from homeassistant.components import media_source, tts
from homeassistant.components.tts import TTSAudioRequest
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component
from numpy.typing import NDArray
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.typing import (
    ClientSessionGenerator,
    WebSocketGenerator,
)

from custom_components.yomiage.tts import YomiageTTSEntity

from ..ebur128 import measure
from ..wav import read_wav
from .common import HandFedMessage, engine_of, record_engine_calls, shown, speak_on_player

SAMPLE_RATE = 44100
WAV_HEADER = 44
QUIET = {"noise": 0.0, "noise_w": 0.0}  # deterministic graphs: equal requests give equal audio


def _entity(hass: HomeAssistant, entity_id: str) -> YomiageTTSEntity:
    entity = hass.data[tts.DATA_COMPONENT].get_entity(entity_id)
    assert isinstance(entity, YomiageTTSEntity)
    return entity


def _probe(data: bytes, suffix: str) -> dict[str, Any]:
    """What ffprobe reads from a file: proves the bytes are a playable audio file."""
    with tempfile.NamedTemporaryFile(suffix=f".{suffix}") as file:
        file.write(data)
        file.flush()
        result = subprocess.run(
            ["ffprobe", "-v", "error", "-of", "json", "-show_streams", "-show_format", file.name],
            capture_output=True,
            check=True,
        )
    probed: dict[str, Any] = json.loads(result.stdout)
    assert probed["format"]["format_name"].startswith(suffix), probed["format"]
    return probed


async def _audio(
    hass: HomeAssistant, entity_id: str, message: str, options: dict[str, Any] | None = None
) -> tuple[str, bytes]:
    media_id = tts.generate_media_source_id(
        hass, message, engine=entity_id, language="ja", options=options
    )
    return await tts.async_get_media_source_audio(hass, media_id)


async def test_languages_and_options(hass: HomeAssistant, entity_id: str) -> None:
    entity = _entity(hass, entity_id)
    assert entity.supported_languages == ["ja"]
    assert entity.default_language == "ja"
    assert set(entity.supported_options or []) >= {
        "voice",
        "speed",
        "style_weight",
        "sdp_ratio",
        "noise",
        "noise_w",
        "pause_scale",
        "volume",
        "lead_silence",
        "normalize",
        "smooth_start",
    }


async def test_voice_list_through_websocket(
    hass: HomeAssistant, hass_ws_client: WebSocketGenerator, entity_id: str, voices: list[str]
) -> None:
    client = await hass_ws_client(hass)
    await client.send_json_auto_id(
        {"type": "tts/engine/voices", "engine_id": entity_id, "language": "ja"}
    )
    response = await client.receive_json()
    assert response["success"], response
    listed = response["result"]["voices"]
    assert [voice["voice_id"] for voice in listed] == voices
    # The voices speak Japanese only: SBV2's emotion styles are named in Japanese everywhere.
    japanese = {"Neutral": "ノーマル", "Happy": "喜び", "Sad": "悲しみ"}
    for voice in listed:
        speaker, style = voice["voice_id"].split("/")
        assert voice["name"] == f"{speaker} – {japanese[style]}"
    assert _entity(hass, entity_id).async_get_supported_voices("en") is None


async def test_the_default_voice_is_listed_first(
    hass: HomeAssistant,
    hass_ws_client: WebSocketGenerator,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    voices: list[str],
) -> None:
    """Home Assistant's voice pickers show the first voice and new Assist pipelines store it:
    the one the entry speaks with when a request names none, then the rest in bundle order."""
    hass.config_entries.async_update_entry(loaded_entry, options={"voice": voices[-1]})
    await hass.async_block_till_done()  # saving the options reloads the entry
    client = await hass_ws_client(hass)
    await client.send_json_auto_id(
        {"type": "tts/engine/voices", "engine_id": entity_id, "language": "ja"}
    )
    response = await client.receive_json()
    listed = [voice["voice_id"] for voice in response["result"]["voices"]]
    assert listed == [voices[-1], *voices[:-1]]


async def test_speak_gives_an_mp3_url_fetched_over_http(
    hass: HomeAssistant, hass_client: ClientSessionGenerator, entity_id: str, voices: list[str]
) -> None:
    assert await async_setup_component(hass, "media_source", {})
    options = {"voice": voices[-1], "speed": 1.2}
    media_id = await speak_on_player(hass, entity_id, "おはようございます。七時です。", options)
    media = await media_source.async_resolve_media(hass, media_id, None)
    assert media.url.endswith(".mp3")
    client = await hass_client()
    response = await client.get(media.url)
    assert response.status == 200
    data = await response.read()
    probed = _probe(data, "mp3")
    (stream,) = probed["streams"]
    assert stream["codec_name"] == "mp3"
    assert int(stream["sample_rate"]) == SAMPLE_RATE
    assert float(probed["format"]["duration"]) > 0.3


async def test_home_assistant_asks_for_a_stream_even_for_a_whole_message(
    hass: HomeAssistant, entity_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Announcements (tts.speak, media source audio) come to the entity as a one-piece stream:
    the engine's streaming path is the one Home Assistant users hear, never its whole-file
    synthesis (docs/PERFORMANCE.md: what the benchmark's streamed long text stands for)."""
    used = record_engine_calls(hass.config_entries.async_entries("yomiage")[0], monkeypatch)
    extension, data = await _audio(hass, entity_id, "おはようございます。七時です。", QUIET)
    assert extension == "mp3" and len(data) > 1000
    assert used == ["stream_arriving"]


async def test_preferred_wav_is_44k_16bit_mono(hass: HomeAssistant, entity_id: str) -> None:
    extension, data = await _audio(
        hass, entity_id, "こんにちは。元気ですか？", {tts.ATTR_PREFERRED_FORMAT: "wav", **QUIET}
    )
    assert extension == "wav"
    with wave.open(io.BytesIO(data)) as wav:
        assert wav.getframerate() == SAMPLE_RATE
        assert wav.getsampwidth() == 2
        assert wav.getnchannels() == 1
    pcm = data[WAV_HEADER:]
    assert len(pcm) > SAMPLE_RATE // 10 and len(pcm) % 2 == 0
    assert any(pcm), "speech, not silence"
    (stream,) = _probe(data, "wav")["streams"]
    assert stream["codec_name"] == "pcm_s16le" and stream["channels"] == 1


async def test_whole_file_method_gives_a_complete_wav(hass: HomeAssistant, entity_id: str) -> None:
    extension, data = await _entity(hass, entity_id).async_get_tts_audio(
        "こんにちは。", "ja", dict(QUIET)
    )
    assert extension == "wav"
    with wave.open(io.BytesIO(data)) as wav:
        assert wav.getframerate() == SAMPLE_RATE
        assert wav.getnframes() * 2 == len(data) - WAV_HEADER > 0


async def test_streaming_speaks_the_first_sentence_before_the_text_ends(
    hass: HomeAssistant, entity_id: str
) -> None:
    pieces = HandFedMessage()
    response = await _entity(hass, entity_id).async_stream_tts_audio(
        TTSAudioRequest("ja", dict(QUIET), pieces.generate())
    )
    assert response.extension == "wav"
    audio = response.data_gen

    header = await anext(audio)
    assert len(header) == WAV_HEADER
    assert header[40:44] == b"\0\0\0\0", "streaming header: data length unknown (0)"
    with wave.open(io.BytesIO(header)) as wav:
        assert (wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) == (SAMPLE_RATE, 2, 1)

    await pieces.queue.put("今日は")
    await pieces.queue.put("いい天気ですね。散歩")
    first = await asyncio.wait_for(anext(audio), timeout=60)
    assert not pieces.finished, "audio for sentence 1 came while the text was still arriving"
    assert len(first) > 0 and any(first[: WAV_HEADER * 100])

    await pieces.queue.put("に行きましょう！")
    await pieces.queue.put(None)
    rest = [chunk async for chunk in audio]
    assert pieces.finished
    assert len(rest) == 1, "one chunk per sentence"
    pause_bytes = int(0.08 * SAMPLE_RATE) * 2
    assert not any(rest[0][:pause_bytes]), "the second sentence starts with the pause before it"
    assert any(rest[0][pause_bytes:])


async def test_a_sentence_is_spoken_while_the_llm_waits_for_its_audio(
    hass: HomeAssistant, entity_id: str
) -> None:
    """An LLM that stops after its first sentence (a tool call) until that is heard: the
    sentence's end mark is enough, no later text is needed."""
    pieces = HandFedMessage()
    response = await _entity(hass, entity_id).async_stream_tts_audio(
        TTSAudioRequest("ja", dict(QUIET), pieces.generate())
    )
    audio = response.data_gen
    await anext(audio)  # the WAV header
    await pieces.queue.put("おはようございます。")
    first = await asyncio.wait_for(anext(audio), timeout=60)
    assert any(first), "speech while the text has not gone on"
    await pieces.queue.put("」今日は晴れです。")  # a late mark goes with the next sentence
    await pieces.queue.put(None)
    rest = [chunk async for chunk in audio]
    assert len(rest) == 1 and any(rest[0])


async def test_a_failing_message_generator_fails_the_stream(
    hass: HomeAssistant, entity_id: str
) -> None:
    async def broken() -> AsyncGenerator[str]:
        yield "最初の文です。次の"
        raise ConnectionError("the LLM went away")

    response = await _entity(hass, entity_id).async_stream_tts_audio(
        TTSAudioRequest("ja", dict(QUIET), broken())
    )
    received: list[bytes] = []
    with pytest.raises(ConnectionError, match="LLM went away"):
        async for chunk in response.data_gen:
            received.append(chunk)
    assert len(received) == 2, "the header and the sentence that was complete"
    await hass.async_block_till_done()


async def test_cache_key_follows_the_options(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, entity_id: str
) -> None:
    manager = hass.data[tts.DATA_TTS_MANAGER]
    message = "今日は晴れです。"
    slow = await _audio(hass, entity_id, message, {tts.ATTR_PREFERRED_FORMAT: "wav", **QUIET})
    keys_before = set(manager.mem_cache)
    again = await _audio(hass, entity_id, message, {tts.ATTR_PREFERRED_FORMAT: "wav", **QUIET})
    assert again == slow and set(manager.mem_cache) == keys_before, "same options: cache hit"

    hass.config_entries.async_update_entry(
        loaded_entry, options={**loaded_entry.options, "speed": 2.0}
    )
    await hass.async_block_till_done()
    fast = await _audio(hass, entity_id, message, {tts.ATTR_PREFERRED_FORMAT: "wav", **QUIET})
    assert set(manager.mem_cache) - keys_before, "new default options give a new cache key"
    assert len(fast[1]) < len(slow[1]) * 0.75, "and the new speed is used"


async def test_loudness_and_lead_silence_per_request(hass: HomeAssistant, entity_id: str) -> None:
    """What a listener hears from ``tts.speak`` options: -16 LUFS under -1 dBTP by default,
    ``volume`` dB under it, ``lead_silence`` ms of silence first, ``normalize`` off the raw
    level; Home Assistant keys its cache on them."""
    message = "おはようございます。今日の東京は晴れ、最高気温は二十五度の予想です。"

    async def heard(**options: Any) -> NDArray[np.int16]:
        wanted = {tts.ATTR_PREFERRED_FORMAT: "wav", **QUIET, **options}
        extension, data = await _audio(hass, entity_id, message, wanted)
        assert extension == "wav"
        return np.frombuffer(read_wav(data).pcm, dtype="<i2")

    default = await heard()
    quieter = await heard(volume=-6)
    led = await heard(lead_silence=400)
    raw = await heard(normalize=False)
    level = measure(default, SAMPLE_RATE)
    assert abs(level.integrated_lufs + 16) <= 1.5 and level.true_peak_dbtp <= -1.0
    assert abs(level.integrated_lufs - measure(quieter, SAMPLE_RATE).integrated_lufs - 6) <= 1
    lead = round(0.4 * SAMPLE_RATE)
    assert not led[:lead].any() and np.abs(led[lead:].astype(np.int32) - default).max() <= 1
    assert measure(raw, SAMPLE_RATE).true_peak_dbtp > -1.0  # the tiny voice's own peaks


@pytest.mark.parametrize(
    ("message", "options", "key"),
    [
        ("こんにちは。", {"volume": 30}, "invalid_option"),
        ("こんにちは。", {"lead_silence": 5000}, "invalid_option"),
        ("こんにちは。", {"normalize": "loud"}, "invalid_option"),
        ("", {}, "invalid_text"),
        ("。。。", {}, "invalid_text"),
        ("こんにちは。", {"voice": "nobody/Neutral"}, "unknown_voice"),
        ("こんにちは。", {"speed": 100}, "invalid_option"),
        ("こんにちは。", {"speed": "fast"}, "invalid_option"),
        ("こんにちは。", {"pause_scale": -1}, "invalid_option"),
        ("こんにちは。", {"noise": True}, "invalid_option"),
    ],
)
async def test_bad_requests_raise_translated_errors_and_the_engine_keeps_serving(
    hass: HomeAssistant,
    entity_id: str,
    message: str,
    options: dict[str, Any],
    key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(HomeAssistantError) as caught:
        await _audio(hass, entity_id, message, {tts.ATTR_PREFERRED_FORMAT: "wav", **options})
    assert caught.value.translation_domain == "yomiage"
    assert caught.value.translation_key == key
    # The engine's own line goes to the log; the user reads the cause in their language.
    assert f"({key})" in caplog.text
    await shown(hass, "ja", f"exceptions.{key}.message", caught.value.translation_placeholders)

    with pytest.raises(HomeAssistantError) as direct:
        await _entity(hass, entity_id).async_get_tts_audio(message, "ja", options)
    assert direct.value.translation_key == key

    extension, data = await _audio(
        hass, entity_id, "大丈夫です。", {tts.ATTR_PREFERRED_FORMAT: "wav"}
    )
    assert extension == "wav" and any(data[WAV_HEADER:])


async def test_error_message_is_translated(hass: HomeAssistant, entity_id: str) -> None:
    with pytest.raises(HomeAssistantError) as caught:
        await _entity(hass, entity_id).async_get_tts_audio("こんにちは。", "ja", {"voice": "x/y"})
    # Home Assistant 2025.4 drops the message's last full stop; later releases keep it.
    assert str(caught.value).rstrip(".") == (
        "The chosen voice is not one of this entity's voices. Choose another voice"
    )


async def test_unknown_option_names_are_refused_by_home_assistant(
    hass: HomeAssistant, entity_id: str
) -> None:
    # Style-Bert-VITS2's own name for pitch: ours is ``pitch``.
    with pytest.raises(HomeAssistantError, match="Invalid options"):
        await _audio(hass, entity_id, "こんにちは。", {"pitch_scale": 2})


async def test_a_default_voice_the_bundle_lost_falls_back_to_its_first(
    hass: HomeAssistant, mock_entry: MockConfigEntry
) -> None:
    hass.config_entries.async_update_entry(mock_entry, options={"voice": "retired/Neutral"})
    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    (entity,) = hass.data[tts.DATA_COMPONENT].entities
    engine = engine_of(mock_entry)
    assert entity.default_options is not None
    assert entity.default_options["voice"] == engine.default_voice
    extension, _ = await entity.async_get_tts_audio("こんにちは。", "ja", {})
    assert extension == "wav"
