"""The `yomiage` command: exit 0 with audio, exit 2 with one line on bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile

from ..ebur128 import measure_file
from ..engine.common import SAMPLE_RATE, THREE_SENTENCES
from ..voice_files import (
    AIVMX,
    BROKEN,
    SPEAKER,
    SPEAKER_DIR,
    aivmx_folder,
    hayakoe_bundle,
    sbv2_bundle,
)


def _yomiage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yomiage.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_say_writes_a_wav_with_two_pauses(tiny_bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.wav"
    result = _yomiage(
        "say",
        THREE_SENTENCES,
        "--bundle",
        str(tiny_bundle),
        "-o",
        str(out),
        "--noise",
        "0",
        "--noise-w",
        "0",
        "--json",
        "--threads",
        "1",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    with wave.open(str(out)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (SAMPLE_RATE, 1, 2)
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    assert len(summary["sentences"]) == 3
    pauses = [s["pause_before_s"] for s in summary["sentences"][1:]]
    assert all(p >= 0.08 for p in pauses)
    assert summary["audio_s"] == round(samples.size / SAMPLE_RATE, 3)
    longest = _longest_zero_runs(samples, 2)
    # The summary rounds seconds to 3 decimals: allow that rounding, no more.
    needed = [int((p - 0.0005) * SAMPLE_RATE) for p in sorted(pauses)]
    assert all(run >= need for run, need in zip(longest, needed, strict=True))


def test_say_writes_the_format_the_file_name_asks_for(tiny_bundle: Path, tmp_path: Path) -> None:
    """FLAC holds the WAV's samples exactly; Ogg Vorbis (lossy) the same length of audio."""
    common = ["--bundle", str(tiny_bundle), "--noise", "0", "--noise-w", "0", "--threads", "1"]
    audio = {}
    for name in ("out.wav", "out.flac", "out.ogg"):
        result = _yomiage("say", THREE_SENTENCES, "-o", str(tmp_path / name), *common)
        assert result.returncode == 0, result.stderr
        audio[name], rate = soundfile.read(tmp_path / name, dtype="int16")
        assert rate == SAMPLE_RATE
    assert soundfile.info(tmp_path / "out.flac").format == "FLAC"
    assert soundfile.info(tmp_path / "out.ogg").subtype == "VORBIS"
    assert np.array_equal(audio["out.flac"], audio["out.wav"]) and audio["out.wav"].any()
    assert abs(len(audio["out.ogg"]) - len(audio["out.wav"])) < SAMPLE_RATE // 100


