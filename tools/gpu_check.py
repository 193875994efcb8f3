"""CPU against CUDA on one machine: is the GPU path worth it, and does it behave?

    python -m tools.gpu_check [--bundle DIR] [--quick] [--sizes 2,4,8,16] [--repeats 3]
                              [--json FILE] [--require-cuda] [--record-openjtalk]

Unlike the rest of tools/, this runs on the engine's side: any Python with onnxruntime-gpu (or
onnxruntime, to see the CPU fallback) and numpy, from the repository root, e.g. after
``pip install onnxruntime-gpu numpy pyopenjtalk-plus`` on a bare GPU machine. The engine is
imported from this checkout; nothing is downloaded. Without pyopenjtalk (the lent GPU machines
lack it and cannot fetch it) OpenJTalk's answers for the check's texts are replayed from
gpu_check_openjtalk.json (gpu_check_replay.py; ``--record-openjtalk`` rewrites it). Without
``--bundle`` the check uses the random-weight ``full`` bundle in .cache/bundle-full, built first
if missing with torch (.venv-tools, or this Python if it has torch; else it names the command).

Prints, per device: load time (CUDA includes the warm-up), time to first audio of the first
request after load and of later ones, speed factor (audio s / compute s) on a paragraph, BERT
for 2/4/8/16 sentences in one batch against one by one. With CUDA: the same for a CUDA engine
given INT8 BERT only (as published voices come: BERT then runs on the CPU), the CUDA/CPU speed
ratio, how CPU and CUDA audio agree, GPU memory peak of the CUDA engine (nvidia-smi), and the
first run of new sentence lengths under cuDNN's HEURISTIC and EXHAUSTIVE convolution search.
``--quick`` (a smoke test of the script): one repetition, BERT for 2 sentences, a two-sentence
paragraph, one new length.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gpu_check_replay import RECORDING, install_replay, is_replay, recording

REPO = Path(__file__).resolve().parent.parent
ENGINE_DIR = REPO / "custom_components" / "yomiage" / "engine"
FULL_BUNDLE = REPO / ".cache" / "bundle-full"
TINY_BUNDLE = REPO / "tests" / "fixtures" / "bundle-tiny"
TOOLS_PYTHON = REPO / ".venv-tools" / "bin" / "python"
FP32_BERT = Path("onnx/bert/fp32/bert.onnx")
BUILD_COMMAND = ".venv-tools/bin/python -m tools.make_bundle --preset full --out .cache/bundle-full"
CONV_SEARCH_MODES = ("HEURISTIC", "EXHAUSTIVE")
WARM_UP_LENGTH = 29  # phones
NEW_LENGTHS = (41, 67, 103)  # phones; each one a shape the session has not seen

QUICK_PARAGRAPH = "おはようございます。今日の東京は晴れです。"
PARAGRAPH = (
    "おはようございます。今日の東京は晴れ、最高気温は二十三度の予想です。"
    "夕方からは風が強くなるので、洗濯物は早めに取り込みましょう。"
    "明日は朝から雨が降る見込みです。お出かけの際は傘をお持ちください。"
)
FIRST_AUDIO_TEXTS = (
    "リビングの照明をつけました。現在の室温は二十二度です。",
    "玄関の鍵が開いています。閉めておきましょうか？",
    "タイマーを五分にセットしました。時間になったらお知らせします。",
    "洗濯が終わりました。乾燥機に移してください。",
)
BERT_SENTENCES = (
    "はい。",
    "今日はいい天気ですね。",
    "明日の朝七時に起こしてください！",
    "リビングの照明をつけました。",
    "現在の室温は二十二度、湿度は四十五パーセントです。",
    "お風呂が沸きました。",
    "玄関の鍵が開いています。閉めておきましょうか？",
    "週末は家族で海に行く予定です。",
    "駅までは歩いて十五分ほどかかります。",
    "冷蔵庫の牛乳がもうすぐなくなります。",
    "今夜は満月なので、空を見上げてみてください。",
    "三時からオンライン会議があります。",
    "洗濯物を取り込むのを忘れないでください。",
    "次のバスは十時四十二分に到着します。",
    "ありがとうございました。",
    "おやすみなさい、また明日。",
)


class CheckError(Exception):
    """The check cannot run here; the message says what to do."""


@dataclass(frozen=True)
class EngineApi:
    """The three things the check needs from the engine."""

    engine: Any  # yomiage_engine.synthesis.engine.Engine
    quiet: Any  # SynthesisOptions with noise off: CPU and CUDA audio comparable
    cuda_problem: Callable[[], str | None]
    warm_up_text: str  # what a CUDA engine speaks at load
    openjtalk: str  # "installed" or "replayed"


# -- setting up ------------------------------------------------------------------------------------
def engine_api() -> EngineApi:
    """The engine as ``yomiage_engine``: installed, or straight from this checkout (importing
    ``custom_components.yomiage`` would import Home Assistant)."""
    openjtalk = openjtalk_source()
    if importlib.util.find_spec("yomiage_engine") is None:
        spec = importlib.util.spec_from_file_location(
            "yomiage_engine",
            ENGINE_DIR / "__init__.py",
            submodule_search_locations=[str(ENGINE_DIR)],
        )
        if spec is None or spec.loader is None:
            raise CheckError(f"no engine package at {ENGINE_DIR}")
        package = importlib.util.module_from_spec(spec)
        sys.modules["yomiage_engine"] = package
        spec.loader.exec_module(package)
    api = importlib.import_module("yomiage_engine")
    engine = importlib.import_module("yomiage_engine.synthesis.engine")
    probe = importlib.import_module("yomiage_engine.onnx.cuda_probe")
    quiet = api.SynthesisOptions(noise=0.0, noise_w=0.0)
    return EngineApi(api.Engine, quiet, probe.cuda_problem, engine._WARM_UP_TEXT, openjtalk)


def openjtalk_source() -> str:
    """ "installed", or "replayed" from the recording where pyopenjtalk is missing."""
    loaded = sys.modules.get("pyopenjtalk")
    if loaded is not None:
        return "replayed" if is_replay(loaded) else "installed"
    if importlib.util.find_spec("pyopenjtalk") is not None:
        return "installed"
    install_replay()
    return "replayed"


def record_openjtalk(bundle: Path) -> Path:
    """Speak every text of the check once, recording OpenJTalk's answers (gpu_check_replay)."""
    import pyopenjtalk

    api = engine_api()
    engine = api.engine(bundle, device="cpu")
    try:
        with recording(pyopenjtalk):
            for text in (api.warm_up_text, QUICK_PARAGRAPH, PARAGRAPH, *FIRST_AUDIO_TEXTS):
                engine.synthesize(text, api.quiet)
    finally:
        engine.close()
    return RECORDING


