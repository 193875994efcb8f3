"""Config flow from the Hub (official voices and other repos) against a fake Hub on 127.0.0.1.

The fake Hub serves the tiny bundle, so the flow downloads, checks and loads real graphs.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType

from custom_components.yomiage import config_flow
from custom_components.yomiage.const import (
    CONF_PATH,
    CONF_REPO_ID,
    CONF_REVISION,
    CONF_SOURCE,
    CONF_SPEAKERS,
    CONF_TOKEN,
    DOMAIN,
    SOURCE_HUGGINGFACE,
    SOURCE_OFFICIAL,
)
from custom_components.yomiage.diagnostics import async_get_config_entry_diagnostics
from custom_components.yomiage.engine.hub.download import DEFAULT_REPO, Progress, fetch_bundle

from ..fakehub import FakeHub, FakeRepo
from .common import PRIVATE, SPEAKERS, TOKEN, download_speakers, engine_of, flow_menu, shown


@pytest.fixture
def speakers(tiny_bundle: Path) -> list[str]:
    return sorted(p.name for p in (tiny_bundle / SPEAKERS).iterdir() if p.is_dir())


async def test_official_voices_download_the_chosen_speaker(
    hass: HomeAssistant, hub: FakeHub, models_dir: Path, speakers: list[str], tiny_bundle: Path
) -> None:
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    assert result["type"] is FlowResultType.FORM and result["step_id"] == "speakers"
    offered = [o["value"] for o in result["data_schema"].schema[CONF_SPEAKERS].config["options"]]
    assert offered == speakers

    result = await download_speakers(hass, result["flow_id"], [speakers[-1]])
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    folder = models_dir / DEFAULT_REPO.replace("/", "--")
    assert result["title"] == speakers[-1], "the official voices are named by their speakers"
    assert result["data"] == {
        CONF_SOURCE: SOURCE_OFFICIAL,
        CONF_PATH: str(folder),
        CONF_REPO_ID: DEFAULT_REPO,
        CONF_REVISION: FakeRepo.from_folder(tiny_bundle).commit,
        CONF_SPEAKERS: [speakers[-1]],
    }
    assert sorted(p.name for p in (folder / SPEAKERS).iterdir()) == [speakers[-1]]
    await hass.async_block_till_done()
    entry = result["result"]
    assert entry.state is ConfigEntryState.LOADED
    assert list(engine_of(entry).voices) == [speakers[-1]]

    diagnostics = await async_get_config_entry_diagnostics(hass, entry)
    assert diagnostics["entry"]["bundle_folder"] == f"<models>/{folder.name}"
    assert str(models_dir) not in json.dumps(diagnostics)

    # The downloaded folder belongs to the entry: removing the entry frees the disk.
    await hass.config_entries.async_remove(entry.entry_id)
    assert not folder.exists()
    assert models_dir.is_dir()


async def test_same_repo_twice_aborts(
    hass: HomeAssistant, hub: FakeHub, models_dir: Path, speakers: list[str]
) -> None:
    first = await flow_menu(hass, SOURCE_OFFICIAL)
    assert (await download_speakers(hass, first["flow_id"], speakers[:1]))["type"] is (
        FlowResultType.CREATE_ENTRY
    )
    await hass.async_block_till_done()
    second = await flow_menu(hass, SOURCE_OFFICIAL)
    result = await hass.config_entries.flow.async_configure(
        second["flow_id"], {CONF_SPEAKERS: speakers[1:]}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "already_configured"


async def test_no_speaker_chosen(hass: HomeAssistant, hub: FakeHub, models_dir: Path) -> None:
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_SPEAKERS: []})
    assert result["errors"] == {"base": "no_speaker_chosen"}


async def test_private_repository_needs_its_token(
    hass: HomeAssistant, hub: FakeHub, models_dir: Path, speakers: list[str]
) -> None:
    result = await flow_menu(hass, SOURCE_HUGGINGFACE)
    assert result["step_id"] == SOURCE_HUGGINGFACE
    flow_id = result["flow_id"]

    result = await hass.config_entries.flow.async_configure(flow_id, {CONF_REPO_ID: PRIVATE})
    assert result["type"] is FlowResultType.FORM
    assert result["errors"]["base"] in {"download_unknown_repo", "download_unauthorized"}
    error = f"config.error.{result['errors']['base']}"
    assert PRIVATE in await shown(hass, "ja", error, result["description_placeholders"])

    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_REPO_ID: f" {PRIVATE} ", CONF_TOKEN: TOKEN}
    )
    assert result["step_id"] == "speakers"
    result = await download_speakers(hass, flow_id, speakers)
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    assert result["title"] == PRIVATE
    assert result["data"][CONF_TOKEN] == TOKEN
    assert result["data"][CONF_SOURCE] == SOURCE_HUGGINGFACE
    await hass.async_block_till_done()


@pytest.mark.parametrize(
    ("user_input", "error"),
    [
        ({CONF_REPO_ID: "nobody/nothing"}, "download_unknown_repo"),
        ({CONF_REPO_ID: "not a repo id"}, "download_unknown_repo"),
        ({CONF_REPO_ID: DEFAULT_REPO, CONF_REVISION: "v999"}, "download_unknown_revision"),
    ],
)
async def test_repository_errors_are_shown_in_the_form(
    hass: HomeAssistant,
    hub: FakeHub,
    user_input: dict[str, str],
    error: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The form names the repository (and revision) in the user's language; the Hub's own
    words go to the log."""
    result = await flow_menu(hass, SOURCE_HUGGINGFACE)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], user_input)
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": error}
    text = await shown(hass, "ja", f"config.error.{error}", result["description_placeholders"])
    assert user_input[CONF_REPO_ID] in text
    assert user_input.get(CONF_REVISION, "") in text
    assert user_input[CONF_REPO_ID] in caplog.text


