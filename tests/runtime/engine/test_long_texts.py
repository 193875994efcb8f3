"""Long texts cost memory in proportion to their length: no model run sees more than a pause
window of text, and 5,000 characters stay far under a gigabyte on every path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.pauses import PAUSE_WINDOW_CHARS, pause_windows
from custom_components.yomiage.engine.synthesis.voice import SentenceInput, Voice
from tools.long_text_memory import long_text

from .common import QUIET

REPO = Path(__file__).resolve().parents[3]
MEMORY_TOOL = (sys.executable, "-m", "tools.long_text_memory")


@pytest.mark.parametrize(
    "lengths",
    [[10], [10, 20], [30] * 5, [80, 80, 80, 80, 80], [5] * 200, [80, 10, 80, 10, 300, 5]],
)
def test_every_boundary_lies_in_exactly_one_window(lengths: list[int]) -> None:
    windows = pause_windows(lengths)
    boundaries = [k for window in windows for k in range(window.start + 1, window.stop)]
    assert boundaries == list(range(1, len(lengths)))
    for window in windows:
        size = sum(lengths[window.start : window.stop])
        assert len(window) >= 2 and (len(window) == 2 or size <= PAUSE_WINDOW_CHARS), window


def test_a_text_that_fits_one_window_is_one_window() -> None:
    assert pause_windows([40] * 7) == [range(7)]


@pytest.mark.parametrize("call", ["synthesize", "stream"])
def test_no_model_run_sees_more_than_a_window_of_text(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """The duration predictor's pause pass and BERT's batches, over a text of many windows."""
    seen: dict[str, list[int]] = {"bert": [], "durations": []}
    features = engine._features
    bert, durations = features.char_features, Voice.durations

    def bert_batch(texts: list[str]) -> Any:
        seen["bert"].append(sum(len(text) for text in texts))
        return bert(texts)

    def duration_run(voice: Voice, sentence: SentenceInput) -> Any:
        seen["durations"].append(len(sentence.sequence.text))
        return durations(voice, sentence)

    monkeypatch.setattr(features, "char_features", bert_batch)
    monkeypatch.setattr(Voice, "durations", duration_run)
    text = long_text(PAUSE_WINDOW_CHARS * 4)
    if call == "synthesize":
        engine.synthesize(text, QUIET)
    else:
        for _ in engine.stream(text, QUIET):
            pass
    assert len(seen["durations"]) >= 4
    assert max(seen["bert"]) <= PAUSE_WINDOW_CHARS
    assert max(seen["durations"]) <= PAUSE_WINDOW_CHARS


def test_5000_characters_stay_under_a_gigabyte_on_every_path(tiny_bundle: Path) -> None:
    """synthesize(), stream() and the Wyoming server, each in a fresh process."""
    done = subprocess.run(
        [*MEMORY_TOOL, "--json", "--chars", "5000", "--bundle", str(tiny_bundle)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [row["path"] for row in rows] == ["synthesize", "stream", "server"]
    for row in rows:
        assert row["chars"] > 4900 and row["audio_s"] > 600, row
        assert row["peak_mb"] < 1024, row
