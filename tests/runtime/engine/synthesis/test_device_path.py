"""The CUDA path, checked on the CPU: device choice, the spread graph, IO binding, warm-up.

No GPU here. The device path binds its tensors to the memory of the device its sessions really
got, so forcing it on a CPU-only onnxruntime runs every line of it under the CPU provider; it must
give the host path's audio bit for bit (noise off).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine.errors import DeviceUnavailableError
from custom_components.yomiage.engine.onnx import cuda_probe
from custom_components.yomiage.engine.onnx.device_graphs import probe_graph, spread_graph
from custom_components.yomiage.engine.onnx.sessions import SessionFactory, resolve_device
from custom_components.yomiage.engine.synthesis import engine as engine_module
from custom_components.yomiage.engine.synthesis.bert import (
    BertFeaturizer,
    join_char_features,
    spread_over_phones,
)
from custom_components.yomiage.engine.synthesis.device_path import (
    DeviceFeatures,
    DevicePath,
    HostPath,
)
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.voice import Voice

from ..common import QUIET, THREE_SENTENCES

# An engine told that CUDA works asks for it; this onnxruntime warns, then uses the CPU.
pytestmark = pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
RealSession = ort.InferenceSession  # the probe's is replaced in some tests


# -- the spread graph against numpy ----------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_spread_graph_equals_numpy_repeat(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sentences, tokens, hidden = rng.integers(1, 4), rng.integers(3, 12), rng.integers(1, 9)
    batch = rng.standard_normal((sentences, tokens, hidden)).astype(np.float32)
    row = int(rng.integers(0, sentences))
    length = int(rng.integers(2, tokens + 1))
    word2ph = rng.integers(0, 5, size=length).astype(np.int64)
    index = np.repeat(np.arange(length) + row * tokens, word2ph)

    session = ort.InferenceSession(spread_graph(), providers=[CPU])
    (spread,) = session.run(None, {"hidden": batch, "index": index})

    expected = spread_over_phones(batch[row, :length], word2ph)[np.newaxis]
    assert spread.shape == (1, hidden, word2ph.sum())
    np.testing.assert_array_equal(spread, expected)


def test_spread_graph_declares_its_contract() -> None:
    session = ort.InferenceSession(spread_graph(), providers=[CPU])
    assert [(i.name, i.type, len(i.shape)) for i in session.get_inputs()] == [
        ("hidden", "tensor(float)", 3),
        ("index", "tensor(int64)", 1),
    ]
    (output,) = session.get_outputs()
    assert (output.name, output.type, output.shape[0]) == ("bert", "tensor(float)", 1)


# -- choosing the device ---------------------------------------------------------------------------
@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """The probe's answer is cached for the process: forget it around each test."""
    cuda_probe.cuda_problem.cache_clear()
    yield
    cuda_probe.cuda_problem.cache_clear()


def _cuda_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_probe.ort, "get_available_providers", lambda: [CUDA, CPU])


class _GpuSession:
    """Stands in for a session the CUDA provider really took: it says so, and computes the probe
    with a real CPU session (``result`` / ``error`` replace its answer to model faulty GPUs)."""

    created = 0

    def __init__(self, *, result: NDArray[np.float32] | None = None, error: str = "") -> None:
        self._cpu = RealSession(probe_graph(), providers=[CPU])
        self._result, self._error = result, error
        self.bound: dict[str, Any] = {}
        _GpuSession.created += 1

    def get_providers(self) -> list[str]:
        return [CUDA, CPU]

    def io_binding(self) -> _GpuSession:
        return self

    def bind_cpu_input(self, name: str, value: NDArray[np.float32]) -> None:
        self.bound[name] = value

    def bind_output(self, name: str, device: str) -> None:
        self.bound[f"{name}@"] = device

    def run_with_iobinding(self, binding: _GpuSession) -> None:
        if self._error:
            raise RuntimeError(self._error)
        assert self.bound["y@"] == "cuda", "the probe must write into device memory"

    def copy_outputs_to_cpu(self) -> list[NDArray[np.float32]]:
        if self._result is not None:
            return [self._result]
        return list(self._cpu.run(None, {"x": self.bound["x"]}))


def _gpu_sessions(monkeypatch: pytest.MonkeyPatch, **behaviour: Any) -> None:
    _cuda_listed(monkeypatch)
    monkeypatch.setattr(
        cuda_probe.ort, "InferenceSession", lambda *args, **kwargs: _GpuSession(**behaviour)
    )


@pytest.mark.usefixtures("fresh_probe")
def test_no_cuda_provider_means_cpu_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="custom_components.yomiage.engine.onnx.sessions"):
        assert resolve_device("auto") == "cpu"
    (record,) = caplog.records
    assert "Using the CPU" in record.getMessage() and "onnxruntime-gpu" in record.getMessage()
    with pytest.raises(DeviceUnavailableError, match=r"CUDA was requested.*onnxruntime-gpu"):
        resolve_device("cuda")


