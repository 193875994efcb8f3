"""The A72 instruction count (tools/a72_count, issue 54) on the tiny bundle: Yomiage and hayakoe
in .arm64 under qemu-aarch64 -cpu cortex-a72 with the counting plugin scripts/setup builds.
Instruction counts, not time: what is checked holds however busy this machine is. Checked: the
counts are there and repeat, the marked stages account for the whole text, the four-thread runs
spread work over onnxruntime's pool threads (one-thread runs have none), Yomiage counted in parts
(text encoder, durations, flow, the decoder by channel width) does the work of the whole graphs,
and the figures the report divides out are finite."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tools.a72_count import main

ROOT = Path(__file__).resolve().parents[2]
TEXT = "greeting"  # two sentences: Yomiage's first audio comes before its end
SUDACHI_TEXT = "medium"  # pyopenjtalk-plus reads part of it with sudachi's dictionary
STAGES = {"yomiage": ("bert", "front", "decoder"), "hayakoe": ("bert", "synthesizer")}


def _counted(
    out: Path, engines: list[str], threads: list[str], texts: tuple[str, ...] = (TEXT,)
) -> dict[str, Any]:
    arguments = ["--bundle", "tiny", "--texts", *texts, "--out", str(out)]
    assert main([*arguments, "--engines", *engines, "--threads", *threads]) == 0
    results: dict[str, Any] = json.loads((out / "a72.json").read_text(encoding="utf-8"))
    return results


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    assert (ROOT / ".cache" / "a72" / "libcount.so").is_file(), "no plugin: run scripts/setup"
    first = _counted(tmp_path_factory.mktemp("first"), ["yomiage", "hayakoe"], ["1", "4"])
    again = _counted(
        tmp_path_factory.mktemp("again"),
        ["yomiage", "hayakoe", "yomiage-parts"],
        ["1"],
        (TEXT, SUDACHI_TEXT),
    )
    return first, again


def test_counts_repeat(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """One thread: the same instructions every run (0.15 % apart at most in five runs). Four
    threads add what the calling thread spends waiting for the pool threads, which depends on
    how the emulating machine schedules them (10 % apart on a busy 2-core box); without the
    waiting loops they do the work of one thread and a little more (the pool's hand-offs:
    2.8 % on the tiny voice, 0.5 % apart idle and loaded), and their critical path lies
    between a quarter of it and the busiest thread. Every count runs the same sessions the
    same number of times: Yomiage's pieces are chosen on a clock the guest holds still, not
    on emulation's pace (a later sentence was split on some runs before)."""
    first, again = counted
    for engine in STAGES:
        one, two = (run["runs"][f"{engine}-t1"]["texts"][TEXT] for run in (first, again))
        four = first["runs"][f"{engine}-t4"]["texts"][TEXT]
        assert one["runs"] == two["runs"] == four["runs"], (engine, one, two, four)
        assert one["audio_s"] == two["audio_s"], engine
        for key in ("instructions", "busiest_thread"):
            assert one[key] > 0, (engine, key)
            assert abs(one[key] - two[key]) <= 0.005 * one[key], (engine, key, one, two)
        assert four["audio_s"] == one["audio_s"], engine
        assert four["instructions"] >= 0.99 * one["instructions"], (engine, four, one)
        work = four["instructions"] - four["waiting"]
        assert abs(work - one["instructions"]) <= 0.05 * one["instructions"], (engine, four, one)
        assert one["instructions"] / 4 < four["critical_path"] <= four["busiest_thread"], engine
        alone = one["instructions"] - one["waiting"]  # one thread: its path is all its work
        assert abs(one["critical_path"] - alone) <= 0.005 * alone, (engine, one)


def test_a_text_read_with_sudachi_is_counted(
    counted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Each engine speaks the whole text in the emulated process (sudachi checks its dictionary
    with a call qemu-user does not redirect into the rootfs)."""
    _, again = counted
    for name, run in again["runs"].items():
        assert run["texts"][SUDACHI_TEXT]["audio_s"] > 2.0, name


def test_stages_account_for_the_text(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The stages (each onnxruntime run: its caller and the pool threads) and the Python
    threads outside runs add up to every thread's instructions over the text: what pool
    threads do outside runs is not counted in either, so the sum falls short where they spin
    or work unmarked."""
    first, _ = counted
    for name, run in first["runs"].items():
        text = run["texts"][TEXT]
        for stage in STAGES[run["engine"]]:
            assert text["stages"].get(stage, 0) > 0, (name, stage)
        assert text["overlapping_runs"] == 0, name
        summed = sum(text["stages"].values())
        assert abs(summed - text["instructions"]) <= 0.01 * text["instructions"], (name, text)


def test_four_threads_work_in_onnxruntime(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    first, _ = counted
    for engine, stages in STAGES.items():
        one, four = first["runs"][f"{engine}-t1"], first["runs"][f"{engine}-t4"]
        assert one["texts"][TEXT]["threads_in_onnxruntime"] == 0, engine
        assert four["texts"][TEXT]["threads_in_onnxruntime"] > 1, engine
        counted_threads = [s for s in four["sessions"] if s["stage"] in stages]
        assert counted_threads and all(
            s["intra_op_threads"] == 4 and s["spinning"] == "0" for s in counted_threads
        ), engine
        text = four["texts"][TEXT]
        assert text["busiest_thread"] < text["instructions"], engine


def test_yomiage_counted_in_parts(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """``--engines yomiage-parts``: the front as text encoder, durations and flow, the decoder
    by channel width, each counted; the same audio, and about the work of the whole graphs
    (each part is optimised on its own: a little more)."""
    _, again = counted
    parts, whole = (
        again["runs"][name]["texts"][TEXT] for name in ("yomiage-parts-t1", "yomiage-t1")
    )
    stages = parts["stages"]
    for stage in ("bert", "text encoder", "durations", "flow", "decoder, frame rate"):
        assert stages.get(stage, 0) > 0, (stage, stages)
    widths = [name for name in stages if name.startswith("decoder, ") and name.endswith(" ch")]
    assert len(widths) >= 4 and all(stages[name] > 0 for name in widths), stages
    assert parts["audio_s"] == whole["audio_s"]
    assert abs(sum(stages.values()) - parts["instructions"]) <= 0.01 * parts["instructions"]
    assert whole["instructions"] <= parts["instructions"] <= 1.1 * whole["instructions"]


def test_figures_are_finite(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    first, _ = counted
    for name, run in first["runs"].items():
        text = run["texts"][TEXT]
        assert text["audio_s"] > 0.5, name
        for key in ("instructions", "busiest_thread"):
            assert math.isfinite(text[key] / text["audio_s"]), (name, key)
        reached = text["first_audio"]
        # Yomiage streams: its first audio comes inside the first sentence; hayakoe's is its end.
        if run["engine"] == "yomiage":
            assert 0 < reached["instructions"] < text["instructions"], name
            by_stage = reached["stages_critical_path"]
            assert by_stage["decoder"] > 0 and by_stage["bert"] > 0, (name, by_stage)
            assert sum(by_stage.values()) == reached["critical_path"], name
        else:
            assert reached["whole"] and reached["instructions"] == text["instructions"], name
    predicted = first["predicted_pi"][TEXT]
    for path in ("busiest", "critical_path"):
        assert predicted[f"yomiage_x_real_time_{path}"] > 0, path
        assert math.isfinite(predicted[f"yomiage_first_audio_s_{path}"]), path