def full_bundle() -> Path:
    """.cache/bundle-full, built first when missing (torch needed: .venv-tools or this Python)."""
    if (FULL_BUNDLE / "build-info.json").is_file():
        return FULL_BUNDLE
    python = _torch_python()
    if python is None:
        raise CheckError(
            f"no bundle at {FULL_BUNDLE} and no torch here to build it: run `{BUILD_COMMAND}` "
            "on a machine with .venv-tools and copy the folder here, or pass --bundle DIR"
        )
    print(f"building the full bundle in {FULL_BUNDLE} (once, a few minutes)", flush=True)
    command = [python, "-m", "tools.make_bundle", "--preset", "full", "--out", str(FULL_BUNDLE)]
    subprocess.run(command, cwd=REPO, check=True)
    return FULL_BUNDLE


def _torch_python() -> str | None:
    if TOOLS_PYTHON.is_file():
        return str(TOOLS_PYTHON)
    return sys.executable if importlib.util.find_spec("torch") is not None else None


def checked_bundle(path: Path) -> Path:
    if not (path / "onnx" / "speakers").is_dir():
        raise CheckError(f"{path}: not a bundle (no onnx/speakers folder)")
    return path


# -- measuring -------------------------------------------------------------------------------------
def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median_time(action: Callable[[], object], repeats: int) -> float:
    return statistics.median(timed(action) for _ in range(repeats))


