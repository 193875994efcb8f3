"""Home Assistant OS, simulated: a Supervisor (tests/runtime/supervisor_double.py) behind Home
Assistant's own Supervisor client, the engine unable to run in Home Assistant (musl), and our
add-on a real process of its run script, which downloads the official voices from the fake Hub,
serves them and announces itself. The user answers the flow's questions and hears speech."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.const import STATE_UNAVAILABLE
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.service_info.hassio import HassioServiceInfo
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_fire_time_changed
from wyoming.event import async_read_event, async_write_event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from custom_components.yomiage import supervisor as yomiage_supervisor
from custom_components.yomiage.const import (
    CONF_ADDON,
    CONF_HOST,
    CONF_PATH,
    CONF_PORT,
    CONF_SOURCE,
    CONF_SPEAKERS,
    DOMAIN,
    SOURCE_ADDON,
    SOURCE_WYOMING,
)
from custom_components.yomiage.engine.wyoming_contract import MINIMUM_SERVER_VERSION
from custom_components.yomiage.server_watch import POLL_INTERVAL, outdated_issue_id
from custom_components.yomiage.supervisor import ADDON_SLUG, REPOSITORY_SLUG

from ..fakehub import FakeHub
from ..supervisor_double import ADDON_TOKEN, StuckAddon, SupervisorDouble
from ..wav import read_wav
from ..yomiage.addon import RunScriptAddon, wait_for
from .common import SPEAKERS
from .home_assistant_os import (
    choose,
    install_and_start,
    past_progress,
    speak,
    speakers_of,
    start_installed_addon,
    supervisor_at,
    to_speakers,
)

ADDON_STEPS = [
    "POST /store/repositories",
    f"POST /store/addons/{ADDON_SLUG}/install",
    f"POST /addons/{ADDON_SLUG}/options",
    f"POST /addons/{ADDON_SLUG}/start",
    "POST /discovery",
]
ANNOUNCED_S = 120.0  # the run script's first start: voices fetched, graphs prepared, served


@pytest.fixture(autouse=True)
async def _http(hass: HomeAssistant) -> AsyncIterator[None]:
    assert await async_setup_component(hass, "http", {})
    yield


async def test_from_installed_integration_to_speech_by_answering_the_flow(
    hass: HomeAssistant, supervised: SupervisorDouble, addon: RunScriptAddon, tiny_bundle: Path
) -> None:
    """Three answers (the add-on, its voices, a speaker), two progress screens, then speech."""
    speaker = speakers_of(tiny_bundle)[-1]
    result = await install_and_start(hass, await to_speakers(hass), speaker)

    assert result["type"] is FlowResultType.CREATE_ENTRY, (result, addon.log.read_text())
    assert result["title"] == "Yomiage app"
    assert result["data"] == {
        CONF_SOURCE: SOURCE_WYOMING,
        CONF_HOST: "127.0.0.1",
        CONF_PORT: addon.port,
        CONF_ADDON: ADDON_SLUG,
    }
    assert result["result"].unique_id == ADDON_SLUG
    assert supervised.steps() == ADDON_STEPS
    # The add-on's own defaults, with the voices chosen in the flow.
    assert supervised.options == {
        **supervised.config["options"],
        "voices": "official",
        "hub_repo": "",
        "speakers": [speaker],
    }
    (announcement,) = [c for c in supervised.calls if (c.method, c.path) == ("POST", "/discovery")]
    assert announcement.authorization == f"Bearer {ADDON_TOKEN}", "the add-on's own token"
    await hass.async_block_till_done()
    audio = read_wav(await speak(hass, "おはようございます。今日は晴れです。"))
    assert audio.sample_rate == 44100 and len(audio.pcm) > 44100  # over half a second
    downloaded = addon.data / "voices" / "lemondouble--hayakoe" / SPEAKERS
    assert sorted(p.name for p in downloaded.iterdir()) == [speaker]


@pytest.mark.parametrize(
    ("step", "reason", "left_steps"),
    [
        ("add_repository", "addon_repository_failed", ["POST /store/repositories"]),
        (
            "install",
            "addon_install_failed",
            [
                "POST /store/repositories",
                f"POST /store/addons/{ADDON_SLUG}/install",
                f"POST /addons/{ADDON_SLUG}/uninstall",  # refused: it is not installed
                f"DELETE /store/repositories/{REPOSITORY_SLUG}",
            ],
        ),
        (
            "options",
            "addon_options_failed",
            [
                *ADDON_STEPS[:3],
                f"POST /addons/{ADDON_SLUG}/uninstall",
                f"DELETE /store/repositories/{REPOSITORY_SLUG}",
            ],
        ),
    ],
)
async def test_each_install_failure_ends_the_flow_with_its_reason_and_undoes_the_rest(
    hass: HomeAssistant,
    supervised: SupervisorDouble,
    tiny_bundle: Path,
    step: str,
    reason: str,
    left_steps: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervised.refuse[step] = f"the Supervisor says no to {step}"
    result = await install_and_start(hass, await to_speakers(hass), speakers_of(tiny_bundle)[0])

    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, reason)
    assert f"the Supervisor says no to {step}" in caplog.text, "its words go to the log"
    assert supervised.steps() == left_steps
    assert not supervised.installed and not supervised.repository_added, "nothing half set up"
    assert not hass.config_entries.async_entries(DOMAIN)


async def test_a_refused_start_keeps_the_add_on_for_its_log_and_the_next_try(
    hass: HomeAssistant,
    supervised: SupervisorDouble,
    tiny_bundle: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervised.refuse["start"] = "the Supervisor says no to start"
    result = await install_and_start(hass, await to_speakers(hass), speakers_of(tiny_bundle)[0])
    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_start_failed")
    assert "the Supervisor says no to start" in caplog.text
    assert supervised.steps() == ADDON_STEPS[:4]
    assert supervised.installed and supervised.options["speakers"] == [speakers_of(tiny_bundle)[0]]

    del supervised.refuse["start"]  # the next try starts the add-on it finds, asking nothing
    result = await start_installed_addon(hass)
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    assert await hass.config_entries.async_unload(result["result"].entry_id)


async def test_a_start_whose_answer_is_lost_is_judged_by_the_add_ons_state(
    hass: HomeAssistant, supervised: SupervisorDouble, tiny_bundle: Path
) -> None:
    """Home Assistant's client gives up on a start after 60 s; the Supervisor waits 120 s and
    a first start takes minutes: the add-on starting or started is what counts."""
    supervised.lose_start_answer = True
    result = await install_and_start(hass, await to_speakers(hass), speakers_of(tiny_bundle)[0])
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    assert await hass.config_entries.async_unload(result["result"].entry_id)


async def test_a_flow_left_during_the_install_undoes_what_it_did(
    hass: HomeAssistant, supervised: SupervisorDouble, tiny_bundle: Path
) -> None:
    """The user closes the dialog while the Supervisor still installs: once the install lands,
    it is uninstalled and the repository removed, in the background."""
    supervised.hold_install = threading.Event()
    result = await choose(
        hass, await to_speakers(hass), {CONF_SPEAKERS: [speakers_of(tiny_bundle)[0]]}
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.SHOW_PROGRESS, "addon_install")
    await asyncio.to_thread(wait_for, lambda: bool(supervised.steps()[1:]), 10)  # installing
    hass.config_entries.flow.async_abort(result["flow_id"])
    supervised.hold_install.set()
    await hass.async_block_till_done(wait_background_tasks=True)

    assert supervised.steps() == [
        "POST /store/repositories",
        f"POST /store/addons/{ADDON_SLUG}/install",
        f"POST /addons/{ADDON_SLUG}/uninstall",
        f"DELETE /store/repositories/{REPOSITORY_SLUG}",
    ]
    assert not supervised.installed and not supervised.repository_added


async def test_an_add_on_that_stops_while_starting_says_where_to_look(
    hass: HomeAssistant,
    supervised: SupervisorDouble,
    addon: RunScriptAddon,
    tiny_bundle: Path,
) -> None:
    """The add-on cannot reach the Hub (Home Assistant could): its run script exits 1."""
    addon.environment["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens there
    result = await install_and_start(hass, await to_speakers(hass), speakers_of(tiny_bundle)[0])

    assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_stopped")
    assert "could not download the voices" in addon.log.read_text()
    assert supervised.installed, "kept: its log says why, the next try starts it again"


async def test_an_add_on_that_never_answers_ends_the_flow_in_time(
    hass: HomeAssistant,
    home_assistant_os: None,
    tiny_bundle: Path,
    hub: FakeHub,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(yomiage_supervisor, "START_TIMEOUT_S", 0.0)  # the wait, cut to nothing
    with SupervisorDouble(StuckAddon(), start_wait_s=0) as double:
        supervisor_at(hass, double)
        result = await install_and_start(hass, await to_speakers(hass), speakers_of(tiny_bundle)[0])
        assert (result["type"], result["reason"]) == (FlowResultType.ABORT, "addon_no_answer")
        assert "did not answer within 0 min" in caplog.text
        assert double.installed and double.state == "startup"


async def test_a_folder_under_share_becomes_the_add_ons_local_voices(
    hass: HomeAssistant, supervised: SupervisorDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is checked where Home Assistant sees /share too (normalised), then handed
    to the add-on's options (the flow goes on to start it: not this test's concern)."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await choose(hass, result, {"next_step_id": SOURCE_ADDON})
    result = await choose(hass, result, {"next_step_id": "addon_folder"})
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "addon_folder")

    for outside in ("/config/voices", "/share/../config", "share/yomiage"):
        result = await choose(hass, result, {CONF_PATH: outside})
        assert result["errors"] == {"base": "addon_folder_not_shared"}, outside
    result = await choose(hass, result, {CONF_PATH: "/share/yomiage-missing"})
    assert result["errors"] == {"base": "not_a_folder"}

    monkeypatch.setattr(Path, "is_dir", lambda path: str(path) == "/share/yomiage")
    result = await choose(hass, result, {CONF_PATH: "/share/yomiage"})
    result = await past_progress(hass, result, "addon_install")
    options_call = next(c for c in supervised.calls if c.path.endswith("/options"))
    assert options_call.body["options"]["voices"] == "local"
    assert options_call.body["options"]["local_folder"] == "/share/yomiage"


async def test_an_installed_add_on_is_started_and_reused_without_questions(
    hass: HomeAssistant, installed: SupervisorDouble, addon: RunScriptAddon
) -> None:
    result = await start_installed_addon(hass)

    assert result["type"] is FlowResultType.CREATE_ENTRY, (result, addon.log.read_text())
    assert installed.steps() == [f"POST /addons/{ADDON_SLUG}/start", "POST /discovery"]
    await hass.async_block_till_done()
    assert await speak(hass, "こんにちは。")
    assert await hass.config_entries.async_unload(result["result"].entry_id)


async def test_the_add_ons_announcement_ends_in_a_yomiage_entry_once(
    hass: HomeAssistant, installed: SupervisorDouble, addon: RunScriptAddon
) -> None:
    """An add-on installed by hand announces itself as the yomiage service: Home Assistant hands
    that to this flow (not to the Wyoming integration), which confirms and adds it; a second
    announcement (a restart) changes nothing."""
    assert installed.answer("POST", f"/addons/{ADDON_SLUG}/start", {})[0] == 200
    await asyncio.to_thread(wait_for, lambda: bool(installed.discovery), ANNOUNCED_S)
    (message,) = installed.discovery
    assert message["service"] == DOMAIN, "announced to Yomiage's own flow only"
    discovery = HassioServiceInfo(
        config=message["config"], name="Yomiage", slug=ADDON_SLUG, uuid=message["uuid"]
    )
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_HASSIO}, data=discovery
    )
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "hassio_confirm")
    result = await choose(hass, result, {})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"][CONF_ADDON] == ADDON_SLUG
    await hass.async_block_till_done()
    assert await speak(hass, "こんにちは。")

    loaded = result["result"].runtime_data
    again = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_HASSIO}, data=discovery
    )
    assert (again["type"], again["reason"]) == (FlowResultType.ABORT, "already_configured")
    assert len(hass.config_entries.async_entries(DOMAIN)) == 1
    await hass.async_block_till_done()
    assert result["result"].runtime_data is loaded, "seen again, same address: no reload"
    assert await hass.config_entries.async_unload(result["result"].entry_id)


# -- the entry and its server over time ----------------------------------------------------------
async def _poll(hass: HomeAssistant) -> None:
    """The half minute after which a server entry asks its server again (in the background)."""
    async_fire_time_changed(hass, dt_util.utcnow() + POLL_INTERVAL + timedelta(seconds=1))
    await hass.async_block_till_done(wait_background_tasks=True)


async def test_the_entry_survives_the_add_ons_restart_without_a_reload(
    hass: HomeAssistant, installed: SupervisorDouble, addon: RunScriptAddon
) -> None:
    """Unavailable while the add-on is down (stopped for an update), speaking again after."""
    result = await start_installed_addon(hass)
    entry = result["result"]
    await hass.async_block_till_done()
    loaded = entry.runtime_data
    (entity_id,) = hass.states.async_entity_ids("tts")

    assert installed.answer("POST", f"/addons/{ADDON_SLUG}/stop", {})[0] == 200
    await _poll(hass)
    assert hass.states.get(entity_id).state == STATE_UNAVAILABLE  # type: ignore[union-attr]

    # The Supervisor's start answers once the add-on is healthy (its server answers).
    assert installed.answer("POST", f"/addons/{ADDON_SLUG}/start", {})[0] == 200
    await _poll(hass)
    assert hass.states.get(entity_id).state != STATE_UNAVAILABLE  # type: ignore[union-attr]
    assert entry.state is ConfigEntryState.LOADED
    assert entry.runtime_data is loaded, "the same entry, not reloaded"
    assert await speak(hass, "おかえりなさい。")
    assert await hass.config_entries.async_unload(entry.entry_id)


class _OldServer:
    """A Wyoming server that only describes itself, as a Yomiage server of ``version``."""

    def __init__(self) -> None:
        self.version = "0.0.9"
        self.voices = ["tiny-a/Neutral"]
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> int:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await async_read_event(reader) is not None:
            voices = [
                TtsVoice(
                    name=name,
                    description=name,
                    attribution=Attribution(name="", url=""),
                    installed=True,
                    version=None,
                    languages=["ja"],
                )
                for name in self.voices
            ]
            program = TtsProgram(
                name="yomiage",
                description="Yomiage",
                attribution=Attribution(name="", url=""),
                installed=True,
                version=self.version,
                voices=voices,
            )
            await async_write_event(Info(tts=[program]).event(), writer)
        writer.close()


async def test_a_server_older_than_the_integration_raises_a_repair_issue_until_updated(
    hass: HomeAssistant, socket_enabled: None
) -> None:
    server = _OldServer()
    async with server as port:
        entry = MockConfigEntry(
            domain=DOMAIN,
            title="Yomiage add-on",
            unique_id=ADDON_SLUG,
            data={CONF_SOURCE: SOURCE_WYOMING, CONF_HOST: "127.0.0.1", CONF_PORT: port}
            | {CONF_ADDON: ADDON_SLUG},
        )
        entry.add_to_hass(hass)
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        issue = ir.async_get(hass).async_get_issue(DOMAIN, outdated_issue_id(entry))
        assert issue is not None and issue.translation_key == "addon_outdated"
        assert issue.translation_placeholders == {
            "title": "Yomiage add-on",
            "version": "0.0.9",
            "required": MINIMUM_SERVER_VERSION,
        }

        server.version = MINIMUM_SERVER_VERSION  # the add-on updated
        loaded = entry.runtime_data
        await _poll(hass)
        assert ir.async_get(hass).async_get_issue(DOMAIN, outdated_issue_id(entry)) is None
        assert entry.runtime_data is loaded, "the same voices: no reload"

        server.voices.append("tiny-b/Happy")  # the update brought a speaker
        await _poll(hass)
        assert entry.runtime_data is not loaded, "reloaded with the server's new voices"
        assert entry.runtime_data.backend.voices == {"tiny-a": ["Neutral"], "tiny-b": ["Happy"]}

        # The same server discovered as the add-on later: no second entry.
        discovery = HassioServiceInfo(
            config={CONF_HOST: "127.0.0.1", CONF_PORT: port},
            name="Yomiage",
            slug="local_yomiage",
            uuid="0f1e",
        )
        again = await hass.config_entries.flow.async_init(
            DOMAIN, context={"source": config_entries.SOURCE_HASSIO}, data=discovery
        )
        assert (again["type"], again["reason"]) == (FlowResultType.ABORT, "already_configured")
        assert await hass.config_entries.async_unload(entry.entry_id)
