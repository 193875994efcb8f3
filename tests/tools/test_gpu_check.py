"""tools/gpu_check on a machine without CUDA: it reports why, measures the CPU, and says so.

The check runs on the engine's side: the smoke run goes through the runtime venv's Python (with
OpenJTalk); the CUDA half runs in this venv, which lacks pyopenjtalk as the GPU machines do.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tools import gpu_check
from tools.gpu_check_replay import ReplayError, install_replay, recording

REPO = Path(__file__).resolve().parents[2]
RUNTIME_PYTHON = Path(os.environ.get("YOMIAGE_RUNTIME_PYTHON", REPO / ".venv" / "bin" / "python"))
TINY_BUNDLE = REPO / "tests" / "fixtures" / "bundle-tiny"


def _gpu_check(*args: str) -> subprocess.CompletedProcess[str]:
    return _runtime_python("-m", "tools.gpu_check", *args)


def _runtime_python(*args: str) -> subprocess.CompletedProcess[str]:
    assert RUNTIME_PYTHON.is_file(), f"{RUNTIME_PYTHON} missing: run scripts/setup"
    return subprocess.run(
        [str(RUNTIME_PYTHON), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cpu_fallback_reports_why_and_measures_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    result = _gpu_check(
        "--bundle", str(TINY_BUNDLE), "--quick", "--json", str(out), "--require-cuda"
    )
    assert result.returncode == 1, result.stderr  # --require-cuda: no CUDA here
    assert "OpenJTalk installed" in result.stdout
    assert "CUDA: not usable here: onnxruntime has no CUDAExecutionProvider" in result.stdout
    report = json.loads(out.read_text())
    assert list(report["devices"]) == ["cpu"] and "cuda_over_cpu" not in report
    cpu = report["devices"]["cpu"]
    assert cpu["audio_s"] > 1.0 and cpu["compute_s"] > 0
    assert cpu["speed_factor"] == pytest.approx(cpu["audio_s"] / cpu["compute_s"])
    assert 0 < cpu["first_audio_s"] < cpu["compute_s"] * 2
    assert list(cpu["bert"]) == ["2"]
    assert all(seconds > 0 for seconds in cpu["bert"]["2"].values())
    assert f"speed factor {cpu['speed_factor']:.1f}x" in result.stdout


# Runs gpu_check with the CUDA probe answering "works": this onnxruntime then runs every CUDA
# session on the CPU, so the GPU-only half of the script runs here before a GPU sees it.
PRETEND_CUDA = """
import sys
from tools import gpu_check
gpu_check.engine_api()  # makes yomiage_engine importable
import yomiage_engine.onnx.cuda_probe as probe
probe.cuda_problem = lambda: None
sys.exit(gpu_check.main(sys.argv[1:]))
"""


def test_cuda_half_runs_when_cuda_is_reported_usable(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(TINY_BUNDLE, bundle)
    (bundle / "onnx/bert/fp32").mkdir()  # the Q8 graph has the FP32 graph's contract
    shutil.copy(bundle / "onnx/bert/q8/bert_q8.onnx", bundle / "onnx/bert/fp32/bert.onnx")
    out = tmp_path / "figures.json"
    args = ["--bundle", str(bundle), "--quick", "--json", str(out)]
    # No pyopenjtalk in this venv: OpenJTalk's answers are replayed, as on a GPU machine.
    result = subprocess.run(
        [sys.executable, "-c", PRETEND_CUDA, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "OpenJTalk replayed" in result.stdout
    report = json.loads(out.read_text())
    assert list(report["devices"]) == ["cpu", "cuda", "cuda, INT8 BERT on the CPU"]
    cpu, cuda = report["devices"]["cpu"], report["devices"]["cuda"]
    assert report["cuda_over_cpu"] == pytest.approx(cpu["compute_s"] / cuda["compute_s"])
    assert report["agreement"]["cpu_samples"] == report["agreement"]["cuda_samples"]
    assert report["agreement"]["correlation"] > 0.99  # the same graphs, both on the CPU
    assert set(report["conv_search"]) == {"HEURISTIC", "EXHAUSTIVE"}
    assert "CUDA over CPU:" in result.stdout and "cuDNN EXHAUSTIVE: new length" in result.stdout


def test_missing_bundle_exits_2_naming_it(tmp_path: Path) -> None:
    result = _gpu_check("--bundle", str(tmp_path / "nowhere"), "--quick")
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"gpu_check: {tmp_path / 'nowhere'}: not a bundle (no onnx/speakers folder)"
    )


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(SystemExit):
        gpu_check.parse(["--sizes", "2,four"])
    assert gpu_check.parse(["--quick"]).sizes == [2]


def test_agreement_tells_matching_audio_from_noise() -> None:
    rng = np.random.default_rng(0)
    wave = (np.sin(np.arange(4000) / 7.0) * 8000).astype(np.int16)
    same = gpu_check.agreement(wave, wave + rng.integers(-50, 50, wave.size).astype(np.int16))
    unrelated = gpu_check.agreement(wave, rng.integers(-8000, 8000, 4100).astype(np.int16))
    assert same["correlation"] > 0.99
    assert abs(unrelated["correlation"]) < 0.1
    assert (unrelated["cpu_samples"], unrelated["cuda_samples"]) == (4000, 4100)


def test_gpu_memory_peak_polls_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in nvidia-smi whose reading climbs from 1000 MiB by 100 per call, to 1500 at most.
    counter = tmp_path / "calls"
    counter.write_text("0")
    script = tmp_path / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\n"
        "from pathlib import Path\n"
        f"counter = Path({str(counter)!r})\n"
        "calls = int(counter.read_text())\n"
        "counter.write_text(str(calls + 1))\n"
        "print(1000 + 100 * min(calls, 5))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    deadline = time.monotonic() + 60
    with gpu_check.gpu_memory_peak() as memory:
        while int(counter.read_text() or 0) < 7 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert memory["peak_mib"] == 500.0


def test_gpu_memory_peak_is_none_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_check.shutil, "which", lambda name: None)
    with gpu_check.gpu_memory_peak() as memory:
        pass
    assert memory["peak_mib"] is None


def test_cuda_figures_are_printed() -> None:
    cpu = {
        "load_s": 1.0,
        "first_audio_s": 0.5,
        "first_request_first_audio_s": 0.6,
        "speed_factor": 3.0,
        "audio_s": 12.0,
        "compute_s": 4.0,
        "bert": {"2": {"batched_s": 0.02, "sequential_s": 0.03}},
    }
    cuda = {**cpu, "compute_s": 0.5, "speed_factor": 24.0}
    report = {
        "bundle": "b",
        "openjtalk": "installed",
        "cuda_problem": None,
        "devices": {"cpu": cpu, "cuda": cuda},
        "cpu_peak_rss_mib": 900.0,
        "gpu_memory_peak_mib": 1234.0,
        "cuda_over_cpu": cpu["compute_s"] / cuda["compute_s"],
        "agreement": {"cpu_samples": 10, "cuda_samples": 12, "correlation": 0.97},
        "conv_search": {"HEURISTIC": {"new_length_s": 0.02, "same_length_s": 0.01}},
    }
    text = gpu_check.printed(report)
    assert "CUDA: usable" in text and "cuda: load 1.00 s, speed factor 24.0x" in text
    assert "CUDA over CPU: 8.0x faster" in text and "correlation 0.970" in text
    assert "GPU memory peak: 1234 MiB" in text
    assert "cuDNN HEURISTIC: new length 20 ms, same length again 10 ms" in text
    assert "BERT x2: batched 20.0 ms, one by one 30.0 ms (1.50x)" in text


def test_openjtalk_replay_answers_recorded_calls_and_names_missing_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyopenjtalk", None)  # put back as it was afterwards
    real = ModuleType("real")
    real.run_frontend = lambda text: [{"string": text, "acc": 1, "chain_flag": -1}]
    real.make_label = lambda features: [f"label-{len(features)}"]
    real.g2p = lambda text, kana=False: "ゴフン" if kana else "g o f u N"
    path = tmp_path / "recorded.json"
    with recording(real, path):
        features = real.run_frontend("五分")
        real.make_label(features)
        real.g2p("5分", kana=True)
    replay = install_replay(path)
    assert sys.modules["pyopenjtalk"] is replay
    features = replay.run_frontend("五分")
    assert features == [{"string": "五分", "acc": 1, "chain_flag": -1}]
    assert replay.make_label(features) == ["label-1"]
    assert replay.g2p("5分", kana=True) == "ゴフン"
    with pytest.raises(ReplayError, match=r"g2p\('5分'\) was not recorded: run `python -m"):
        replay.g2p("5分")
    with pytest.raises(ReplayError, match="run_frontend"):
        replay.run_frontend("六分")