def first_audio_s(engine: Any, text: str, options: Any) -> float:
    """Seconds from the request to its first chunk; the rest is drained untimed."""
    started = time.perf_counter()
    stream = engine.stream(text, options)
    next(stream)
    elapsed = time.perf_counter() - started
    for _ in stream:
        pass
    return elapsed


def measure_device(
    api: EngineApi, bundle: Path, device: str, plan: argparse.Namespace
) -> dict[str, Any]:
    quiet = api.quiet
    started = time.perf_counter()
    engine = api.engine(bundle, device=device)
    result: dict[str, Any] = {"load_s": time.perf_counter() - started}
    try:
        texts = FIRST_AUDIO_TEXTS[: plan.repeats + 1]  # each one new to the engine
        result["first_request_first_audio_s"] = first_audio_s(engine, texts[0], quiet)
        result["first_audio_s"] = statistics.median(
            first_audio_s(engine, text, quiet) for text in texts[1:]
        )
        paragraph = QUICK_PARAGRAPH if plan.quick else PARAGRAPH
        synthesis = engine.synthesize(paragraph, quiet)
        result["audio_s"] = synthesis.audio_s
        result["compute_s"] = median_time(lambda: engine.synthesize(paragraph, quiet), plan.repeats)
        result["speed_factor"] = result["audio_s"] / result["compute_s"]
        result["bert"] = bert_batches(engine, plan.sizes, plan.repeats)
        result["paragraph_pcm"] = synthesis.audio
    finally:
        engine.close()
    return result


def bert_batches(engine: Any, sizes: Sequence[int], repeats: int) -> dict[str, dict[str, float]]:
    """BERT as the engine runs it (features left where its path keeps them)."""
    featurize = engine._features.char_features  # the engine's own path: host or device
    table: dict[str, dict[str, float]] = {}
    for size in sizes:
        texts = [BERT_SENTENCES[i % len(BERT_SENTENCES)] for i in range(size)]
        batch = functools.partial(featurize, texts)
        one_by_one = functools.partial(_one_by_one, featurize, texts)
        batch(), one_by_one()  # first runs of these shapes, untimed
        batched, sequential = median_time(batch, repeats), median_time(one_by_one, repeats)
        table[str(size)] = {"batched_s": batched, "sequential_s": sequential}
    return table


def _one_by_one(featurize: Callable[[list[str]], object], texts: list[str]) -> None:
    for text in texts:
        featurize([text])


def conv_search(bundle: Path, lengths: Sequence[int]) -> dict[str, dict[str, float]]:
    """Runs of new phone counts on the first synthesizer, per cuDNN search mode: the first at
    each count (where EXHAUSTIVE benchmarks every convolution), then the same count again."""
    import onnxruntime as ort

    synthesizer = next((bundle / "onnx" / "speakers").glob("*/synthesizer.onnx"))
    table = {}
    for mode in CONV_SEARCH_MODES:
        providers = [("CUDAExecutionProvider", {"cudnn_conv_algo_search": mode})]
        session = ort.InferenceSession(str(synthesizer), providers=providers)
        table[mode] = _new_length_times(session, lengths)
    return table


def _new_length_times(session: Any, lengths: Sequence[int]) -> dict[str, float]:
    import numpy as np

    hidden = _bert_width(session)
    session.run(None, _synthesizer_feeds(np, WARM_UP_LENGTH, hidden))  # CUDA's start-up
    first, again = [], []
    for phones in lengths:
        feeds = _synthesizer_feeds(np, phones, hidden)
        first.append(timed(lambda feeds=feeds: session.run(None, feeds)))
        again.append(timed(lambda feeds=feeds: session.run(None, feeds)))
    return {"new_length_s": statistics.mean(first), "same_length_s": statistics.mean(again)}


def _bert_width(session: Any) -> int:
    shape = next(i.shape for i in session.get_inputs() if i.name == "bert")
    return shape[1] if isinstance(shape[1], int) else 1024


