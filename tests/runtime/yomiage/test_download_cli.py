"""``yomiage fetch`` / ``yomiage speakers`` against the fake Hub, reached through HF_ENDPOINT."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from yomiage_engine.hub.download import Progress, local_bundle

from yomiage.cli import main
from yomiage.download_cli import ProgressBar

from ..engine.hub.test_download import REPO, hub_settings, voices_files
from ..fakehub import FakeHub, FakeRepo

__all__ = ["hub_settings"]  # the autouse fixture, shared with the API tests


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with FakeHub({REPO: FakeRepo(voices_files())}) as hub:
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
