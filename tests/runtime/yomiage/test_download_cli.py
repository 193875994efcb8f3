"""``yomiage fetch`` / ``yomiage speakers`` against the fake Hub, reached through HF_ENDPOINT."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from yomiage_engine.bundle import has_language_model
from yomiage_engine.hub.aivishub import API_VARIABLE, installed_models
from yomiage_engine.hub.download import DEFAULT_REPO, Progress, local_bundle

from yomiage.cli import main
from yomiage.download_cli import ProgressBar

from ..engine.hub.test_download import REPO, hub_settings, voices_files
from ..fakeaivishub import FakeAivisHub, FakeModel
from ..fakehub import FakeHub, FakeRepo
from ..voice_files import AIVMX

__all__ = ["hub_settings"]  # the autouse fixture, shared with the API tests


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    repos = {REPO: FakeRepo(voices_files()), DEFAULT_REPO: FakeRepo(voices_files())}
    with FakeHub(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)  # read at call time, not at import
        yield hub


def run(*argv: str) -> int:
    """The ``yomiage`` command as installed (cli.main wires these commands in)."""
    return main(list(argv))


def test_fetch_chosen_speakers_into_a_folder(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "voices"

    assert run("fetch", REPO, "--speaker", "M1", "--to", str(target)) == 0

    assert local_bundle(target, ["M1"]) == target
    assert not (target / "onnx/speakers/F1").exists()
    out, err = capsys.readouterr()
    assert f"bundle ready: {target}" in out
    assert "100.0%" in err.splitlines()[-1]


def test_fetch_takes_several_speakers(hub: FakeHub, tmp_path: Path) -> None:
    assert run("fetch", REPO, "--speaker", "F1", "M1", "--to", str(tmp_path)) == 0
    assert local_bundle(tmp_path, ["F1", "M1"]) == tmp_path


def test_fetch_errors_are_one_line_and_exit_2(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("fetch", "voices/missing", "--to", str(tmp_path)) == 2
    assert (
        capsys.readouterr().err == "yomiage: voices/missing: no such repo on the Hub "
        "(a private one needs a token)\n"
    )


def test_speakers_lists_names_and_sizes(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("speakers", REPO) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{REPO} @ main (")
    assert [line.split()[0] for line in lines[2:]] == ["F1", "M1"]
    assert all(line.endswith("MB") for line in lines[1:])


def test_the_bar_prints_a_line_per_tenth_when_not_on_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    for done in range(0, 1001, 7):
        bar.update(Progress(done, 1000, "synthesizer.onnx"))
    bar.update(Progress(1000, 1000, None))
    bar.close()

    lines = stream.getvalue().splitlines()
    assert len(lines) == 11  # 0 %, 10 %, ... 100 %
    assert "100.0%" in lines[-1]
    assert lines[0].startswith("[" + "." * 30 + "]")


# -- AivisHub ----------------------------------------------------------------------------------
@pytest.fixture
def aivishub(monkeypatch: pytest.MonkeyPatch, hub: FakeHub) -> Iterator[FakeAivisHub]:
    """The fake AivisHub with tiny-a's AIVMX, beside the fake Hugging Face Hub for BERT."""
    with FakeAivisHub([FakeModel([AIVMX.read_bytes()])]) as fake:
        monkeypatch.setenv(API_VARIABLE, fake.api)
        yield fake


def test_fetch_an_aivishub_model_by_its_page_with_the_language_model_beside(
    aivishub: FakeAivisHub, hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uuid = next(iter(aivishub.models))
    page = f"https://hub.aivis-project.com/aivm-models/{uuid}"
    assert run("fetch", page, "--to", str(tmp_path / "voices")) == 0
    assert installed_models(tmp_path / "voices") == {uuid: "1.0.0"}
    language_model = tmp_path / DEFAULT_REPO.replace("/", "--")
    assert has_language_model(language_model)
    assert not (language_model / "onnx" / "speakers").exists()  # BERT only, no official voice
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        f"tiny-a by Yomiage tests ({page})",
        f"  version 1.0.0, {AIVMX.stat().st_size / 1e6:.1f} MB",
        "  licence: ACML 1.0",
    ]
    assert f"voice ready: {tmp_path / 'voices' / uuid}.aivmx" in out
    # A second voice beside it takes the same language model: nothing fetched from the Hub.
    hub.requests.clear()
    assert run("fetch", uuid, "--to", str(tmp_path / "more")) == 0
    assert hub.requests == []


def test_speakers_describes_an_aivishub_model(
    aivishub: FakeAivisHub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("speakers", next(iter(aivishub.models))) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "  tiny-a: ノーマル, Happy, Sad"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (("tiny",), "yomiage: 'tiny' is neither an AivisHub model page"),
        (("--speaker", "x"), "yomiage: --speaker is for Hugging Face repos, not AivisHub"),
    ],
)
def test_what_is_no_aivishub_model_is_said_in_one_line(
    aivishub: FakeAivisHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: tuple[str, ...],
    said: str,
) -> None:
    source = arguments[0] if arguments[0] != "--speaker" else next(iter(aivishub.models))
    extra = arguments[1:] if arguments[0] != "--speaker" else arguments
    assert run("fetch", source, *extra, "--to", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1
