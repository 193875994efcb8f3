"""The benchmark harness (tools/bench.py, tools/bench_worker.py): a quick run end to end, and the
arithmetic of its targets on made-up figures."""

from __future__ import annotations

import io
import json
import math
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tools import bench, bench_worker

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One --quick run with Yomiage as its own peer (an A/A run: same code, two processes)."""
    out = tmp_path_factory.mktemp("bench")
    assert bench.main(["--quick", "--peer", "self", "--out", str(out)]) == 0
    return out


def test_quick_run_writes_json_table_and_chart(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text(encoding="utf-8"))
    assert list(results["configs"]) == ["yomiage", "yomiage-again"]
    assert (quick_run / "results.png").read_bytes().startswith(PNG_SIGNATURE)
    report = (quick_run / "results.md").read_text(encoding="utf-8")
    assert "first audio, Assist reply" in report and "| short | yomiage |" in report
    assert "reply asked for while the long text streams" in report
    # The roofline of Yomiage's stream: each stage's FLOPs and rate, from its own process.
    stages = {stage["name"]: stage for stage in results["roofline"]["stages"]}
    assert stages["flow"]["flops"] > 0 and stages["BERT"]["flops"] > 0
    assert any(name.startswith("decoder ") and s["flops"] > 0 for name, s in stages.items())
    assert results["roofline"]["peak_gflops"] > 0
    assert "| flow |" in report and "Flow / decoder time" in report


def test_quick_run_measures_each_process_on_its_own(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text(encoding="utf-8"))
    for entry in results["configs"].values():
        memory = entry["memory_end"]["memory_kb"]
        assert memory["VmHWM"] >= memory["VmRSS"] > memory["RssAnon"] > 0
        assert entry["load"]["ready_s"] > entry["load"]["load_s"] > 0
        for text in bench.QUICK_TEXTS:
            runs = entry["texts"][text]
            assert len(runs["compute_s"]) == 1  # --quick: one repetition
            assert runs["audio_s"][0] > 0.2
            assert runs["stream_first_audio_s"][0] > 0
            assert runs["stream_first_piece_s"][0] > 0  # its length varies: noise is on
        # The Assist reply is streamed to its end: the player's waits are measured.
        assist = entry["texts"]["assist"]
        assert assist["stream_waits_s"][0] >= 0
        assert assist["stream_last_audio_s"][0] >= assist["stream_first_audio_s"][0]
        assert "stream_waits_s" not in entry["texts"]["short"]
        assert "stream_last_audio_s" not in entry["texts"]["short"]
    # The Assist reply asked for at each moment into a streaming announcement, per engine.
    for entry in results["configs"].values():
        during = entry["during"]
        assert during["after_s"] == list(bench.QUICK_DURING_MOMENTS)
        assert all(first > 0 for first in during["first_audio_s"])
        assert all(last > 0 for last in during["announcement_s"])
        assert all(waits >= 0 for waits in during["announcement_waits_s"])
    # Only the first configuration pays for preparing the graph cache (a fresh one per run).
    assert "first_load" in results["configs"]["yomiage"]
    assert "first_load" not in results["configs"]["yomiage-again"]
    assert (quick_run / "yomiage-cache" / "sessions").is_dir()


def test_quick_run_targets_are_ratios_of_the_recorded_medians(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text(encoding="utf-8"))
    ours = bench.figures(results["configs"]["yomiage"])
    peer = bench.figures(results["configs"]["yomiage-again"])
    first_audio = next(t for t in bench.targets(ours, peer) if t.name.startswith("first audio"))
    recorded = results["configs"]["yomiage"]["texts"]["assist"]["stream_first_audio_s"][0]
    whole = results["configs"]["yomiage-again"]["texts"]["assist"]["compute_s"][0]
    assert first_audio.ratio == pytest.approx(recorded / whole)


def test_quick_dialects_run_speaks_each_exporters_form_in_its_own_process(
    tmp_path: Path,
) -> None:
    """--peer dialects: the tiny voice as hayakoe's form, Style-Bert-VITS2's converter and an
    AIVMX file write it, line by line beside our export, each with its own first start and its
    own voice name."""
    assert bench.main(["--quick", "--peer", "dialects", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    configs = results["configs"]
    assert list(configs) == [
        "yomiage",
        "yomiage-hayakoe-form",
        "yomiage-sbv2-converter",
        "yomiage-aivmx",
    ]
    for entry in configs.values():
        assert "first_load" in entry
        assert entry["texts"]["assist"]["audio_s"][0] > 0.2
    report = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| assist | yomiage-aivmx |" in report and "| target |" not in report  # no targets
    assert (tmp_path / "bundle-aivmx" / "tiny-a.aivmx").is_symlink()


def test_the_pitch_run_measures_the_moved_voice_beside_the_plain_one(tmp_path: Path) -> None:
    """--peer pitch: the same voice with pitch and intonation moved, line by line."""
    assert bench.main(["--quick", "--peer", "pitch", "--out", str(tmp_path)]) == 0
    configs = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["configs"]
    assert list(configs) == ["yomiage", "yomiage-pitch"]
    for entry in configs.values():
        assert entry["texts"]["assist"]["audio_s"][0] > 0.2
    report = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| assist | yomiage-pitch |" in report and "| target |" not in report


def test_the_first_start_run_measures_cold_and_warm_starts_each_in_a_fresh_process(
    tmp_path: Path,
) -> None:
    """--first-start: on an empty graph cache the start prepares its graphs in processes of its
    own (their memory counted beside its own); on the cache it left, it starts none."""
    out = tmp_path / "out"
    assert bench.main(["--quick", "--first-start", "--reps", "1", "--out", str(out)]) == 0
    starts = json.loads((out / "results.json").read_text(encoding="utf-8"))["starts"]
    (cold,), (warm,) = starts["cold"], starts["warm"]
    assert cold["children_peak_kb"] > 0 and warm["children_peak_kb"] == 0
    for start in (cold, warm):
        assert start["tree_anon_peak_kb"] >= start["anon_peak_kb"] >= start["memory_kb"]["RssAnon"]
        assert start["memory_kb"]["VmHWM"] > start["anon_peak_kb"] > 0
    report = (out / "results.md").read_text(encoding="utf-8")
    assert "| first (graph cache cold) |" in report and "| later (graph cache warm) |" in report
    assert not (out / "results.png").exists()


def test_the_anonymous_peak_counts_a_process_alone_and_with_the_processes_below_it() -> None:
    """Made-up processes: 1 starts 2, which starts 3; then 2 and 3 end and 4 runs."""
    tree = {1: [2], 2: [3]}
    anon = {1: 100, 2: 50, 3: 30}
    peak = bench.AnonPeak(
        1, anon_kb=lambda pid: anon.get(pid, 0), children=lambda pid: tree.get(pid, [])
    )
    peak.sample()
    assert (peak.own_kb, peak.tree_kb) == (100, 180)
    tree, anon = {1: [4]}, {1: 140, 4: 10}
    peak.sample()
    assert (peak.own_kb, peak.tree_kb) == (140, 180)


# -- target arithmetic on made-up figures ----------------------------------------------------------
def made_up(
    compute: float,
    audio: float,
    first: float,
    peak_mb: float,
    ready: float,
    streamed: float = math.nan,
    during: float | None = None,
) -> Any:
    texts = {
        name: {
            "audio_s": audio,
            "compute_s": compute,
            "cpu_s": compute,
            "speed": audio / compute,
            "first_audio_s": first,
            "streamed_s": streamed,
            "streamed_cpu_s": 1.5 * streamed,
            "waits_s": math.nan,
        }
        for name in ("long", "assist")
    }
    busy = {} if during is None else {"median_s": during, "worst_s": during}
    return bench.Figures(ready, None, peak_mb / 2, peak_mb, peak_mb / 3, texts, busy)


def by_goal(found: list[bench.Target]) -> dict[str, bench.Target]:
    return {target.goal: target for target in found}


def test_targets_are_the_listeners_and_met_when_every_ratio_is_inside_its_goal() -> None:
    ours = made_up(20.0, 20.0, first=2.0, peak_mb=500, ready=2.0, streamed=10.0, during=2.5)
    peer = made_up(13.0, 20.0, first=5.0, peak_mb=1000, ready=10.0, streamed=16.0, during=9.0)
    found = {target.name.split(" (")[0]: target for target in bench.targets(ours, peer)}
    assert found["long text streamed to its end"].ratio == pytest.approx(1.6)
    assert found["CPU s per audio s, long text streamed"].ratio == pytest.approx(10 / 16)
    assert found["first audio, Assist reply"].ratio == pytest.approx(2.0 / 13.0)
    assert found["first audio, Assist reply during an announcement"].ratio == pytest.approx(1.25)
    assert found["peak RSS after synthesis"].ratio == pytest.approx(0.5)
    assert found["private memory after synthesis"].ratio == pytest.approx(0.5)
    assert found["cold load, start to ready"].ratio == pytest.approx(0.2)
    assert [name for name, target in found.items() if not target.met] == [
        "private memory after synthesis"  # 0.5 against a goal of 0.4
    ]
    assert not any("speed" in name or "whole" in name for name in found), "whole file: a line"


def test_the_stream_does_not_count_when_less_audio_came_out() -> None:
    ours = made_up(10.0, 15.0, first=2.0, peak_mb=500, ready=2.0, streamed=10.0)
    peer = made_up(13.0, 20.0, first=5.0, peak_mb=1000, ready=10.0, streamed=16.0)
    streamed = by_goal(bench.targets(ours, peer))[">= 1.3"]
    assert streamed.ratio == pytest.approx(1.6) and not streamed.met


def test_missed_targets_are_marked_in_the_table() -> None:
    ours = made_up(12.0, 20.0, first=4.0, peak_mb=900, ready=9.0, streamed=15.0, during=9.0)
    peer = made_up(13.0, 20.0, first=5.0, peak_mb=1000, ready=10.0, streamed=16.0, during=9.0)
    lines = bench._targets_table(bench.targets(ours, peer), "ours", "peer")
    assert sum("**no**" in line for line in lines) == 7


def test_whole_file_time_is_a_line_beside_the_targets() -> None:
    ours = made_up(10.0, 20.0, first=2.0, peak_mb=500, ready=2.0, streamed=11.0)
    peer = made_up(13.0, 20.0, first=5.0, peak_mb=1000, ready=10.0, streamed=13.2)
    line = bench._whole_file_line(ours, peer, "peer")[0]
    assert "10.00 s against peer's 13.00 s" in line and "1.30" in line
    unstreamed = made_up(13.0, 20.0, first=5.0, peak_mb=1000, ready=10.0)
    names = [target.name for target in bench.targets(ours, unstreamed)]
    assert not any("streamed" in name for name in names), "no stream measured: no such target"


# -- pieces ------------------------------------------------------------------------------------
def test_one_speaker_view_links_the_first_speaker_and_its_first_style(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    for name, styles in (("b-voice", {"Happy": 1, "Neutral": 0}), ("a-voice", {"Calm": 0})):
        folder = bundle / "onnx" / "speakers" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"data": {"style2id": styles}}))
    (bundle / "bert").mkdir()
    (bundle / "onnx" / "bert").mkdir()
    view, voice = bench.one_speaker_view(bundle, tmp_path / "view")
    assert voice == "a-voice/Calm"
    assert [p.name for p in (view / "onnx" / "speakers").iterdir()] == ["a-voice"]
    assert (view / "bert").resolve() == (bundle / "bert").resolve()


def test_the_default_bundle_is_the_published_layout(tmp_path: Path) -> None:
    """With no bundle named, the benchmark measures the voice as hayakoe's exporter writes it
    (the layout of the published voices users run), with the source bundle's BERT; a bundle
    named, the quick run's and ``dialects`` (which compares the forms with our own export)
    keep theirs."""
    published = bench.measured_source(bench.TINY_BUNDLE, None, quick=False, peer="hayakoe")
    assert published == bench.REPO / "tests" / "fixtures" / "dialects-tiny" / "hayakoe"
    view, voice = bench.one_speaker_view(published, tmp_path / "view", language=bench.TINY_BUNDLE)
    speaker = view / "onnx" / "speakers" / voice.split("/")[0]
    assert (speaker / "synthesizer.onnx").is_file()
    assert (view / "bert").resolve() == (bench.TINY_BUNDLE / "bert").resolve()
    named = tmp_path / "named"
    assert bench.measured_source(named, named, quick=False, peer="hayakoe") == named
    for quick, peer in ((True, "self"), (False, "dialects")):
        assert bench.measured_source(bench.TINY_BUNDLE, None, quick, peer) == bench.TINY_BUNDLE


def test_bundle_without_speakers_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bundle" / "onnx" / "speakers").mkdir(parents=True)
    with pytest.raises(bench.BenchError, match="no speaker folders"):
        bench.one_speaker_view(tmp_path / "bundle", tmp_path / "view")


def test_worker_answers_memory_and_reports_errors_as_answers() -> None:
    commands = io.StringIO(
        '{"cmd": "memory"}\n{"cmd": "synth", "text": "あ"}\n{"cmd": "bogus"}\n{"cmd": "quit"}\n'
    )
    answers = io.StringIO()
    bench_worker.serve(bench_worker.Worker("yomiage", Path("unused"), "a/b"), commands, answers)
    memory, early, bogus = (json.loads(line) for line in answers.getvalue().splitlines())
    assert memory["memory_kb"]["VmHWM"] > 0
    assert "send load first" in early["error"]
    assert "unknown command" in bogus["error"]


def test_the_reply_during_an_announcement_and_the_announcement_are_both_timed() -> None:
    pieces = _Pieces()
    timed = bench_worker.timed_during(
        pieces, reply="ab", announcement="x" * 20, after_s=0.2, clock=pieces.clock
    )
    # From when the reply was asked for (one 0.02 s piece), not from the announcement's start.
    assert timed["first_audio_s"] == pytest.approx(0.02)
    assert timed["announcement_s"] == pytest.approx(20 * 0.02)
    assert timed["announcement_waits_s"] == 0.0


def test_a_failing_announcement_fails_the_measurement() -> None:
    with pytest.raises(ValueError, match="announcement failed"):
        bench_worker.timed_during(_Pieces(), reply="ab", announcement="!", after_s=0.0)


class _Pieces:
    """A made-up engine: one piece of audio (0.1 s) per character, each made in 0.02 s of its
    own clock ("_": silence), so the timings are exact. Each thread has its own time: a stream
    is timed on the work done for it, whatever another thread's stream does meanwhile."""

    rate = 10
    imported = 0.0

    def __init__(self) -> None:
        self._time = threading.local()

    def clock(self) -> float:
        return float(getattr(self._time, "now", 0.0))

    def synthesize(self, text: str) -> int:
        return sum(piece.samples for piece in self.stream(text, in_pieces=False))

    def stream(self, text: str, in_pieces: bool) -> Generator[bench_worker.Piece, None, None]:
        for character in text:
            if character == "!":
                raise ValueError("announcement failed")
            self._time.now = self.clock() + 0.02
            yield bench_worker.Piece(1, 1 if character == "_" else 0)


def test_a_stream_is_timed_to_its_first_speech_as_a_player_hears_it() -> None:
    """A lead of silence (three pieces of 0.1 s here) is first audio, not speech: speech comes
    when a player that started with the first piece reaches it."""
    pieces = _Pieces()
    timed = bench_worker.timed_stream(pieces, "___ab", whole=True, clock=pieces.clock)
    assert timed["first_audio_s"] == pytest.approx(0.02)
    assert timed["speech_s"] == pytest.approx(0.02 + 0.3)
    assert timed["waits_s"] == 0.0  # each piece came long before it was due
    pieces = _Pieces()
    quick = bench_worker.timed_stream(pieces, "___ab", clock=pieces.clock)
    assert quick["speech_s"] == pytest.approx(timed["speech_s"])
