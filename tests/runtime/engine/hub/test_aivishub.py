"""Voices from AivisHub (engine/hub/aivishub.py) against a fake AivisHub on 127.0.0.1 serving the
AIVMX files the real tools wrote (tests/fixtures/dialects-tiny)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from custom_components.yomiage.engine.hub import aivishub
from custom_components.yomiage.engine.hub.aivishub import (
    API_VARIABLE,
    fetch_model,
    forget_model,
    installed_models,
    model_detail,
    model_uuid,
)
from custom_components.yomiage.engine.hub.download import FetchError, Progress
from custom_components.yomiage.engine.synthesis.engine import Engine

from ...fakeaivishub import FakeAivisHub, FakeModel, manifest_of, with_manifest
from ...voice_files import AIVMX, DUO_AIVMX
from ..common import QUIET

TINY_A = AIVMX.read_bytes()
UUID = str(manifest_of(TINY_A)["uuid"])


def duo_with_an_english_speaker() -> bytes:
    """The two-speaker file, its second speaker English only."""
    duo = DUO_AIVMX.read_bytes()
    speakers = manifest_of(duo)["speakers"]
    speakers[1]["supported_languages"] = ["en"]
    return with_manifest(duo, speakers=speakers)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, socket_enabled: None) -> Iterator[FakeAivisHub]:
    with FakeAivisHub([FakeModel([TINY_A])]) as fake:
        monkeypatch.setenv(API_VARIABLE, fake.api)
        yield fake


@pytest.mark.parametrize(
    "text",
    [
        f"https://hub.aivis-project.com/aivm-models/{UUID}",
        f"  https://hub.aivis-project.com/aivm-models/{UUID}/?tab=voices#top ",
        f"hub.aivis-project.com/aivm-models/{UUID.upper()}",
        UUID,
        UUID.upper(),
    ],
)
def test_a_model_is_named_by_its_page_or_its_uuid(text: str) -> None:
    assert model_uuid(text) == UUID


@pytest.mark.parametrize(
    "text", ["", "tiny-a", f"https://example.com/{UUID}", f"{UUID} and more", UUID[:-1]]
)
def test_other_text_is_refused(text: str) -> None:
    with pytest.raises(FetchError) as caught:
        model_uuid(text)
    assert caught.value.reason == "not_a_model"


def test_the_detail_says_what_the_user_gets(hub: FakeAivisHub) -> None:
    model = model_detail(UUID)
    assert (model.uuid, model.name, model.author) == (UUID, "tiny-a", "Yomiage tests")
    assert [(s.name, s.styles) for s in model.speakers] == [
        ("tiny-a", ("ノーマル", "Happy", "Sad"))
    ]
    assert model.file.version == "1.0.0"
    assert model.file.size == len(TINY_A)
    assert model.file.license_type == "ACML 1.0" and "ACML" in model.file.license_text
    assert model.page == f"https://hub.aivis-project.com/aivm-models/{UUID}"


def test_speakers_without_japanese_are_left_out(hub: FakeAivisHub) -> None:
    duo = FakeModel([duo_with_an_english_speaker()])
    hub.add(duo)
    assert [s.name for s in model_detail(duo.uuid).speakers] == ["duo-a"]
    all_english = manifest_of(DUO_AIVMX.read_bytes())["speakers"]
    for speaker in all_english:
        speaker["supported_languages"] = ["en"]
    english = FakeModel([with_manifest(DUO_AIVMX.read_bytes(), speakers=all_english)])
    hub.add(english)
    with pytest.raises(FetchError) as caught:
        model_detail(english.uuid)
    assert caught.value.reason == "no_japanese"


def test_a_model_of_another_architecture_is_refused(hub: FakeAivisHub) -> None:
    hub.models[UUID].architecture = "Style-Bert-VITS2"
    with pytest.raises(FetchError) as caught:
        model_detail(UUID)
    assert caught.value.reason == "unsupported_model"
    assert "Style-Bert-VITS2 (JP-Extra)" in str(caught.value)


@pytest.mark.parametrize(
    ("status", "reason"),
    [(404, "unknown_model"), (403, "private_model"), (503, "hub_down"), (400, "hub_error")],
)
def test_each_refusal_has_its_reason(hub: FakeAivisHub, status: int, reason: str) -> None:
    hub.answer(UUID, status)
    with pytest.raises(FetchError) as caught:
        model_detail(UUID)
    assert caught.value.reason == reason
    assert caught.value.translation_key == f"aivishub_{reason}"


def test_an_unreachable_aivishub_is_offline(
    monkeypatch: pytest.MonkeyPatch, socket_enabled: None
) -> None:
    with FakeAivisHub([]) as fake:
        api = fake.api
    monkeypatch.setenv(API_VARIABLE, api)  # nothing listens there any more
    with pytest.raises(FetchError) as caught:
        model_detail(UUID)
    assert caught.value.reason == "offline"


def test_the_file_arrives_whole_with_progress(hub: FakeAivisHub, tmp_path: Path) -> None:
    seen: list[Progress] = []
    path = fetch_model(tmp_path / "voices", model_detail(UUID), progress=seen.append)
    assert path == tmp_path / "voices" / f"{UUID}.aivmx"
    assert path.read_bytes() == TINY_A
    assert installed_models(tmp_path / "voices") == {UUID: "1.0.0"}
    assert seen[0].done_bytes == 0 and seen[-1].done_bytes == seen[-1].total_bytes == len(TINY_A)
    assert [p.done_bytes for p in seen] == sorted(p.done_bytes for p in seen)
    assert not list((tmp_path / "voices" / ".yomiage" / "blobs").iterdir())


def test_the_version_already_there_is_not_fetched_again(hub: FakeAivisHub, tmp_path: Path) -> None:
    model = model_detail(UUID)
    path = fetch_model(tmp_path, model)
    stamp = path.stat().st_mtime_ns
    assert fetch_model(tmp_path, model) == path
    assert path.stat().st_mtime_ns == stamp and len(hub.file_gets()) == 1


def test_a_cut_download_resumes_where_it_stopped(hub: FakeAivisHub, tmp_path: Path) -> None:
    model = model_detail(UUID)
    hub.cut_next(UUID, 600_000)
    with pytest.raises(FetchError) as caught:
        fetch_model(tmp_path, model)
    assert caught.value.reason == "interrupted"
    assert not (tmp_path / f"{UUID}.aivmx").exists()  # never half a voice where one is looked for
    (partial,) = (tmp_path / ".yomiage" / "blobs").iterdir()
    assert partial.stat().st_size == 600_000
    assert fetch_model(tmp_path, model).read_bytes() == TINY_A
    assert hub.ranges == [None, "bytes=600000-"]


def test_a_range_the_server_ignores_starts_the_file_over(hub: FakeAivisHub, tmp_path: Path) -> None:
    model = model_detail(UUID)
    staged = tmp_path / ".yomiage" / "blobs" / f"{UUID}-1.0.0.partial"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"x" * 1000)  # no prefix of the file: kept, it would spoil the result
    hub.faults.ignore_ranges = True
    assert fetch_model(tmp_path, model).read_bytes() == TINY_A


def test_a_file_that_does_not_match_is_deleted_and_the_old_one_kept(
    hub: FakeAivisHub, tmp_path: Path
) -> None:
    fetch_model(tmp_path, model_detail(UUID))
    hub.add(FakeModel([TINY_A, with_manifest(TINY_A, version="1.1.0")]))
    hub.corrupt(UUID)
    with pytest.raises(FetchError) as caught:
        fetch_model(tmp_path, model_detail(UUID))
    assert caught.value.reason == "verification"
    assert "SHA-256" in str(caught.value)
    assert (tmp_path / f"{UUID}.aivmx").read_bytes() == TINY_A
    assert not list((tmp_path / ".yomiage" / "blobs").iterdir())


def test_a_disk_too_small_is_said_before_anything_is_written(
    hub: FakeAivisHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = model_detail(UUID)
    real = shutil.disk_usage
    monkeypatch.setattr(aivishub.shutil, "disk_usage", lambda path: real(path)._replace(free=1000))
    with pytest.raises(FetchError) as caught:
        fetch_model(tmp_path, model)
    assert caught.value.reason == "disk_full"
    assert hub.file_gets() == []
    assert installed_models(tmp_path) == {}


def test_a_newer_version_replaces_the_installed_one(hub: FakeAivisHub, tmp_path: Path) -> None:
    fetch_model(tmp_path, model_detail(UUID))
    newer = with_manifest(TINY_A, version="1.1.0")
    hub.add(FakeModel([TINY_A, newer]))
    model = model_detail(UUID)
    assert model.file.version == "1.1.0"
    assert fetch_model(tmp_path, model).read_bytes() == newer
    assert installed_models(tmp_path) == {UUID: "1.1.0"}


def test_one_download_into_a_folder_at_a_time(hub: FakeAivisHub, tmp_path: Path) -> None:
    model = model_detail(UUID)
    entered, release = threading.Event(), threading.Event()

    def slow(progress: Progress) -> None:
        entered.set()
        release.wait(10)

    first = threading.Thread(target=fetch_model, args=(tmp_path, model), kwargs={"progress": slow})
    first.start()
    try:
        assert entered.wait(10)
        with pytest.raises(FetchError) as caught:
            fetch_model(tmp_path, model)
        assert caught.value.reason == "busy"
    finally:
        release.set()
        first.join(10)
    assert (tmp_path / f"{UUID}.aivmx").read_bytes() == TINY_A


def test_the_engine_speaks_the_fetched_voice_and_only_its_japanese_speakers(
    hub: FakeAivisHub, tmp_path: Path, tiny_bundle: Path
) -> None:
    duo = FakeModel([duo_with_an_english_speaker()])
    hub.add(duo)
    fetch_model(tmp_path / "voices", model_detail(duo.uuid))
    engine = Engine(tmp_path / "voices", device="cpu", threads=1, language_model=tiny_bundle)
    try:
        assert list(engine.voices) == ["duo-a"]
        assert engine.synthesize("はい。", QUIET).audio.size > 0
    finally:
        engine.close()


def test_a_removed_model_leaves_no_file_nor_partial(hub: FakeAivisHub, tmp_path: Path) -> None:
    model = model_detail(UUID)
    fetch_model(tmp_path, model)
    hub.add(FakeModel([TINY_A, with_manifest(TINY_A, version="1.1.0")]))
    hub.cut_next(UUID, 1000)
    with pytest.raises(FetchError):
        fetch_model(tmp_path, model_detail(UUID))
    forget_model(tmp_path, UUID)
    assert installed_models(tmp_path) == {}
    assert not list((tmp_path / ".yomiage" / "blobs").iterdir())