@pytest.mark.usefixtures("fresh_probe")
def test_listed_provider_that_does_not_load_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # onnxruntime lists CUDA, but the session it builds runs on the CPU (what a missing CUDA or
    # cuDNN library does): here a real session, since this onnxruntime has no CUDA at all.
    _cuda_listed(monkeypatch)
    with caplog.at_level(logging.INFO, logger="custom_components.yomiage.engine.onnx.sessions"):
        assert resolve_device("auto") == "cpu"
    (record,) = caplog.records
    assert "installed but did not load" in record.getMessage()
    with pytest.raises(DeviceUnavailableError, match="installed but did not load"):
        resolve_device("cuda")


@pytest.mark.usefixtures("fresh_probe")
def test_provider_that_fails_its_test_run_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_sessions(monkeypatch, error="CUDA error: no kernel image is available\nmore detail")
    problem = cuda_probe.cuda_problem()
    assert problem == (
        "CUDAExecutionProvider failed a test run (CUDA error: no kernel image is available)"
    )
    assert resolve_device("auto") == "cpu"


@pytest.mark.usefixtures("fresh_probe")
def test_provider_that_computes_nonsense_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_sessions(monkeypatch, result=np.zeros(3, np.float32))
    assert "wrong result" in (cuda_probe.cuda_problem() or "")
    with pytest.raises(DeviceUnavailableError, match="wrong result"):
        resolve_device("cuda")


@pytest.mark.usefixtures("fresh_probe")
def test_working_provider_is_chosen_and_probed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_sessions(monkeypatch)
    before = _GpuSession.created
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda") == "cuda"
    assert resolve_device("cpu") == "cpu"
    assert _GpuSession.created - before == 1, "the answer is cached"


