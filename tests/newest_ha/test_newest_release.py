"""The newest Home Assistant release (requirements/newest-ha.txt), started as users start it:
``hass -c DIR`` with Yomiage copied into custom_components as HACS copies it, onboarding and the
config flow over REST, speech fetched through tts_get_url in mp3 and wav, a restart through the
homeassistant.restart action, speech again, diagnostics downloaded; its log must hold no error
and no blocking call from our code. The pytest plugin trails releases; this does not."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from .hass import RESTART_EXIT_CODE, Hass, our_problems, pinned_version

FIRST = "おはようございます。今日は晴れ、最高気温は十八度です。"
AFTER_RESTART = "再起動のあとも、声はそのままです。"


def duration_s(audio: bytes) -> float:
    """Seconds of audio as ffmpeg decodes them (mp3 or wav)."""
    done = subprocess.run(
        ["ffmpeg", "-hide_banner", "-i", "pipe:0", "-f", "null", "-"],
        input=audio, capture_output=True, check=True,
    )  # fmt: skip
    times = re.findall(rb"time=(\d+):(\d+):([\d.]+)", done.stderr)
    assert times, done.stderr.decode(errors="replace")
    hours, minutes, seconds = times[-1]
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def speak(hass: Hass, entity_id: str, message: str, **options: Any) -> bytes:
    """What a browser plays: tts_get_url, then the address it returns (its path: the host part
    is Home Assistant's idea of its own address on the network, unreachable from a test)."""
    body: dict[str, Any] = {"engine_id": entity_id, "message": message, "language": "ja"}
    if options:
        body["options"] = options
    path = hass.request("POST", "/api/tts_get_url", body)["path"]
    audio: bytes = hass.request("GET", path, auth=False)
    return audio


def add_local_folder(hass: Hass) -> dict[str, Any]:
    flow = hass.request("POST", "/api/config/config_entries/flow", {"handler": "yomiage"})
    assert flow["type"] == "menu", flow
    assert "local" in flow["menu_options"]
    step = hass.flow_step(flow["flow_id"], {"next_step_id": "local"})
    assert (step["type"], step["step_id"]) == ("form", "local"), step
    done = hass.flow_step(flow["flow_id"], {"path": "voices/tiny"})
    assert done["type"] == "create_entry", done
    return done


def test_newest_release_end_to_end(hass_process: Hass) -> None:
    hass = hass_process
    hass.start()
    hass.onboard()
    hass.wait_running()
    entry = add_local_folder(hass)["result"]
    # Onboarding adds Google Translate's tts too: ours is the one of the yomiage integration.
    template = {"template": "{{ integration_entities('yomiage') | join(',') }}"}
    entity_id = hass.request("POST", "/api/template", template).decode()
    assert entity_id.startswith("tts."), entity_id

    mp3 = speak(hass, entity_id, FIRST)
    assert mp3[:3] == b"ID3" or mp3[:2] == b"\xff\xfb", mp3[:16]
    wav = speak(hass, entity_id, FIRST, preferred_format="wav")
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE", wav[:16]
    seconds = duration_s(wav)
    assert seconds > 1.0
    # The same message in both (its pauses and lengths vary a little from one synthesis to
    # the next: the duration predictor samples noise).
    assert 0.8 < duration_s(mp3) / seconds < 1.25

    diagnostics = hass.request("GET", f"/api/diagnostics/config_entry/{entry['entry_id']}")
    assert diagnostics["integration_manifest"]["domain"] == "yomiage"

    hass.request("POST", "/api/services/homeassistant/restart", {})
    assert hass.wait_exit() == RESTART_EXIT_CODE
    hass.start()
    hass.wait_running()
    assert hass.request("POST", "/api/template", template).decode() == entity_id
    again = speak(hass, entity_id, AFTER_RESTART)
    assert duration_s(again) > 0.8

    assert hass.request("GET", "/api/config")["version"] == pinned_version()
    log = hass.log()
    assert not our_problems(log), "\n".join(our_problems(log))
