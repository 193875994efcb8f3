"""A server's AivisHub voices (yomiage/voice_updates.py, ``yomiage serve --aivishub``): its
voices name their model's page and version, and a real Wyoming client has a model updated to the
version a fake AivisHub publishes while the server keeps speaking."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from wyoming.event import Event
from yomiage_engine import InvalidOptionError
from yomiage_engine.hub.aivishub import API_VARIABLE, PAGE_ROOT, installed_models
from yomiage_engine.synthesis.engine import Engine
from yomiage_engine.wyoming_contract import (
    AIVISHUB_PROGRESS,
    AIVISHUB_UPDATE,
    AIVISHUB_UPDATED,
)

from yomiage.voice_updates import AivisHubVoices
from yomiage.wyoming_server import WyomingTtsServer

from ..fakeaivishub import FakeAivisHub, FakeModel, manifest_of, with_manifest
from ..voice_files import AIVMX
from .client import QUIET, connect, read_until

TINY_A = AIVMX.read_bytes()
UUID = str(manifest_of(TINY_A)["uuid"]).lower()
NEWER = with_manifest(TINY_A, version="1.1.0")


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAivisHub]:
    with FakeAivisHub([FakeModel([TINY_A])]) as fake:
        monkeypatch.setenv(API_VARIABLE, fake.api)
        yield fake


@pytest.fixture
def voices(tmp_path: Path) -> Path:
    """A folder of voices holding tiny-a's AIVMX as AivisHub's download names it."""
    folder = tmp_path / "aivishub"
    folder.mkdir()
    shutil.copyfile(AIVMX, folder / f"{UUID}.aivmx")
    return folder


@pytest.fixture
async def server(voices: Path, tiny_bundle: Path) -> AsyncIterator[WyomingTtsServer]:
    def engine_for() -> Engine:
        return Engine(voices, device="cpu", threads=1, language_model=tiny_bundle)

    updates = AivisHubVoices.of(voices, [f"{PAGE_ROOT}{UUID}"], engine_for)
    server = WyomingTtsServer(engine_for(), options=QUIET, aivishub=updates)
    await server.start("tcp://127.0.0.1:0")
    yield server
    await server.stop()
    server.engine.close()


def voice_of(info: Event) -> dict[str, object]:
    voice: dict[str, object] = info.data["tts"][0]["voices"][0]
    return voice


async def describe(server: WyomingTtsServer) -> Event:
    async with connect(server) as client:
        await client.write_event(Event(type="describe"))
        (*_, info) = await read_until(client, "info")
    return info


async def test_a_voice_names_its_model_page_and_version(server: WyomingTtsServer) -> None:
    voice = voice_of(await describe(server))
    assert voice["version"] == "1.0.0"
    assert voice["attribution"] == {"name": "tiny-a", "url": f"{PAGE_ROOT}{UUID}"}


async def test_a_model_is_updated_to_its_newest_version(
    server: WyomingTtsServer, hub: FakeAivisHub, voices: Path
) -> None:
    hub.add(FakeModel([TINY_A, NEWER]))
    old_engine = server.engine
    async with connect(server) as client:
        await client.write_event(Event(type=AIVISHUB_UPDATE, data={"model": UUID}))
        events = await read_until(client, AIVISHUB_UPDATED, "error")
    assert events[-1].type == AIVISHUB_UPDATED, events[-1].data
    assert events[-1].data == {"model": UUID, "version": "1.1.0"}
    fractions = [event.data["fraction"] for event in events if event.type == AIVISHUB_PROGRESS]
    assert fractions[-1] == 1.0 and fractions == sorted(fractions)
    assert installed_models(voices) == {UUID: "1.1.0"}
    assert server.engine is not old_engine
    assert voice_of(await describe(server))["version"] == "1.1.0"
    async with connect(server) as client:  # the new engine speaks
        await client.write_event(Event(type="synthesize", data={"text": "はい。"}))
        reply = await read_until(client, "audio-stop", "error")
    assert reply[-1].type == "audio-stop"
    old_engine.close()


async def test_the_newest_already_there_loads_nothing(
    server: WyomingTtsServer, hub: FakeAivisHub
) -> None:
    engine = server.engine
    async with connect(server) as client:
        await client.write_event(Event(type=AIVISHUB_UPDATE, data={"model": UUID}))
        events = await read_until(client, AIVISHUB_UPDATED, "error")
    assert events[-1].data == {"model": UUID, "version": "1.0.0"}
    assert server.engine is engine and hub.file_gets() == []


@pytest.mark.parametrize(
    ("fault", "code"),
    [("down", "aivishub_hub_down"), ("cut", "aivishub_interrupted"), ("other", "unknown_model")],
)
async def test_a_failed_update_is_an_error_and_the_voice_speaks_on(
    server: WyomingTtsServer, hub: FakeAivisHub, voices: Path, fault: str, code: str
) -> None:
    hub.add(FakeModel([TINY_A, NEWER]))
    model = UUID
    if fault == "down":
        hub.answer(UUID, 503)
    elif fault == "cut":
        hub.cut_next(UUID, 500_000)
    else:
        model = "00000000-0000-0000-0000-000000000000"
    engine = server.engine
    async with connect(server) as client:
        await client.write_event(Event(type=AIVISHUB_UPDATE, data={"model": model}))
        events = await read_until(client, AIVISHUB_UPDATED, "error")
        assert events[-1].type == "error" and events[-1].data["code"] == code
        await client.write_event(Event(type="synthesize", data={"text": "はい。"}))
        reply = await read_until(client, "audio-stop", "error")
    assert reply[-1].type == "audio-stop"
    assert server.engine is engine
    assert installed_models(voices) == {UUID: "1.0.0"}


def test_a_model_must_be_in_the_folder_before_the_server_starts(
    tmp_path: Path, voices: Path
) -> None:
    with pytest.raises(InvalidOptionError, match="fetch it first"):
        AivisHubVoices.of(tmp_path, [UUID], lambda: pytest.fail("no engine is made"))
    assert AivisHubVoices.of(voices, [UUID.upper()], lambda: pytest.fail()).models == {UUID}