def test_cli_with_cuda_requested_exits_2_naming_cuda(tiny_bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    args = ["say", "はい", "--bundle", str(tiny_bundle), "--device", "cuda", "-o", str(out)]
    result = subprocess.run(
        [sys.executable, "-m", "yomiage.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("yomiage: ") and result.stderr.count("\n") == 1
    assert "CUDA" in result.stderr and not out.exists()


# -- the device path on the CPU provider -----------------------------------------------------------
@pytest.fixture(scope="module")
def q8_bundle(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bundle without an FP32 BERT graph, so that both engines run the same BERT."""
    copy = tmp_path_factory.mktemp("bundle") / "bundle"
    shutil.copytree(tiny_bundle, copy, ignore=shutil.ignore_patterns("fp32"))
    return copy


@pytest.fixture(scope="module")
def forced_cuda_engine(q8_bundle: Path) -> Iterator[Engine]:
    """An engine that believes CUDA works: it takes the device path, on the CPU provider."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cuda_probe, "cuda_problem", lambda: None)
        engine = Engine(q8_bundle, device="cuda", threads=1)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def host_engine(q8_bundle: Path) -> Iterator[Engine]:
    """The plain CPU engine over the graphs as published, as the CUDA engine loads them (the CPU's
    prepared graphs round differently, ~1e-6: a comparison of graphs, not of paths)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOMIAGE_GRAPH_CACHE", "0")
        engine = Engine(q8_bundle, device="cpu", threads=1)
    yield engine
    engine.close()


def test_forced_cuda_engine_takes_the_device_path(forced_cuda_engine: Engine) -> None:
    assert forced_cuda_engine.device == "cuda"
    path = forced_cuda_engine._features
    assert isinstance(path, DevicePath) and path.memory == "cpu"
    # Every sentence is a new shape: no cuDNN benchmark per shape.
    cuda, _ = forced_cuda_engine._sessions.providers
    assert cuda == (CUDA, {"cudnn_conv_algo_search": "HEURISTIC"})


def test_device_path_gives_the_host_path_audio(
    forced_cuda_engine: Engine, host_engine: Engine
) -> None:
    assert isinstance(host_engine._features, HostPath)
    on_device = forced_cuda_engine.synthesize(THREE_SENTENCES, QUIET)
    on_host = host_engine.synthesize(THREE_SENTENCES, QUIET)
    np.testing.assert_array_equal(on_device.audio, on_host.audio)
    assert [s.pause_before_s for s in on_device.sentences] == [
        s.pause_before_s for s in on_host.sentences
    ]


def test_device_path_streams_arriving_sentences_like_the_host_path(
    forced_cuda_engine: Engine, host_engine: Engine
) -> None:
    pieces = ["今日はいい天気ですね。", "散歩に行きましょう！", "はい。"]
    on_device = list(forced_cuda_engine.stream_sentences(iter(pieces), QUIET))
    on_host = list(host_engine.stream_sentences(iter(pieces), QUIET))
    assert len(on_device) == len(on_host) == 3
    for a, b in zip(on_device, on_host, strict=True):
        assert a.pause_before_s == b.pause_before_s
        np.testing.assert_array_equal(a.pcm, b.pcm)


def test_resident_features_are_the_host_features(forced_cuda_engine: Engine) -> None:
    texts = ["はい。", "今日はいい天気ですね。", "明日の朝七時に起こしてください！"]
    path = forced_cuda_engine._features
    assert isinstance(path, DevicePath)
    resident = path.char_features(texts)
    on_host = forced_cuda_engine._bert.char_features(texts)  # the same batch, read back
    for device_features, host_features in zip(resident, on_host, strict=True):
        assert isinstance(device_features, DeviceFeatures)
        assert len(device_features) == host_features.shape[0]
        word2ph = np.arange(len(device_features), dtype=np.int64) % 3  # some rows skipped
        spread = path.per_phone(device_features, word2ph).numpy()
        np.testing.assert_array_equal(
            spread, spread_over_phones(host_features, word2ph)[np.newaxis]
        )
    joined = path.join(resident)
    assert isinstance(joined, DeviceFeatures)
    word2ph = np.ones(len(joined), dtype=np.int64)
    np.testing.assert_array_equal(
        path.per_phone(joined, word2ph).numpy()[0].T, join_char_features(on_host)
    )


def test_device_path_joins_features_of_separate_batches_like_the_host(
    forced_cuda_engine: Engine,
) -> None:
    path = forced_cuda_engine._features
    assert isinstance(path, DevicePath)
    texts = ["はい。", "いいえ、違います。", "そうです。"]
    (first,) = path.char_features(texts[:1])  # streaming: the first sentence's own batch
    rest = path.char_features(texts[1:])
    joined = path.join([first, *rest])
    assert isinstance(joined, DeviceFeatures)
    on_host = [*forced_cuda_engine._bert.char_features(texts[:1])]
    on_host += forced_cuda_engine._bert.char_features(texts[1:])
    word2ph = np.ones(len(joined), dtype=np.int64)
    np.testing.assert_array_equal(
        path.per_phone(joined, word2ph).numpy()[0].T, join_char_features(on_host)
    )


def test_device_path_refuses_bad_word2ph_and_host_features(forced_cuda_engine: Engine) -> None:
    path = forced_cuda_engine._features
    assert isinstance(path, DevicePath)
    (first,) = path.char_features(["はい。"])
    with pytest.raises(ValueError, match="word2ph has 2 entries for 5 tokens"):
        path.per_phone(first, np.array([1, 1], dtype=np.int64))
    with pytest.raises(TypeError, match="host features"):
        path.join([np.zeros((3, 4), np.float32)])


def test_cuda_engine_runs_fp32_bert_on_cuda_and_int8_bert_on_the_cpu(
    q8_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fp32_bundle = tmp_path / "fp32"
    shutil.copytree(q8_bundle, fp32_bundle)
    (fp32_bundle / "onnx/bert/fp32").mkdir()  # the Q8 graph has the FP32 graph's contract
    shutil.copy(q8_bundle / "onnx/bert/q8/bert_q8.onnx", fp32_bundle / "onnx/bert/fp32/bert.onnx")
    placed: list[tuple[str, str]] = []

    class RecordingBert(BertFeaturizer):
        def __init__(self, graph: Path, tokenizer_dir: Path, sessions: SessionFactory) -> None:
            placed.append((graph.name, sessions.device))
            super().__init__(graph, tokenizer_dir, sessions)

    monkeypatch.setattr(engine_module, "BertFeaturizer", RecordingBert)
    monkeypatch.setattr(Engine, "_warm_up", lambda self: None)
    monkeypatch.setattr(cuda_probe, "cuda_problem", lambda: None)
    for bundle, device in ((q8_bundle, "cuda"), (fp32_bundle, "cuda"), (fp32_bundle, "cpu")):
        Engine(bundle, device=device, threads=1).close()
    assert placed == [("bert_q8.onnx", "cpu"), ("bert.onnx", "cuda"), ("bert_q8.onnx", "cpu")]


def test_cuda_engine_warms_every_voice_up_at_load(
    q8_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    original = Voice.synthesize

    def counted(voice: Voice, *args: Any) -> NDArray[np.float32]:
        runs.append(voice.name)
        return original(voice, *args)

    monkeypatch.setattr(Voice, "synthesize", counted)
    monkeypatch.setattr(cuda_probe, "cuda_problem", lambda: None)
    engine = Engine(q8_bundle, device="cuda", threads=1)
    try:
        assert sorted(set(runs)) == sorted(engine.voices)
        assert len(runs) == 2 * len(engine.voices), "two sentences per voice"
    finally:
        engine.close()


def test_cpu_engine_does_not_warm_up(q8_bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any) -> None:
        raise AssertionError("the CPU engine synthesized at load")

    monkeypatch.setattr(Voice, "synthesize", fail)
    monkeypatch.setattr(Voice, "front", fail)
    Engine(q8_bundle, device="cpu", threads=1).close()