def _synthesizer_feeds(np: Any, phones: int, hidden: int) -> dict[str, Any]:
    """Random phones (JP-Extra ids, tones and language JP), features and a zero style."""
    rng = np.random.default_rng(phones)
    feeds = {
        "x": rng.integers(1, 100, size=(1, phones)),
        "x_lengths": np.array([phones]),
        "sid": np.array([0]),
        "tone": rng.integers(6, 8, size=(1, phones)),
        "language": np.ones((1, phones)),
    }
    feeds = {name: value.astype(np.int64) for name, value in feeds.items()}
    feeds["bert"] = rng.standard_normal((1, hidden, phones)).astype(np.float32)
    feeds["style_vec"] = np.zeros((1, 256), dtype=np.float32)
    for name, value in (("noise_scale", 0.0), ("length_scale", 1.0), ("noise_scale_w", 0.0)):
        feeds[name] = np.array([value], dtype=np.float32)
    feeds["sdp_ratio"] = np.array([0.0], dtype=np.float32)
    return feeds


def agreement(cpu_pcm: Any, cuda_pcm: Any) -> dict[str, float]:
    """How close the CUDA paragraph is to the CPU one (FP32 GPU BERT against CPU INT8, so close,
    not equal; a broken GPU path shows as a correlation near 0)."""
    import numpy as np

    length = min(cpu_pcm.size, cuda_pcm.size)
    a, b = cpu_pcm[:length].astype(np.float64), cuda_pcm[:length].astype(np.float64)
    correlation = float(np.corrcoef(a, b)[0, 1]) if length > 1 and a.std() and b.std() else 0.0
    return {
        "cpu_samples": int(cpu_pcm.size),
        "cuda_samples": int(cuda_pcm.size),
        "correlation": correlation,
    }


@contextmanager
def gpu_memory_peak() -> Iterator[dict[str, float | None]]:
    """Peak GPU memory in use while inside, above what was in use on entry (nvidia-smi, every
    50 ms; the whole GPU, since container pids rarely match nvidia-smi's). None without it."""
    found: dict[str, float | None] = {"peak_mib": None}
    baseline = _gpu_used_mib()
    if baseline is None:
        yield found
        return
    peak = [baseline]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            used = _gpu_used_mib()
            if used is not None:
                peak[0] = max(peak[0], used)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        done.set()
        watcher.join()
        found["peak_mib"] = peak[0] - baseline


