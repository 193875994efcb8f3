"""Bad input gets a clear error, and the engine keeps serving afterwards."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from custom_components.yomiage.engine.errors import (
    BundleError,
    DeviceUnavailableError,
    InvalidOptionError,
    InvalidTextError,
    UnknownVoiceError,
    YomiageError,
)
from custom_components.yomiage.engine.onnx import sessions
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.options import SynthesisOptions

from .common import QUIET


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("😀🎉", "nothing speakable"),
        ("#$%&*+", "nothing speakable"),
        ("あ" * 5001, "limit is 5000"),
    ],
)
def test_bad_text(engine: Engine, text: str, message: str) -> None:
    with pytest.raises(InvalidTextError, match=message):
        engine.synthesize(text, QUIET)
    assert engine.synthesize("はい。", QUIET).audio.size > 0


@pytest.mark.parametrize(
    ("voice", "message"),
    [("nobody/Neutral", "unknown speaker 'nobody'"), ("{speaker}/Shouting", "no style 'Shouting'")],
)
def test_unknown_voice(engine: Engine, voice: str, message: str) -> None:
    speaker = engine.default_voice.split("/")[0]
    with pytest.raises(UnknownVoiceError, match=message):
        engine.synthesize("はい。", QUIET.with_changes(voice=voice.format(speaker=speaker)))
    assert engine.synthesize("はい。", QUIET).audio.size > 0


@pytest.mark.parametrize(
    "changes",
    [
        {"speed": 0.0},
        {"speed": -1.0},
        {"speed": math.nan},
        {"speed": math.inf},
        {"sdp_ratio": 1.5},
        {"noise": -0.1},
        {"style_weight": "loud"},
    ],
)
def test_bad_options(engine: Engine, changes: dict[str, object]) -> None:
    with pytest.raises(InvalidOptionError):
        engine.synthesize("はい。", QUIET.with_changes(**changes))
    with pytest.raises(InvalidOptionError):
        engine.stream("はい。", QUIET.with_changes(**changes))


def test_speaker_without_style_uses_its_first_style(engine: Engine) -> None:
    speaker, styles = next(iter(engine.voices.items()))
    plain = engine.synthesize("はい。", QUIET.with_changes(voice=speaker)).audio
    explicit = engine.synthesize("はい。", QUIET.with_changes(voice=f"{speaker}/{styles[0]}")).audio
    assert (plain == explicit).all()


def test_configurable_length_limit(tiny_bundle: Path) -> None:
    engine = Engine(tiny_bundle, device="cpu", threads=1, max_chars=10)
    with pytest.raises(InvalidTextError, match="limit is 10"):
        engine.synthesize("あいうえおかきくけこさ", SynthesisOptions())
    engine.close()


def test_closed_engine_refuses_work(tiny_bundle: Path) -> None:
    engine = Engine(tiny_bundle, device="cpu", threads=1)
    engine.close()
    with pytest.raises(YomiageError, match="closed"):
        engine.synthesize("はい。")


def test_cuda_requested_without_provider() -> None:
    from custom_components.yomiage.engine.onnx.sessions import resolve_device

    with pytest.raises(DeviceUnavailableError, match="CUDA"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"
    with pytest.raises(DeviceUnavailableError, match="unknown device"):
        resolve_device("tpu")


# -- broken bundles: each names the file and what is wrong ---------------------------------------


@pytest.fixture
def bundle_copy(tiny_bundle: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, copy)
    return copy


def _first_speaker(bundle: Path) -> Path:
    return sorted((bundle / "onnx" / "speakers").iterdir())[0]


def _expect_bundle_error(bundle: Path, file_name: str, problem: str) -> None:
    with pytest.raises(BundleError, match=problem) as caught:
        engine = Engine(bundle, device="cpu", threads=1)
        engine.load_all()
    assert caught.value.path.endswith(file_name)


def test_missing_bundle_folder(tmp_path: Path) -> None:
    _expect_bundle_error(tmp_path / "nowhere", "nowhere", "does not exist")


def _symlink_loop(path: Path) -> None:
    path.symlink_to(path.parent / "other")
    (path.parent / "other").symlink_to(path)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (_symlink_loop, "loop of symbolic links"),
        (lambda path: path.symlink_to(path.parent / "gone"), "symbolic link to .*gone.*not exist"),
        (lambda path: path.write_text("x"), "is a file"),
    ],
    ids=["symlink loop", "dangling symlink", "file"],
)
def test_a_bundle_path_that_is_no_folder_says_what_it_is(
    tmp_path: Path, make: Callable[[Path], object], problem: str
) -> None:
    make(tmp_path / "bundle")
    _expect_bundle_error(tmp_path / "bundle", "bundle", problem)


def test_missing_synthesizer(bundle_copy: Path) -> None:
    (_first_speaker(bundle_copy) / "synthesizer.onnx").unlink()
    _expect_bundle_error(bundle_copy, "synthesizer.onnx", "missing")


def test_missing_bert(bundle_copy: Path) -> None:
    (bundle_copy / "onnx" / "bert" / "q8" / "bert_q8.onnx").unlink()
    _expect_bundle_error(bundle_copy, "bert_q8.onnx", "missing")


def test_corrupt_synthesizer(bundle_copy: Path) -> None:
    (_first_speaker(bundle_copy) / "synthesizer.onnx").write_bytes(b"not a graph" * 100)
    _expect_bundle_error(bundle_copy, "synthesizer.onnx", "not a loadable ONNX graph")


def test_truncated_bert(bundle_copy: Path) -> None:
    graph = bundle_copy / "onnx" / "bert" / "q8" / "bert_q8.onnx"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    _expect_bundle_error(bundle_copy, "bert_q8.onnx", "not a loadable ONNX graph")


def test_corrupt_config(bundle_copy: Path) -> None:
    (_first_speaker(bundle_copy) / "config.json").write_text("{not json", encoding="utf-8")
    _expect_bundle_error(bundle_copy, "config.json", "not a valid SBV2 config")


def test_style_vectors_do_not_match_config(bundle_copy: Path) -> None:
    import numpy as np

    vectors = _first_speaker(bundle_copy) / "style_vectors.npy"
    np.save(vectors, np.load(vectors)[:1])
    _expect_bundle_error(bundle_copy, "style_vectors.npy", "rows but config.json names rows")


def test_voice_without_any_duration_pass_uses_minimum_pause(
    bundle_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No duration graph, and a synthesizer whose durations cannot be cut out of it."""
    for speaker in (bundle_copy / "onnx" / "speakers").iterdir():
        (speaker / "duration_predictor.onnx").unlink()
    monkeypatch.setattr(sessions, "cut_durations", lambda model, output: None)
    engine = Engine(bundle_copy, device="cpu", threads=1)
    result = engine.synthesize("はい。そうです。", QUIET)
    assert [s.pause_before_s for s in result.sentences] == [0.0, 0.08]
    engine.close()