async def test_repository_without_the_bundle_layout(
    hass: HomeAssistant, hub: FakeHub, tiny_bundle: Path
) -> None:
    files = FakeRepo.from_folder(tiny_bundle).files
    hub.repos["someone/not-voices"] = FakeRepo(
        {path: data for path, data in files.items() if not path.startswith("onnx/bert/")}
    )
    result = await flow_menu(hass, SOURCE_HUGGINGFACE)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_REPO_ID: "someone/not-voices"}
    )
    assert result["errors"] == {"base": "download_bad_layout"}


async def test_interrupted_download_continues_on_the_next_try(
    hass: HomeAssistant,
    hub: FakeHub,
    models_dir: Path,
    speakers: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    graph = f"{SPEAKERS.as_posix()}/{speakers[0]}/synthesizer.onnx"
    hub.cut_next(DEFAULT_REPO, graph, after_bytes=40_000)
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    flow_id = result["flow_id"]

    result = await download_speakers(hass, flow_id, speakers[:1])
    assert result["type"] is FlowResultType.FORM and result["step_id"] == "speakers"
    assert result["errors"] == {"base": "download_interrupted"}
    assert graph in caplog.text, "the file that broke off is in the log"

    result = await download_speakers(hass, flow_id, speakers[:1])
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    retry = hub.file_gets(graph)[-1]
    assert retry.range is not None and retry.range != "bytes=0-", "resumed, not restarted"
    await hass.async_block_till_done()


async def test_closing_the_flow_stops_its_download(
    hass: HomeAssistant,
    hub: FakeHub,
    models_dir: Path,
    speakers: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Home Assistant cancels the task, not the downloading thread: the thread stops at its next
    progress report once the dialog is closed, and the next try gets the voices."""
    midway, go_on, ended = threading.Event(), threading.Event(), threading.Event()
    stopped: list[BaseException] = []

    def held_fetch(*args: Any, progress: Callable[[Progress], None], **kwargs: Any) -> Path:
        def report(update: Progress) -> None:
            if update.done_bytes and not midway.is_set():  # the first bytes: wait for the test
                midway.set()
                go_on.wait(10)
            progress(update)

        try:
            return fetch_bundle(*args, progress=report, **kwargs)
        except BaseException as err:
            stopped.append(err)
            raise
        finally:
            ended.set()

    monkeypatch.setattr(config_flow, "fetch_bundle", held_fetch)
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_SPEAKERS: speakers[:1]}
    )
    assert result["type"] is FlowResultType.SHOW_PROGRESS, result
    assert await asyncio.to_thread(midway.wait, 10)
    fetched = len(hub.file_gets())
    hass.config_entries.flow.async_abort(result["flow_id"])
    go_on.set()
    assert await asyncio.to_thread(ended.wait, 10)
    assert stopped, "the download stopped midway"
    assert len(hub.file_gets()) == fetched, "no file was asked for after the flow was closed"

    result = await flow_menu(hass, SOURCE_OFFICIAL)
    result = await download_speakers(hass, result["flow_id"], speakers[:1])
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    await hass.async_block_till_done()


async def test_official_voices_offline_say_why_and_try_again_on_submit(
    hass: HomeAssistant, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network: the flow says so in the user's language and stays open; once the Hub
    answers again, submitting goes on to the speakers."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, SOURCE_OFFICIAL)
    assert result["errors"] == {"base": "download_offline"}
    text = await shown(hass, "ja", "config.error.download_offline", None)
    assert "接続できません" in text and "Errno" not in text

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {})
    assert (result["type"], result["step_id"]) == (FlowResultType.FORM, "speakers")


async def test_incomplete_download_is_fetched_again_at_setup(
    hass: HomeAssistant, hub: FakeHub, models_dir: Path, speakers: list[str]
) -> None:
    result = await flow_menu(hass, SOURCE_OFFICIAL)
    result = await download_speakers(hass, result["flow_id"], speakers[:1])
    await hass.async_block_till_done()
    entry = result["result"]
    graph = Path(entry.data[CONF_PATH]) / SPEAKERS / speakers[0] / "synthesizer.onnx"

    assert await hass.config_entries.async_unload(entry.entry_id)
    graph.unlink()
    assert await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.LOADED
    assert graph.is_file()

    assert await hass.config_entries.async_unload(entry.entry_id)
    graph.unlink()
    hub.stop()  # the Hub is unreachable now: worth another try later
    assert not await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_RETRY


async def test_downloaded_bundle_is_checked_before_the_entry_exists(
    hass: HomeAssistant, hub: FakeHub, models_dir: Path, speakers: list[str], tiny_bundle: Path
) -> None:
    graph = f"{SPEAKERS.as_posix()}/{speakers[0]}/synthesizer.onnx"
    files = dict(FakeRepo.from_folder(tiny_bundle).files)
    files[graph] = b"not an onnx graph" * 100
    hub.repos["someone/broken-voices"] = FakeRepo(files)
    result = await flow_menu(hass, SOURCE_HUGGINGFACE)
    flow_id = result["flow_id"]
    await hass.config_entries.flow.async_configure(flow_id, {CONF_REPO_ID: "someone/broken-voices"})

    result = await download_speakers(hass, flow_id, speakers[:1])
    assert result["type"] is FlowResultType.FORM and result["step_id"] == "speakers"
    assert result["errors"] == {"base": "broken_graph"}
    assert result["description_placeholders"]["file"] == graph
    assert not hass.config_entries.async_entries(DOMAIN)