def test_say_levels_the_loudness_as_ffmpeg_measures_it(tiny_bundle: Path, tmp_path: Path) -> None:
    """-16 ± 1.5 LUFS and a true peak at most -1 dBTP by default; ``--volume -6`` 6 ± 1 dB
    less; ``--no-normalize`` the model's own level; ``--lead-silence`` silence first."""
    common = ["--bundle", str(tiny_bundle), "--noise", "0", "--noise-w", "0", "--threads", "1"]
    runs = {
        "default.wav": [],
        "quieter.flac": ["--volume", "-6"],
        "raw.wav": ["--no-normalize"],
        "led.wav": ["--lead-silence", "250"],
    }
    for name, flags in runs.items():
        result = _yomiage("say", THREE_SENTENCES, "-o", str(tmp_path / name), *common, *flags)
        assert result.returncode == 0, result.stderr
    default = measure_file(tmp_path / "default.wav")
    assert abs(default.integrated_lufs + 16) <= 1.5 and default.true_peak_dbtp <= -1.0
    quieter = measure_file(tmp_path / "quieter.flac")
    assert abs(default.integrated_lufs - quieter.integrated_lufs - 6) <= 1.0
    assert measure_file(tmp_path / "raw.wav").true_peak_dbtp > -1.0
    led, _ = soundfile.read(tmp_path / "led.wav", dtype="int16")
    assert not led[: SAMPLE_RATE // 4].any() and led[SAMPLE_RATE // 4 :].any()


def test_bad_loudness_flags_exit_2_with_one_line(tiny_bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.wav"
    for flags, words in (
        (["--volume", "20"], "volume"),
        (["--lead-silence", "-5"], "lead_silence"),
    ):
        result = _yomiage(
            "say", "こんにちは。", "-o", str(out), "--bundle", str(tiny_bundle), *flags
        )
        assert result.returncode == 2 and words in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_graph_cache_moves_where_prepared_graphs_are_kept(
    tiny_bundle: Path, tmp_path: Path, private_graph_cache: Path
) -> None:
    cache = tmp_path / "graphs"
    before = set(private_graph_cache.rglob("*"))
    out = tmp_path / "out.wav"
    args = ["say", "こんにちは。", "-o", str(out), "--bundle", str(tiny_bundle), "--threads", "1"]
    result = _yomiage(*args, "--graph-cache", str(cache))
    assert result.returncode == 0, result.stderr
    assert any(path.name == "graph.onnx" for path in cache.rglob("*"))
    assert set(private_graph_cache.rglob("*")) == before
    assert "--graph-cache" in _yomiage("serve", "--help").stdout


def test_voices_lists_speaker_style_pairs(tiny_bundle: Path) -> None:
    result = _yomiage("voices", "--bundle", str(tiny_bundle))
    assert result.returncode == 0
    lines = result.stdout.split()
    assert len(lines) >= 4 and all(line.count("/") == 1 for line in lines)


def test_voices_checks_every_graph(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    graph = sorted((bundle / "onnx" / "speakers").iterdir())[-1] / "synthesizer.onnx"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    result = _yomiage("voices", "--bundle", str(bundle))
    assert result.returncode == 2 and result.stdout == ""
    assert "synthesizer.onnx" in result.stderr and len(result.stderr.splitlines()) == 1


def test_read_prints_katakana_per_sentence() -> None:
    result = _yomiage("read", "今日は晴れ。明日は雨。")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert all(re.fullmatch(r"[ァ-ヴー]+[。！？.!?]?", line) for line in lines), lines
    assert lines[1].startswith("アシタ")


def test_bad_input_exits_2_with_one_line(tiny_bundle: Path, tmp_path: Path) -> None:
    cases = [
        ("say", "", "--bundle", str(tiny_bundle), "-o", str(tmp_path / "x.wav")),
        ("say", "はい", "--bundle", str(tmp_path / "missing"), "-o", str(tmp_path / "x.wav")),
        (
            "say",
            "はい",
            "--bundle",
            str(tiny_bundle),
            "--voice",
            "nobody",
            "-o",
            str(tmp_path / "x.wav"),
        ),
        (
            "say",
            "はい",
            "--bundle",
            str(tiny_bundle),
            "--speed",
            "0",
            "-o",
            str(tmp_path / "x.wav"),
        ),
        ("say", "はい", "--bundle", str(tiny_bundle), "-o", str(tmp_path / "x.mp4")),
        ("say", "はい", "--bundle", str(tiny_bundle), "-o", str(tmp_path / "x")),
    ]
    for args in cases:
        result = _yomiage(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith("yomiage: ")


def _longest_zero_runs(samples: np.ndarray, count: int) -> list[int]:
    padded = np.concatenate(([1], samples, [1])) != 0
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    runs = sorted((edges[1::2] - edges[::2]).tolist(), reverse=True)
    return sorted(runs[:count])


def test_say_speaks_voices_as_other_exporters_write_them(tiny_bundle: Path, tmp_path: Path) -> None:
    """A folder of AIVMX files (with --language-model), Style-Bert-VITS2's converter's graph in
    a speaker folder and a bundle in hayakoe's current form: each loads and speaks; a damaged
    file of each fails at load with one line."""
    voices = aivmx_folder(tiny_bundle, tmp_path / "aivis")
    listed = _yomiage("voices", "--bundle", str(voices), "--language-model", str(tiny_bundle))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [f"{SPEAKER}/ノーマル", f"{SPEAKER}/Happy", f"{SPEAKER}/Sad"]
    bundles = {
        "aivmx": (voices, ["--language-model", str(tiny_bundle)]),
        "sbv2": (sbv2_bundle(tiny_bundle, tmp_path / "sbv2"), []),
        "hayakoe": (hayakoe_bundle(tiny_bundle, tmp_path / "hayakoe"), []),
    }
    for name, (bundle, extra) in bundles.items():
        out = tmp_path / f"{name}.wav"
        spoken = _yomiage(
            "say", "はい。そうです。", "--bundle", str(bundle), *extra, "-o", str(out)
        )
        assert spoken.returncode == 0, spoken.stderr
        with wave.open(str(out)) as wav:
            assert wav.getnframes() > SAMPLE_RATE // 2
    (voices / AIVMX.name).write_bytes(b"\x08\x07" * 100)
    for name in ("sbv2", "hayakoe"):
        graph = bundles[name][0] / SPEAKER_DIR / "synthesizer.onnx"
        graph.write_bytes(graph.read_bytes()[:1000])
    for bundle, extra in bundles.values():
        failed = _yomiage("say", "はい。", "--bundle", str(bundle), *extra, "-o", str(out))
        assert failed.returncode == 2 and len(failed.stderr.splitlines()) == 1, failed.stderr


@pytest.mark.parametrize("defect", sorted(BROKEN))
def test_a_voice_that_does_not_fit_fails_at_load_and_writes_nothing(
    tiny_bundle: Path, tmp_path: Path, defect: str
) -> None:
    """`voices` and `say` exit 2 with the one line naming the file and what does not fit; `say`
    leaves no file behind (nor a partial one)."""
    bundle = BROKEN[defect].bundle(tiny_bundle, tmp_path / "bundle")
    out = tmp_path / "out" / "speech.wav"
    for args in (("voices",), ("say", "はい。", "-o", str(out))):
        result = _yomiage(*args, "--bundle", str(bundle))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
        assert re.search(BROKEN[defect].message, result.stderr.strip()), result.stderr
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_a_say_that_fails_midway_leaves_no_partial_file(tmp_path: Path) -> None:
    """Audio already written when the stream fails (a model run that errs mid-text) is thrown
    away: no partial file, and an earlier file of that name stays as it was."""
    from yomiage_engine import AudioChunk, YomiageError

    from yomiage.cli import AUDIO_FILE_FORMATS, _write_audio

    def failing() -> Iterator[AudioChunk]:
        yield AudioChunk(np.ones(4410, dtype=np.int16), SAMPLE_RATE, "あ。", 0.0, 0.1)
        raise YomiageError("the model failed")

    out = tmp_path / "speech.wav"
    out.write_bytes(b"earlier")
    with pytest.raises(YomiageError):
        _write_audio(out, AUDIO_FILE_FORMATS[".wav"], SAMPLE_RATE, failing(), 0.0)
    assert out.read_bytes() == b"earlier"
    assert [p.name for p in tmp_path.iterdir()] == ["speech.wav"]
