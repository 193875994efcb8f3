"""The Hub downloader against a fake Hub on 127.0.0.1 (real huggingface_hub HTTP, no real Hub)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from custom_components.yomiage.engine.hub.download import (
    FetchError,
    Progress,
    fetch_bundle,
    installed_speakers,
    list_offer,
    local_bundle,
)
from custom_components.yomiage.engine.hub.store import ModelDir

from ...fakehub import FakeHub, FakeRepo

REPO = "voices/test"
SPEAKERS = ("F1", "M1")
SHARED = (
    "bert/tokenizer/vocab.txt",
    "bert/tokenizer/tokenizer_config.json",
    "onnx/bert/q8/bert_q8.onnx",
)
SPEAKER_FILES = ("config.json", "style_vectors.npy", "synthesizer.onnx", "duration_predictor.onnx")
NOT_FETCHED = ("onnx/bert/fp32/bert.onnx", "pytorch/F1/model.safetensors", "README.md")


def voices_files(speakers: tuple[str, ...] = SPEAKERS, seed: int = 0) -> dict[str, bytes]:
    """A voices repo in the published layout; contents are random (the downloader never parses)."""
    rng = random.Random(seed)
    files = {path: rng.randbytes(rng.randrange(20, 3000)) for path in (*SHARED, *NOT_FETCHED)}
    files["onnx/bert/q8/bert_q8.onnx"] = rng.randbytes(150_000)
    for name in speakers:
        for file in SPEAKER_FILES:
            size = 200_000 if file == "synthesizer.onnx" else rng.randrange(100, 5000)
            files[f"onnx/speakers/{name}/{file}"] = rng.randbytes(size)
    return files


def bundle_files(files: dict[str, bytes], speakers: tuple[str, ...]) -> dict[str, bytes]:
    """What a bundle with ``speakers`` should hold."""
    prefixes = [f"onnx/speakers/{name}/" for name in speakers]
    return {
        path: data
        for path, data in files.items()
        if path in SHARED or any(path.startswith(prefix) for prefix in prefixes)
    }


def on_disk(root: Path) -> dict[str, bytes]:
    """The bundle's files (the .yomiage state folder left out)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and ".yomiage" not in path.relative_to(root).parts
    }