def _gpu_used_mib() -> float | None:
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    try:
        output = subprocess.run(query, capture_output=True, text=True, timeout=5, check=True)
        return float(output.stdout.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


# -- the run ---------------------------------------------------------------------------------------
def run_check(plan: argparse.Namespace) -> dict[str, Any]:
    api = engine_api()
    bundle = checked_bundle(plan.bundle) if plan.bundle else full_bundle()
    problem = api.cuda_problem()
    devices: dict[str, dict[str, Any]] = {}
    report: dict[str, Any] = {
        "bundle": str(bundle),
        "openjtalk": api.openjtalk,
        "cuda_problem": problem,
        "devices": devices,
    }
    devices["cpu"] = measure_device(api, bundle, "cpu", plan)
    report["cpu_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if problem is None:
        report.update(cuda_figures(api, bundle, plan, devices))
    for figures in devices.values():
        del figures["paragraph_pcm"]
    return report


def cuda_figures(
    api: EngineApi, bundle: Path, plan: argparse.Namespace, devices: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    with gpu_memory_peak() as memory:  # the engine alone: the comparisons below add their own
        devices["cuda"] = measure_device(api, bundle, "cuda", plan)
    cpu, cuda = devices["cpu"], devices["cuda"]
    found: dict[str, Any] = {
        "gpu_memory_peak_mib": memory["peak_mib"],
        "cuda_over_cpu": cpu["compute_s"] / cuda["compute_s"],
        "agreement": agreement(cpu["paragraph_pcm"], cuda["paragraph_pcm"]),
    }
    if (bundle / FP32_BERT).is_file():  # also as published voices come: INT8 BERT only
        with int8_bert_view(bundle) as view:
            devices["cuda, INT8 BERT on the CPU"] = measure_device(api, view, "cuda", plan)
    found["conv_search"] = conv_search(bundle, NEW_LENGTHS[:1] if plan.quick else NEW_LENGTHS)
    return found


@contextmanager
def int8_bert_view(bundle: Path) -> Iterator[Path]:
    """The bundle without its FP32 BERT graph (links to the rest), like a Hub bundle."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        view = Path(scratch)
        (view / "onnx" / "bert").mkdir(parents=True)
        (view / "bert").symlink_to((bundle / "bert").resolve())
        (view / "onnx" / "speakers").symlink_to((bundle / "onnx" / "speakers").resolve())
        (view / "onnx" / "bert" / "q8").symlink_to((bundle / "onnx" / "bert" / "q8").resolve())
        yield view


def printed(report: dict[str, Any]) -> str:
    lines = [f"bundle: {report['bundle']}, OpenJTalk {report['openjtalk']}"]
    problem = report["cuda_problem"]
    lines.append("CUDA: usable" if problem is None else f"CUDA: not usable here: {problem}")
    for device, figures in report["devices"].items():
        lines.append(
            f"{device}: load {figures['load_s']:.2f} s, speed factor {figures['speed_factor']:.1f}x"
            f" ({figures['audio_s']:.1f} s audio in {figures['compute_s']:.2f} s)"
        )
        lines.append(
            f"  first audio {figures['first_audio_s']:.3f} s"
            f" (first request after load: {figures['first_request_first_audio_s']:.3f} s)"
        )
        for size, bert in figures["bert"].items():
            lines.append(
                f"  BERT x{size}: batched {bert['batched_s'] * 1000:.1f} ms,"
                f" one by one {bert['sequential_s'] * 1000:.1f} ms"
                f" ({bert['sequential_s'] / bert['batched_s']:.2f}x)"
            )
    lines.extend(_cuda_lines(report))
    lines.append(f"CPU peak RSS: {report['cpu_peak_rss_mib']:.0f} MiB")
    return "\n".join(lines)


def _cuda_lines(report: dict[str, Any]) -> list[str]:
    if "cuda_over_cpu" not in report:
        return []
    memory = report["gpu_memory_peak_mib"]
    match = report["agreement"]
    lines = [
        f"CUDA over CPU: {report['cuda_over_cpu']:.1f}x faster on the paragraph",
        f"CPU/CUDA audio: {match['cpu_samples']}/{match['cuda_samples']} samples,"
        f" correlation {match['correlation']:.3f}",
        "GPU memory peak: " + ("n/a (no nvidia-smi)" if memory is None else f"{memory:.0f} MiB"),
    ]
    for mode, times in report.get("conv_search", {}).items():
        lines.append(
            f"cuDNN {mode}: new length {times['new_length_s'] * 1000:.0f} ms,"
            f" same length again {times['same_length_s'] * 1000:.0f} ms"
        )
    return lines


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.gpu_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bundle", type=Path, help="a bundle folder (default: the full bundle)")
    parser.add_argument("--quick", action="store_true", help="a smoke test of the script")
    parser.add_argument("--sizes", default="2,4,8,16", help="BERT batch sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (median)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--require-cuda", action="store_true", help="exit 1 if CUDA is unusable")
    parser.add_argument(
        "--record-openjtalk",
        action="store_true",
        help=f"record OpenJTalk's answers for machines without it (into {RECORDING.name})",
    )
    plan = parser.parse_args(argv)
    try:
        plan.sizes = [int(size) for size in plan.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes wants whole numbers like 2,4,8: {plan.sizes!r}")
    if plan.quick:
        plan.sizes, plan.repeats = [2], 1
    if plan.repeats < 1 or min(plan.sizes) < 1:
        parser.error("--repeats and --sizes must be at least 1")
    return plan


def main(argv: Sequence[str] | None = None) -> int:
    plan = parse(argv)
    started = time.perf_counter()
    try:
        if plan.record_openjtalk:
            print(f"recorded: {record_openjtalk(plan.bundle or TINY_BUNDLE)}")
            return 0
        report = run_check(plan)
    except CheckError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    report["elapsed_s"] = time.perf_counter() - started
    print(printed(report))
    print(f"elapsed: {report['elapsed_s']:.0f} s")
    if plan.json:
        plan.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 1 if plan.require_cuda and report["cuda_problem"] is not None else 0


if __name__ == "__main__":
    sys.exit(main())
