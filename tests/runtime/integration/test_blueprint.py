"""The wake-up briefing blueprint (blueprints/automation/yomiage/wake_up_briefing.yaml), loaded
through Home Assistant's blueprint machinery into an automation, with the clock fired as Home
Assistant's tests fire it: the message is rendered the lead's minutes before the alarm, and at
the alarm it is played (on a media player, or announced on an Assist satellite) from the cache
without running the engine again."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from pathlib import Path

import pytest
from homeassistant.components import media_source
from homeassistant.core import HomeAssistant, ServiceCall
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    async_fire_time_changed,
    async_mock_service,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from .common import record_engine_calls
from .satellite import SATELLITE, Satellite

BLUEPRINT = Path(__file__).resolve().parents[3] / "blueprints" / "automation" / "yomiage"
NAME = "wake_up_briefing.yaml"
# A real Japanese template: the weather entity's forecast words would go where the state is.
MESSAGE = (
    "おはようございます。{{ now().month }}月{{ now().day }}日です。"
    "今日の天気は{{ states('weather.home') | replace('unknown', '晴れ') }}です。"
)


async def _until(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    """Waits for work running in executors (the engine); the automation run itself sleeps in
    its delay, which async_block_till_done would wait out. The deadline is read, not
    scheduled: firing the clock ahead runs every timer due by then, a timeout's too."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


class FiredClock:
    """Fires Home Assistant's clock as its tests do and moves ``dt_util.now`` with it, for the
    templates' now() (async_fire_time_changed alone does not; the freezer fixture, tried, hung
    the loop). A firing runs every timer due by its moment: HTTP timeouts in flight too."""

    def __init__(self, hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch) -> None:
        self._hass, self._monkeypatch = hass, monkeypatch
        self._moment: datetime | None = None

    def _now(self, time_zone: tzinfo | None = None) -> datetime:
        assert self._moment is not None
        return self._moment.astimezone(time_zone or dt_util.get_default_time_zone())

    def at(self, moment: datetime) -> None:
        if self._moment is None:  # templates read now() from here on: what the clock says
            self._monkeypatch.setattr(dt_util, "now", self._now)
        self._moment = moment
        async_fire_time_changed(self._hass, moment)


async def _briefing(
    hass: HomeAssistant,
    entity_id: str,
    alarm: datetime,
    alarm_entity: str = "",
    player: str = "media_player.bedroom",
    satellites: tuple[str, ...] = (),
) -> None:
    target = Path(hass.config.path("blueprints", "automation", "yomiage"))
    await hass.async_add_executor_job(
        lambda: shutil.copytree(BLUEPRINT, target, dirs_exist_ok=True)
    )
    automation = {
        "use_blueprint": {
            "path": f"yomiage/{NAME}",
            "input": {
                "alarm_time": alarm.strftime("%H:%M:%S"),
                "alarm_entity": alarm_entity,
                "media_player": player,
                "satellites": list(satellites),
                "tts_entity": entity_id,
                "voice": "tiny-b/Happy",
                "message": MESSAGE,
                "minutes_ahead": 10,
            },
        }
    }
    assert await async_setup_component(hass, "automation", {"automation": automation})
    await hass.async_block_till_done()


@pytest.mark.parametrize("alarm_from", ["time", "input_datetime"])
async def test_the_briefing_is_prepared_ahead_and_plays_on_time_from_the_cache(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    monkeypatch: pytest.MonkeyPatch,
    alarm_from: str,
) -> None:
    """The alarm as a time of day in the blueprint, or held by an input_datetime (the alarm
    time given then is another, and must not count). The clock is fired and, for the
    templates' now(), moved."""
    assert await async_setup_component(hass, "media_source", {})
    runs = record_engine_calls(loaded_entry, monkeypatch)
    plays: list[ServiceCall] = async_mock_service(hass, "media_player", "play_media")
    alarm = (dt_util.now() + timedelta(minutes=30)).replace(second=0, microsecond=0)
    if alarm_from == "time":
        await _briefing(hass, entity_id, alarm)
    else:
        held = {"has_time": True, "initial": alarm.strftime("%H:%M:%S")}
        assert await async_setup_component(
            hass, "input_datetime", {"input_datetime": {"alarm": held}}
        )
        await _briefing(hass, entity_id, alarm - timedelta(minutes=5), "input_datetime.alarm")

    clock = FiredClock(hass, monkeypatch)
    clock.at(alarm - timedelta(minutes=15))
    await asyncio.sleep(0.2)
    assert (runs, plays) == ([], []), "nothing before the lead"

    clock.at(alarm - timedelta(minutes=10))
    await _until(lambda: bool(runs))
    assert runs == ["stream_arriving"]  # prepared, as Home Assistant streams it
    await asyncio.sleep(0.2)
    assert plays == [], "prepared, not played: the alarm is ten minutes away"

    def alarm_rang() -> bool:
        # Fired until the run, done preparing, waits for the alarm and is woken by it.
        clock.at(alarm + timedelta(seconds=1))
        return len(plays) == 1

    await _until(alarm_rang)
    assert plays[0].data["entity_id"] == ["media_player.bedroom"]
    media = await media_source.async_resolve_media(hass, plays[0].data["media_content_id"], None)
    response = await (await hass_client()).get(str(media.url))
    assert response.status == 200 and len(await response.read()) > 1000
    assert runs == ["stream_arriving"], "played from the cache: no synthesis at the alarm"
    # Off, as a user turns it off: its trigger for tomorrow's alarm goes with it.
    await hass.services.async_call("automation", "turn_off", {"entity_id": "all"}, blocking=True)


async def test_the_briefing_is_announced_on_a_satellite_from_the_cache(
    hass: HomeAssistant,
    loaded_entry: MockConfigEntry,
    entity_id: str,
    satellite: Satellite,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No media player, an Assist satellite instead: prepared as its announcement asks (its
    pipeline's voice, its audio format), announced at the alarm from the cache."""
    runs = record_engine_calls(loaded_entry, monkeypatch)
    alarm = (dt_util.now() + timedelta(minutes=30)).replace(second=0, microsecond=0)
    await _briefing(hass, entity_id, alarm, player="", satellites=(SATELLITE,))
    clock = FiredClock(hass, monkeypatch)
    clock.at(alarm - timedelta(minutes=10))
    await _until(lambda: bool(runs))
    assert runs == ["stream_arriving"]
    await asyncio.sleep(0.2)
    assert satellite.asked == [], "prepared, not announced: the alarm is ten minutes away"

    def asked() -> bool:
        # Fired only until the satellite is asked: a later firing would run the timeout of
        # the HTTP fetch it then makes (its timer is due by the fired moment).
        if satellite.asked:
            return True
        clock.at(alarm + timedelta(seconds=1))
        return False

    await _until(asked)
    await _until(lambda: len(satellite.played) == 1)
    assert satellite.played[0][:4] == b"fLaC" and len(satellite.played[0]) > 1000
    assert runs == ["stream_arriving"], "announced from the cache: no synthesis at the alarm"
    await hass.services.async_call("automation", "turn_off", {"entity_id": "all"}, blocking=True)