@pytest.fixture(autouse=True)
def hub_settings(monkeypatch: pytest.MonkeyPatch, socket_enabled: None) -> None:
    """Sockets on (the Home Assistant plugin blocks them), no telemetry, no ambient settings.

    Reads in 16 KiB pieces instead of 10 MiB so that a cut in a small test file leaves a
    partial file behind, as a cut in a real 500 MB file does.
    """
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    for name in ("HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)


@pytest.fixture
def repo() -> FakeRepo:
    return FakeRepo(voices_files())


@pytest.fixture
def hub(repo: FakeRepo) -> Iterator[FakeHub]:
    with FakeHub({REPO: repo}) as hub:
        yield hub


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return tmp_path / "voices"


def fetch(hub: FakeHub, model_dir: Path, **kwargs: object) -> Path:
    return fetch_bundle(model_dir, REPO, endpoint=hub.url, **kwargs)  # type: ignore[arg-type]


# --- listing -----------------------------------------------------------------------------------
def test_lists_the_speakers_the_repo_offers(hub: FakeHub, repo: FakeRepo) -> None:
    offer = list_offer(REPO, endpoint=hub.url)

    assert offer.speakers == SPEAKERS
    assert offer.commit == repo.commit
    assert offer.revision == "main"
    shared = sum(len(repo.files[path]) for path in SHARED)
    f1 = sum(len(data) for path, data in repo.files.items() if path.startswith("onnx/speakers/F1/"))
    assert offer.speaker_size("F1") == f1
    assert offer.download_size(["F1"]) == shared + f1
    assert offer.download_size([]) == shared


def test_speakers_are_discovered_not_hard_coded() -> None:
    with FakeHub({REPO: FakeRepo(voices_files(("zundamon", "A-2")))}) as hub:
        assert list_offer(REPO, endpoint=hub.url).speakers == ("A-2", "zundamon")


# --- fetching ----------------------------------------------------------------------------------
def test_fetches_only_the_shared_parts_and_the_chosen_speaker(
    hub: FakeHub, repo: FakeRepo, model_dir: Path
) -> None:
    root = fetch(hub, model_dir, speakers=["M1"])

    assert root == model_dir
    assert on_disk(root) == bundle_files(repo.files, ("M1",))
    assert {r.path for r in hub.file_gets()} == set(bundle_files(repo.files, ("M1",)))
    assert installed_speakers(root) == ("M1",)
    assert local_bundle(root, ["M1"]) == root
    assert local_bundle(root, ["F1"]) is None


def test_all_speakers_when_none_are_named(hub: FakeHub, repo: FakeRepo, model_dir: Path) -> None:
    fetch(hub, model_dir)

    assert on_disk(model_dir) == bundle_files(repo.files, SPEAKERS)
    assert installed_speakers(model_dir) == SPEAKERS


def test_progress_is_monotone_and_ends_at_the_total(hub: FakeHub, model_dir: Path) -> None:
    events: list[Progress] = []
    fetch(hub, model_dir, speakers=["F1"], progress=events.append)

    total = list_offer(REPO, endpoint=hub.url).download_size(["F1"])
    done = [event.done_bytes for event in events]
    assert len(events) > 10  # per chunk, not only start and end
    assert {event.total_bytes for event in events} == {total}
    assert done == sorted(done)
    assert done[0] == 0 and done[-1] == total
    assert {event.path for event in events} >= {"onnx/speakers/F1/synthesizer.onnx", None}


def test_second_run_transfers_nothing(hub: FakeHub, model_dir: Path) -> None:
    fetch(hub, model_dir, speakers=["F1"])
    served = len(hub.requests)
    events: list[Progress] = []

    fetch(hub, model_dir, speakers=["F1"], progress=events.append)

    again = hub.requests[served:]
    assert [r.kind for r in again] == [
        "api",
        "api",
    ]  # revision + listing, no HEAD, no GET of a file
    assert all(event.done_bytes == event.total_bytes for event in events)


def test_adding_a_speaker_later_fetches_only_that_speaker(hub: FakeHub, model_dir: Path) -> None:
    fetch(hub, model_dir, speakers=["F1"])
    served = len(hub.file_gets())

    fetch(hub, model_dir, speakers=["M1"])

    paths = {r.path for r in hub.file_gets()[served:]}
    assert paths == {f"onnx/speakers/M1/{name}" for name in SPEAKER_FILES}
    assert installed_speakers(model_dir) == SPEAKERS


def test_a_new_commit_replaces_only_the_changed_file(
    hub: FakeHub, repo: FakeRepo, model_dir: Path
) -> None:
    fetch(hub, model_dir, speakers=["F1"])
    old_commit = repo.commit
    changed = "onnx/speakers/F1/style_vectors.npy"
    repo.files[changed] = os.urandom(777)
    served = len(hub.file_gets())

    fetch(hub, model_dir, speakers=["F1"])

    assert repo.commit != old_commit
    assert [r.path for r in hub.file_gets()[served:]] == [changed]
    assert on_disk(model_dir) == bundle_files(repo.files, ("F1",))


def test_the_revision_is_passed_to_the_hub(hub: FakeHub, repo: FakeRepo, model_dir: Path) -> None:
    offer = list_offer(REPO, revision=repo.commit, endpoint=hub.url)
    fetch(hub, model_dir, speakers=["F1"], revision=offer.commit)

    assert offer.revision == offer.commit == repo.commit
    assert any(r.path.endswith(f"/revision/{repo.commit}") for r in hub.requests)


# --- broken transfers --------------------------------------------------------------------------
def test_a_cut_transfer_continues_where_it_stopped(
    hub: FakeHub, repo: FakeRepo, model_dir: Path
) -> None:
    big = "onnx/speakers/F1/synthesizer.onnx"
    size = len(repo.files[big])
    hub.cut_next(REPO, big, size // 2)

    with pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1"])
    assert caught.value.reason == "interrupted"
    assert big in str(caught.value) and "again" in str(caught.value)
    assert not (model_dir / "onnx/speakers/F1").exists()  # half a speaker never shows
    assert local_bundle(model_dir, ["F1"]) is None

    events: list[Progress] = []
    fetch(hub, model_dir, speakers=["F1"], progress=events.append)

    first, second = hub.file_gets(big)
    assert first.range is None
    assert second.range is not None and second.range.startswith("bytes=")
    resumed_at = int(second.range.removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= size // 2
    assert second.body_bytes == size - resumed_at < size
    assert events[0].done_bytes >= events[0].total_bytes - size + resumed_at
    assert (model_dir / big).read_bytes() == repo.files[big]
    assert local_bundle(model_dir, ["F1"]) == model_dir


def test_a_partial_file_survives_a_new_commit_that_left_it_alone(
    hub: FakeHub, repo: FakeRepo, model_dir: Path
) -> None:
    big = "onnx/speakers/F1/synthesizer.onnx"
    hub.cut_next(REPO, big, len(repo.files[big]) // 2)
    with pytest.raises(FetchError):
        fetch(hub, model_dir, speakers=["F1"])
    repo.files["onnx/speakers/F1/config.json"] = b'{"changed": true}'  # main moves on

    fetch(hub, model_dir, speakers=["F1"])

    assert hub.file_gets(big)[-1].range is not None  # continued, not restarted
    assert on_disk(model_dir) == bundle_files(repo.files, ("F1",))


def test_a_corrupt_file_is_rejected_and_fetched_again(
    hub: FakeHub, repo: FakeRepo, model_dir: Path
) -> None:
    bad = "onnx/speakers/F1/synthesizer.onnx"
    hub.corrupt(REPO, bad)

    with pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1"])
    assert caught.value.reason == "verification"
    assert bad in str(caught.value)
    assert not (model_dir / "onnx/speakers/F1").exists()
    assert not list((model_dir / ".yomiage/blobs").glob("*.partial"))

    hub.faults.corrupt.clear()
    fetch(hub, model_dir, speakers=["F1"])
    assert (model_dir / bad).read_bytes() == repo.files[bad]
    assert hub.file_gets(bad)[-1].range is None  # the rejected bytes were not resumed from


def test_a_corrupt_small_file_is_caught_by_its_git_hash(hub: FakeHub, model_dir: Path) -> None:
    hub.corrupt(REPO, "bert/tokenizer/vocab.txt")  # not LFS: checked against the git blob id

    with pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1"])
    assert caught.value.reason == "verification"
    assert not (model_dir / "bert/tokenizer").exists()


# --- start-up without the Hub ------------------------------------------------------------------
def test_offline_start_from_what_was_fetched(hub: FakeHub, model_dir: Path) -> None:
    fetch(hub, model_dir, speakers=["F1"])
    served = len(hub.requests)
    hub.stop()

    assert local_bundle(model_dir, ["F1"]) == model_dir
    assert local_bundle(model_dir) == model_dir
    assert len(hub.requests) == served


def test_first_setup_without_network_says_offline(model_dir: Path) -> None:
    with FakeHub({}) as hub:
        endpoint = hub.url  # a port that nothing listens on once stopped

    with pytest.raises(FetchError) as caught:
        fetch_bundle(model_dir, REPO, endpoint=endpoint)
    assert caught.value.reason == "offline"
    assert local_bundle(model_dir) is None


def test_local_bundle_notices_a_missing_file(hub: FakeHub, model_dir: Path) -> None:
    fetch(hub, model_dir, speakers=["F1"])
    (model_dir / "onnx/speakers/F1/synthesizer.onnx").unlink()

    assert local_bundle(model_dir, ["F1"]) is None
    assert installed_speakers(model_dir) == ()


def test_local_bundle_of_an_empty_folder(tmp_path: Path) -> None:
    assert local_bundle(tmp_path) is None
    assert local_bundle(tmp_path / "missing") is None


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("repo_id", ["voices/missing", "not a repo id"])
def test_unknown_repo(hub: FakeHub, model_dir: Path, repo_id: str) -> None:
    with pytest.raises(FetchError) as caught:
        fetch_bundle(model_dir, repo_id, endpoint=hub.url)
    assert caught.value.reason == "unknown_repo"
    assert repo_id in str(caught.value)
    assert caught.value.translation_key == "download_unknown_repo"


def test_unknown_revision(hub: FakeHub) -> None:
    with pytest.raises(FetchError) as caught:
        list_offer(REPO, revision="v9", endpoint=hub.url)
    assert caught.value.reason == "unknown_revision"
    assert "v9" in str(caught.value)


def test_unknown_speaker_names_the_offered_ones(hub: FakeHub, model_dir: Path) -> None:
    with pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1", "nobody"])
    assert caught.value.reason == "unknown_speaker"
    assert "nobody" in str(caught.value) and "F1, M1" in str(caught.value)
    assert hub.file_gets() == []


@pytest.mark.parametrize(
    ("remove", "named"),
    [
        ("onnx/bert/q8/bert_q8.onnx", "onnx/bert/q8/bert_q8.onnx"),
        ("bert/tokenizer/vocab.txt", "bert/tokenizer/vocab.txt"),
        ("onnx/speakers/M1/synthesizer.onnx", "onnx/speakers/M1/synthesizer.onnx"),
        ("onnx/speakers/", "no speakers"),
    ],
)
def test_a_repo_without_the_layout_is_refused(model_dir: Path, remove: str, named: str) -> None:
    files = {path: data for path, data in voices_files().items() if not path.startswith(remove)}
    with FakeHub({REPO: FakeRepo(files)}) as hub:
        with pytest.raises(FetchError) as caught:
            fetch(hub, model_dir)
        assert hub.file_gets() == []
    assert caught.value.reason == "bad_layout"
    assert named in str(caught.value)


def test_a_private_repo_takes_a_token(model_dir: Path) -> None:
    with FakeHub({REPO: FakeRepo(voices_files(), token="hf_secret")}) as hub:
        with pytest.raises(FetchError) as caught:
            fetch(hub, model_dir, speakers=["F1"])
        assert caught.value.reason == "unknown_repo"
        assert "token" in str(caught.value)

        fetch(hub, model_dir, speakers=["F1"], token="hf_secret")
    assert local_bundle(model_dir, ["F1"]) == model_dir


def test_not_enough_disk_space_is_said_before_any_transfer(
    hub: FakeHub, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda _: _Usage(free=1000))

    with pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1"])
    assert caught.value.reason == "disk_full"
    assert str(model_dir) in str(caught.value) and "free" in str(caught.value)
    assert hub.file_gets() == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_disk_filling_up_mid_transfer(hub: FakeHub, repo: FakeRepo, model_dir: Path) -> None:
    # /dev/full answers every write with ENOSPC, as a full disk does.
    entry = repo.entry("onnx/bert/q8/bert_q8.onnx")
    blobs = model_dir / ".yomiage/blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{entry['lfs']['oid']}.partial").symlink_to("/dev/full")

    with pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1"])
    assert caught.value.reason == "disk_full"


def test_one_download_per_folder(hub: FakeHub, model_dir: Path) -> None:
    with ModelDir(model_dir).locked(), pytest.raises(FetchError) as caught:
        fetch(hub, model_dir, speakers=["F1"])
    assert caught.value.reason == "busy"


class _Usage:
    def __init__(self, free: int) -> None:
        self.free = free


def test_a_hub_address_that_is_not_a_url(model_dir: Path) -> None:
    with pytest.raises(FetchError) as caught:
        fetch_bundle(model_dir, REPO, endpoint="127.0.0.1:9")
    assert caught.value.reason == "offline"
    assert "127.0.0.1:9" in str(caught.value)
