"""Side-by-side benchmark: Yomiage against a peer engine on the same bundle, texts and machine.

    .venv-tools/bin/python -m tools.bench [--peer hayakoe] [--quick] [--out bench-out]

Each configuration runs in its own fresh process (tools/bench_worker.py, under the venv of the
engine it measures), so that its memory is its own. Runs of the two engines alternate repetition
by repetition, so that a noisy machine slows both alike: compare the ratios of one run.

Measured per configuration: cold load (process start to ready, one speaker); per text the
compute time, audio length and speed factor (audio s / compute s; 2 warm-ups, median of 5); time
to first audio when streaming the way Home Assistant asks for speech (Yomiage: the message as
one arriving piece, ``stream_sentences``; the Assist reply and the long text streamed to their
end too: the player's waits, and the speed Home Assistant users get, since it asks every tts
entity for a stream) with the CPU seconds they cost; peak RSS (VmHWM) after load and after all
synthesis, and private RSS. Then an Assist reply asked for while the long text streams as an
announcement (at several moments into it, one engine process serving both): the reply's first
audio. The targets are the listener's (first audio, the stream to its end, the reply during an
announcement) and the box's (CPU per audio second, memory, start); whole-file time is a line.
Last, a roofline of Yomiage's stream of the long text (tools/roofline.py, a process of its own):
per stage the FLOPs counted from the graph, the time from onnxruntime's profile, and GFLOP/s
against this box's own FP32 sgemm peak. Written to the output folder: results.json (every
repetition), results.md (the tables), results.png and roofline.json.

``--peer``: ``hayakoe`` (hayakoe 1.3.1 from .venv-peer, built by tools/peer/make_venv.sh when
missing), ``published`` (Yomiage with its graph cache off: the graphs as published), ``self``
(Yomiage against itself: the ratios show this machine's noise), ``dialects`` (Yomiage on the
same voice as hayakoe's form, Style-Bert-VITS2's converter and an AIVMX file write it,
tools/make_dialects.py: every dialect at the speed of our own export), ``pitch`` (Yomiage with
pitch and intonation moved, ``PITCH_OPTIONS``: what audio/pitch.py costs), or ``none``.
What it measures: the full random voice as hayakoe's exporter writes it (tools/make_dialects.py;
the layout of the published voices), or the bundle ``--bundle`` names.
``--quick``: the tiny bundle, two texts, one repetition: a smoke test of the harness itself.
``--first-start``: Yomiage's start alone, on an empty graph cache (the first start ever, which
prepares the graphs for this CPU) and on the cache it left, each start a fresh process: time to
ready, peak RSS (VmHWM), anonymous memory at ready and its peak (sampled: the kernel keeps no
high-water mark of it), with and without the processes the start runs, and their peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import roofline
from .bench_worker import OPTIONS_VARIABLE, THREADS_VARIABLE, memory

if TYPE_CHECKING:
    from .cpu_cap import CpuCap

REPO = Path(__file__).resolve().parent.parent
FULL_BUNDLE = REPO / ".cache" / "bundle-full"
TINY_BUNDLE = REPO / "tests" / "fixtures" / "bundle-tiny"
OURS_PYTHON = REPO / ".venv" / "bin" / "python"
PEER_PYTHON = REPO / ".venv-peer" / "bin" / "python"
PEER_VENV_SCRIPT = REPO / "tools" / "peer" / "make_venv.sh"

TEXTS = {
    "short": "今日はとてもいい天気ですね。",
    "medium": (
        "おはようございます。今日の東京は晴れ、最高気温は二十三度の予想です。"
        "夕方からは風が強くなるので、洗濯物は早めに取り込みましょう。"
    ),
    "long": (
        "昔々、ある山のふもとに小さな村がありました。"
        "村には働き者のおじいさんとおばあさんが住んでいました。"
        "ある日、おじいさんは山へしばかりに出かけました。"
        "おばあさんは川へ洗濯に行きました。"
        "すると川上から、大きな桃がどんぶらこと流れてきました。"
        "おばあさんはその桃を拾って、家に持って帰りました。"
        "二人で桃を切ろうとすると、中から元気な男の子が生まれました。"
        "二人はその子を桃太郎と名付けて、大切に育てました。"
    ),
    "assist": (
        "リビングの照明をつけました。現在の室温は二十二度、湿度は四十五パーセントです。"
        "ほかに何かお手伝いできることはありますか？"
    ),
    # An Assist reply whose first sentence is long (25 characters): its first audio waits on it.
    "assist_long": (
        "駅前の小さなパン屋は、毎朝早くから店を開けています。"
        "今日のおすすめはクロワッサンです。売り切れる前に行きましょう。"
    ),
}
QUICK_TEXTS = ("short", "assist")
TTFA_TEXT = "assist"  # the streaming target: first audio of a three-sentence Assist reply
SPEED_TEXT = "long"
# Streamed to their end: the Assist reply (the player's waits) and the long text (Home Assistant
# asks every tts entity for a stream, announcements too: the speed its users get).
WHOLE_STREAM_TEXTS = (TTFA_TEXT, SPEED_TEXT)
# An Assist reply (TTFA_TEXT) asked for this many seconds into an announcement (SPEED_TEXT,
# streamed to its end: ~16 s here), the engines taking turns moment by moment.
DURING_MOMENTS = (1.5, 4.0, 6.5, 9.0, 11.5)
QUICK_DURING_MOMENTS = (0.0, 0.05)


class BenchError(RuntimeError):
    """A worker failed or answered with an error; the message says which and why."""


# --peer pitch: pitch and intonation both away from 1, so that every stage of audio/pitch.py runs.
PITCH_OPTIONS = {"pitch": 1.1, "intonation": 1.3}


@dataclass(frozen=True)
class Config:
    name: str  # as shown in the tables
    impl: str  # bench_worker --impl
    python: Path
    env: dict[str, str] = field(default_factory=dict)
    view: tuple[Path, str] | None = None  # its own bundle and voice, else the plan's


@dataclass(frozen=True)
class Plan:
    source: Path  # the bundle measured
    bundle: Path  # its one-speaker view, which both engines load
    voice: str  # speaker/style
    texts: tuple[str, ...]
    warmups: int
    reps: int
    out: Path
    during_moments: tuple[float, ...] = ()


# -- workers ---------------------------------------------------------------------------------
class Worker:
    """A bench_worker process: one JSON line out, one JSON line back."""

    def __init__(self, config: Config, plan: Plan, cap: CpuCap | None = None) -> None:
        """``cap``: the process starts inside that CPU cap (tools/pi_bench.py)."""
        self.config = config
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **config.env}
        bundle, voice = config.view or (plan.bundle, plan.voice)
        command = [str(config.python), "-m", "tools.bench_worker", "--impl", config.impl]
        command += ["--bundle", str(bundle), "--voice", voice]
        if cap is not None:
            command = cap.wrap(command)
        self.log = (plan.out / f"{config.name}.log").open("a", encoding="utf-8")
        self.spawned = time.perf_counter()
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def ask(self, command: str, **arguments: Any) -> dict[str, Any]:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"cmd": command, **arguments}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise BenchError(f"{self.config.name}: worker exited during {command!r} (see log)")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise BenchError(f"{self.config.name}: {command} failed: {answer['error']}")
        return answer

    def load(self) -> dict[str, Any]:
        answer = self.ask("load")
        answer["ready_s"] = time.perf_counter() - self.spawned  # interpreter start included
        return answer

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin:
            self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)
        self.log.close()


# -- the run ------------------------------------------------------------------------------------
def run(configs: Sequence[Config], plan: Plan) -> dict[str, Any]:
    """Every measurement, raw: per configuration its load, memory and per-text repetitions."""
    results: dict[str, Any] = {"plan": _describe(plan), "machine": machine(), "configs": {}}
    started = time.perf_counter()
    # The first start (Yomiage prepares its graph cache) in a process of its own, so that the
    # measured one starts as a user's second start does: for the first configuration, and for
    # every one with graphs of its own (the dialects).
    first_loads = {
        config.name: _first_load(config, plan)
        for index, config in enumerate(configs)
        if index == 0 or config.view is not None
    }
    workers: list[Worker] = []
    try:
        for config in configs:  # one at a time: a load never competes with another one
            workers.append(Worker(config, plan))
            loaded = workers[-1].load()
            results["configs"][config.name] = {"load": loaded, "texts": {}}
            if config.name in first_loads:
                results["configs"][config.name]["first_load"] = first_loads[config.name]
            _progress(f"{config.name}: ready in {loaded['ready_s']:.1f} s")
        for text in plan.texts:
            _measure_text(workers, text, plan, results)
        for worker in workers:  # before two requests at once raise the peak
            results["configs"][worker.config.name]["memory_end"] = worker.ask("memory")
        _measure_during(workers, plan, results)
    finally:
        for worker in workers:
            worker.close()
    results["roofline"] = _roofline(configs[0], plan)
    results["elapsed_s"] = time.perf_counter() - started
    results["machine"]["load_average_end"] = os.getloadavg()
    return results


def _first_load(config: Config, plan: Plan) -> dict[str, Any]:
    """A throw-away process that loads once: on a fresh cache, Yomiage's first start ever."""
    worker = Worker(config, plan)
    try:
        loaded = worker.load()
    finally:
        worker.close()
    _progress(f"{config.name}: first load (prepares the graph cache) {loaded['ready_s']:.1f} s")
    return loaded


def _roofline(config: Config, plan: Plan) -> dict[str, Any]:
    """The first configuration's roofline (tools/roofline.py: the long text streamed with
    onnxruntime's profiler on) in a process of its own after the paired runs, on the graph
    cache they used, so that it competes with nothing."""
    text = SPEED_TEXT if SPEED_TEXT in plan.texts else plan.texts[-1]
    _progress(f"{config.name}: roofline of the {text} text (profiled streams)")
    bundle, voice = config.view or (plan.bundle, plan.voice)
    out = plan.out / "roofline.json"
    try:
        return roofline.run_in_child(config.python, bundle, voice, TEXTS[text], out, config.env)
    except subprocess.CalledProcessError as err:
        raise BenchError(f"roofline failed (see {out.with_suffix('.log')})") from err


def _measure_text(
    workers: Sequence[Worker], text_name: str, plan: Plan, results: dict[str, Any]
) -> None:
    text = TEXTS[text_name]
    for worker in workers:
        for _ in range(plan.warmups):
            worker.ask("synth", text=text)
    runs: dict[str, dict[str, list[float]]] = {w.config.name: {} for w in workers}
    for rep in range(plan.reps):
        order = list(workers) if rep % 2 == 0 else list(reversed(workers))  # cancels drift
        for worker in order:
            _append(runs[worker.config.name], worker.ask("synth", text=text))
        for worker in order:
            streamed = worker.ask("stream", text=text, whole=text_name in WHOLE_STREAM_TEXTS)
            _append(runs[worker.config.name], {f"stream_{k}": v for k, v in streamed.items()})
    for name, values in runs.items():
        results["configs"][name]["texts"][text_name] = values
    shown = ", ".join(f"{name} {_median(v['compute_s']):.2f} s" for name, v in runs.items())
    _progress(f"{text_name}: {shown}")


def _measure_during(workers: Sequence[Worker], plan: Plan, results: dict[str, Any]) -> None:
    runs: dict[str, dict[str, list[float]]] = {w.config.name: {} for w in workers}
    for index, moment in enumerate(plan.during_moments):
        for worker in list(workers) if index % 2 == 0 else list(reversed(workers)):
            answer = worker.ask(
                "during",
                reply=TEXTS[TTFA_TEXT],
                announcement=TEXTS[SPEED_TEXT],
                after_s=moment,
            )
            _append(runs[worker.config.name], {**answer, "after_s": moment})
    for name, values in runs.items():
        if values:
            results["configs"][name]["during"] = values
    if plan.during_moments:
        shown = ", ".join(f"{name} {_median(v['first_audio_s']):.2f} s" for name, v in runs.items())
        _progress(f"{TTFA_TEXT} reply during an announcement, first audio: {shown}")


def _append(into: dict[str, list[float]], values: dict[str, float]) -> None:
    for key, value in values.items():
        into.setdefault(key, []).append(value)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            names = (line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line)
            model = next(names, "")
    except OSError:
        pass
    return {
        "cpu": model or platform.processor(),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "load_average_start": os.getloadavg(),
    }


def _describe(plan: Plan) -> dict[str, Any]:
    return {
        "bundle": str(plan.source),
        "voice": plan.voice,
        "texts": {name: TEXTS[name] for name in plan.texts},
        "warmups": plan.warmups,
        "reps": plan.reps,
        "during_moments": list(plan.during_moments),
    }


# -- figures ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Figures:
    """One configuration's medians."""

    ready_s: float
    first_load_s: float | None
    peak_load_mb: float
    peak_end_mb: float
    anon_end_mb: float
    texts: dict[str, dict[str, float]]  # text -> audio_s, compute_s, cpu_s, speed, first_audio_s
    # An Assist reply during an announcement: its first audio (median_s, worst_s) and the
    # announcement's worst playback waits (announcement_waits_s).
    during: dict[str, float] = field(default_factory=dict)


def figures(entry: dict[str, Any]) -> Figures:
    first = entry.get("first_load")
    return Figures(
        ready_s=entry["load"]["ready_s"],
        first_load_s=first["ready_s"] if first else None,
        peak_load_mb=entry["load"]["memory_kb"]["VmHWM"] / 1024,
        peak_end_mb=entry["memory_end"]["memory_kb"]["VmHWM"] / 1024,
        anon_end_mb=entry["memory_end"]["memory_kb"].get("RssAnon", 0) / 1024,
        texts={name: _text_figures(runs) for name, runs in entry["texts"].items()},
        during=_during_figures(entry.get("during")),
    )


def _during_figures(runs: dict[str, list[float]] | None) -> dict[str, float]:
    if not runs:
        return {}
    return {
        "median_s": _median(runs["first_audio_s"]),
        "worst_s": max(runs["first_audio_s"]),
        "announcement_waits_s": max(runs["announcement_waits_s"]),
    }


def _text_figures(runs: dict[str, list[float]]) -> dict[str, float]:
    speeds = [a / c for a, c in zip(runs["audio_s"], runs["compute_s"], strict=True)]
    return {
        "audio_s": _median(runs["audio_s"]),
        "compute_s": _median(runs["compute_s"]),
        "cpu_s": _median(runs["cpu_s"]),
        "speed": _median(speeds),
        "first_audio_s": _median(runs["stream_first_audio_s"]),
        "waits_s": _median_or_nan(runs, "stream_waits_s"),
        "streamed_s": _median_or_nan(runs, "stream_last_audio_s"),
        "streamed_cpu_s": _median_or_nan(runs, "stream_cpu_s"),
    }


def _median_or_nan(runs: dict[str, list[float]], key: str) -> float:
    return _median(runs[key]) if key in runs else math.nan


@dataclass(frozen=True)
class Target:
    name: str
    ours: float
    peer: float
    ratio: float
    goal: str
    met: bool


def targets(ours: Figures, peer: Figures) -> list[Target]:
    """The targets, as ratios of one run, on what listeners get: every caller streams (missing
    texts or figures are left out)."""
    found = []
    if TTFA_TEXT in ours.texts and TTFA_TEXT in peer.texts:
        first = ours.texts[TTFA_TEXT]["first_audio_s"]
        whole = peer.texts[TTFA_TEXT]["compute_s"]
        found.append(
            _at_most("first audio, Assist reply (s; peer: whole generate)", first, whole, 0.25)
        )
    found += _stream_targets(ours, peer)
    if ours.during and peer.during and TTFA_TEXT in ours.texts:
        alone = ours.texts[TTFA_TEXT]["first_audio_s"]
        during = ours.during["median_s"]
        found.append(
            Target(
                "first audio, Assist reply during an announcement (s; ratio = over alone)",
                during,
                peer.during["median_s"],
                during / alone,
                "<= 1.5",
                during <= 1.5 * alone,
            )
        )
    return [
        *found,
        _at_most("peak RSS after synthesis (MB)", ours.peak_end_mb, peer.peak_end_mb, 0.85),
        _at_most("private memory after synthesis (MB)", ours.anon_end_mb, peer.anon_end_mb, 0.4),
        _at_most("cold load, start to ready (s)", ours.ready_s, peer.ready_s, 0.7),
    ]


def _at_most(name: str, ours: float, peer: float, limit: float) -> Target:
    """A target met when ours is at most ``limit`` times the peer's."""
    return Target(name, ours, peer, ours / peer, f"<= {limit:g}", ours <= limit * peer)


def _stream_targets(ours: Figures, peer: Figures) -> list[Target]:
    """The long text streamed to its end: how soon it is all there, and the CPU it costs."""
    if SPEED_TEXT not in ours.texts or SPEED_TEXT not in peer.texts:
        return []
    mine, theirs = ours.texts[SPEED_TEXT], peer.texts[SPEED_TEXT]
    if math.isnan(mine["streamed_s"]) or math.isnan(theirs["streamed_s"]):
        return []
    enough_audio = mine["audio_s"] >= 0.95 * theirs["audio_s"]
    ratio = theirs["streamed_s"] / mine["streamed_s"]
    my_cost = mine["streamed_cpu_s"] / mine["audio_s"]
    their_cost = theirs["streamed_cpu_s"] / theirs["audio_s"]
    return [
        Target(
            "long text streamed to its end (s; ratio = peer / ours)",
            mine["streamed_s"],
            theirs["streamed_s"],
            ratio,
            ">= 1.3",
            ratio >= 1.3 and enough_audio,
        ),
        Target(
            "CPU s per audio s, long text streamed",
            my_cost,
            their_cost,
            my_cost / their_cost,
            "<= 0.7",
            my_cost <= 0.7 * their_cost,
        ),
    ]


# -- reports ------------------------------------------------------------------------------------
def markdown(results: dict[str, Any], peer_name: str | None) -> str:
    names = list(results["configs"])
    table = {name: figures(results["configs"][name]) for name in names}
    lines = [_header(results), ""]
    if peer_name:
        lines += _targets_table(targets(table[names[0]], table[peer_name]), names[0], peer_name)
        lines += _whole_file_line(table[names[0]], table[peer_name], peer_name)
    lines += _texts_table(table)
    lines += _load_table(table)
    lines += _during_table(table, results["plan"].get("during_moments", []))
    if "roofline" in results:
        lines += roofline.markdown(results["roofline"])
    return "\n".join(lines) + "\n"


def _header(results: dict[str, Any], how: str | None = None) -> str:
    """``how``: what was repeated (default: the texts' warm-ups and repetitions)."""
    plan, host = results["plan"], results["machine"]
    how = how or f"{plan['warmups']} warm-ups, median of {plan['reps']}"
    return (
        f"Bundle `{Path(plan['bundle']).name}`, voice `{plan['voice']}`; {how}; "
        f"{host['cpu']} ({host['cores']} cores), load average "
        f"{host['load_average_start'][0]:.1f} at start; run took "
        f"{results['elapsed_s'] / 60:.1f} min."
    )


def _targets_table(found: list[Target], ours: str, peer: str) -> list[str]:
    lines = [f"| target | {ours} | {peer} | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for t in found:
        met = "yes" if t.met else "**no**"
        lines.append(
            f"| {t.name} | {t.ours:.2f} | {t.peer:.2f} | {t.ratio:.2f} | {t.goal} | {met} |"
        )
    return [*lines, ""]


def _whole_file_line(ours: Figures, peer: Figures, peer_name: str) -> list[str]:
    """Whole-file synthesis of the long text: what no listener waits for (a line, not a target)."""
    if SPEED_TEXT not in ours.texts or SPEED_TEXT not in peer.texts:
        return []
    mine, theirs = ours.texts[SPEED_TEXT]["compute_s"], peer.texts[SPEED_TEXT]["compute_s"]
    return [
        f"Not a target: the {SPEED_TEXT} text synthesised whole (nobody listens before its end): "
        f"{mine:.2f} s against {peer_name}'s {theirs:.2f} s (ratio {peer_name} / ours "
        f"{theirs / mine:.2f}).",
        "",
    ]


def _texts_table(table: dict[str, Figures]) -> list[str]:
    lines = [
        "| text | engine | audio s | compute s | speed (x real time) | CPU s | first audio s "
        "| streamed to the end s | playback waits s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    texts = next(iter(table.values())).texts
    for text in texts:
        for name, fig in table.items():
            f = fig.texts[text]
            lines.append(
                f"| {text} | {name} | {f['audio_s']:.2f} | {f['compute_s']:.2f} | "
                f"{f['speed']:.2f} | {f['cpu_s']:.2f} | {f['first_audio_s']:.2f} | "
                f"{_or_dash(f['streamed_s'])} | {_or_dash(f['waits_s'])} |"
            )
    return [*lines, ""]


def _or_dash(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _load_table(table: dict[str, Figures]) -> list[str]:
    lines = [
        "| engine | start to ready s | first start s | peak RSS after load MB "
        "| peak RSS at end MB | private (anon) RSS at end MB |",
        "|---|---|---|---|---|---|",
    ]
    for name, f in table.items():
        first = f"{f.first_load_s:.1f}" if f.first_load_s is not None else "-"
        lines.append(
            f"| {name} | {f.ready_s:.1f} | {first} | {f.peak_load_mb:.0f} "
            f"| {f.peak_end_mb:.0f} | {f.anon_end_mb:.0f} |"
        )
    return [*lines, ""]


def _during_table(table: dict[str, Figures], moments: Sequence[float]) -> list[str]:
    if not all(f.during for f in table.values()):
        return []
    at = ", ".join(f"{moment:g}" for moment in moments)
    lines = [
        f"The {TTFA_TEXT} reply asked for while the {SPEED_TEXT} text streams to its end as an "
        f"announcement (at {at} s into it; one process serves both; its median is a target):",
        "",
        "| engine | first audio of the reply, median s | worst s | alone s "
        "| announcement's playback waits, worst s |",
        "|---|---|---|---|---|",
    ]
    for name, f in table.items():
        alone = f.texts[TTFA_TEXT]["first_audio_s"] if TTFA_TEXT in f.texts else math.nan
        lines.append(
            f"| {name} | {f.during['median_s']:.2f} | {f.during['worst_s']:.2f} "
            f"| {_or_dash(alone)} | {f.during['announcement_waits_s']:.2f} |"
        )
    return [*lines, ""]


def chart(results: dict[str, Any], path: Path) -> None:
    """Four panels: speed per text, first audio per text, start-up time, peak memory."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    table = {name: figures(entry) for name, entry in results["configs"].items()}
    texts = list(next(iter(table.values())).texts)
    fig, axes = pyplot.subplots(2, 2, figsize=(11, 7))
    _grouped(axes[0][0], table, texts, "speed", "speed (x real time)")
    _grouped(axes[0][1], table, texts, "first_audio_s", "first audio when streaming (s)")
    names = list(table)
    axes[1][0].bar(names, [table[n].ready_s for n in names], color=_colours(len(names)))
    axes[1][0].set_title("start to ready, one speaker (s)")
    axes[1][1].bar(names, [table[n].peak_end_mb for n in names], color=_colours(len(names)))
    axes[1][1].set_title("peak RSS after synthesis (MB)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot.close(fig)


def _grouped(axis: Any, table: dict[str, Figures], texts: list[str], key: str, title: str) -> None:
    width = 0.8 / len(table)
    for index, (name, fig) in enumerate(table.items()):
        positions = [i + index * width for i in range(len(texts))]
        axis.bar(
            positions,
            [fig.texts[t][key] for t in texts],
            width,
            label=name,
            color=_colours(len(table))[index],
        )
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(texts))], texts)
    axis.set_title(title)
    axis.legend()


def _colours(count: int) -> list[str]:
    return ["#d1495b", "#00798c", "#edae49", "#66a182"][:count]


# -- the first start's memory (--first-start) ----------------------------------------------------
# How often a start's anonymous memory is read: a graph's preparation grows it over seconds.
SAMPLE_EVERY_S = 0.01
START_STATES = {"cold": "first (graph cache cold)", "warm": "later (graph cache warm)"}


def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started that run now (Linux: each of its threads' ``children``)."""
    found: list[int] = []
    for listed in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # the thread or the process ended meanwhile
            found += [int(child) for child in listed.read_text(encoding="ascii").split()]
    return found


def anon_kb(pid: int) -> int:
    """RssAnon of a process in kB; 0 for one that has ended."""
    try:
        return memory(str(pid)).get("RssAnon", 0)
    except OSError:
        return 0


@dataclass
class AnonPeak:
    """The most anonymous memory (RssAnon) seen of a process, alone and with every process below
    it: the kernel keeps a high-water mark of resident memory (VmHWM), none of anonymous memory,
    so it is sampled (``sample``, every SAMPLE_EVERY_S while the process starts)."""

    pid: int
    anon_kb: Callable[[int], int] = anon_kb
    children: Callable[[int], list[int]] = child_pids
    own_kb: int = 0
    tree_kb: int = 0

    def sample(self) -> None:
        tree, wanted = [self.pid], [self.pid]
        while wanted:
            below = self.children(wanted.pop())
            tree += below
            wanted += below
        sizes = [self.anon_kb(pid) for pid in tree]
        self.own_kb = max(self.own_kb, sizes[0])
        self.tree_kb = max(self.tree_kb, sum(sizes))


def first_start_run(config: Config, plan: Plan, cache: Path) -> dict[str, Any]:
    """Starts of the plan's speaker, each in a fresh process: on an empty graph cache (a first
    start ever: the graphs are prepared), then on the cache it left (every later start),
    ``plan.reps`` of each, in turn."""
    results: dict[str, Any] = {"plan": _describe(plan), "machine": machine()}
    starts: dict[str, list[dict[str, Any]]] = {state: [] for state in START_STATES}
    started = time.perf_counter()
    for _ in range(plan.reps):
        shutil.rmtree(cache, ignore_errors=True)
        for state in START_STATES:
            starts[state].append(_sampled_load(config, plan))
            shown = start_figures(starts[state][-1])
            _progress(
                f"{state} start: ready in {shown['ready_s']:.1f} s, VmHWM "
                f"{shown['peak_mb']:.0f} MB, anonymous peak {shown['anon_peak_mb']:.0f} MB"
            )
    results["starts"] = starts
    results["elapsed_s"] = time.perf_counter() - started
    return results


def _sampled_load(config: Config, plan: Plan) -> dict[str, Any]:
    """A worker's load, its anonymous memory (and its children's) sampled all the while."""
    worker = Worker(config, plan)
    peak, stop = AnonPeak(worker.process.pid), threading.Event()

    def sample() -> None:
        while not stop.wait(SAMPLE_EVERY_S):
            peak.sample()

    sampler = threading.Thread(target=sample, name="memory-sampler")
    sampler.start()
    try:
        loaded = worker.load()
        peak.sample()  # ready: what it holds now counts too
    finally:
        stop.set()
        sampler.join()
        worker.close()
    return {**loaded, "anon_peak_kb": peak.own_kb, "tree_anon_peak_kb": peak.tree_kb}


def start_figures(start: dict[str, Any]) -> dict[str, float]:
    """One start's figures in MB and seconds."""
    return {
        "ready_s": start["ready_s"],
        "peak_mb": start["memory_kb"]["VmHWM"] / 1024,
        "anon_ready_mb": start["memory_kb"].get("RssAnon", 0) / 1024,
        "anon_peak_mb": start["anon_peak_kb"] / 1024,
        "tree_anon_peak_mb": start["tree_anon_peak_kb"] / 1024,
        "child_peak_mb": start["children_peak_kb"] / 1024,
    }


def first_start_markdown(results: dict[str, Any]) -> str:
    plan = results["plan"]
    how = f"median of {plan['reps']} starts of each kind, each a fresh process"
    lines = [
        _header(results, how),
        "",
        "| start | start to ready s | peak RSS (VmHWM) MB | anonymous at ready MB "
        "| anonymous peak MB | anonymous peak with its child processes MB "
        "| largest child's peak RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for state, label in START_STATES.items():
        runs = [start_figures(start) for start in results["starts"][state]]
        f = {key: _median([run[key] for run in runs]) for key in runs[0]}
        lines.append(
            f"| {label} | {f['ready_s']:.1f} | {f['peak_mb']:.0f} | {f['anon_ready_mb']:.0f} "
            f"| {f['anon_peak_mb']:.0f} | {f['tree_anon_peak_mb']:.0f} "
            f"| {f['child_peak_mb']:.0f} |"
        )
    return "\n".join([*lines, ""]) + "\n"


# -- setting up -------------------------------------------------------------------------------
def one_speaker_view(bundle: Path, folder: Path, language: Path | None = None) -> tuple[Path, str]:
    """A bundle of links holding the first speaker only, and its first voice (speaker/style).
    ``language``: the bundle whose BERT it links (default: ``bundle``).

    Both engines load every speaker they find; the measured configuration is one speaker.
    """
    language = language or bundle
    speakers = sorted(p for p in (bundle / "onnx" / "speakers").iterdir() if p.is_dir())
    if not speakers:
        raise BenchError(f"{bundle}: no speaker folders under onnx/speakers")
    speaker = speakers[0]
    config = json.loads((speaker / "config.json").read_text(encoding="utf-8"))
    style = min(config["data"]["style2id"].items(), key=lambda item: item[1])[0]
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "onnx" / "speakers").mkdir(parents=True)
    (folder / "bert").symlink_to((language / "bert").resolve())
    (folder / "onnx" / "bert").symlink_to((language / "onnx" / "bert").resolve())
    (folder / "onnx" / "speakers" / speaker.name).symlink_to(speaker.resolve())
    return folder, f"{speaker.name}/{style}"


def bundle_for(quick: bool, explicit: Path | None, out: Path) -> Path:
    if explicit:
        return explicit
    if quick:
        if (TINY_BUNDLE / "onnx" / "speakers").is_dir():
            return TINY_BUNDLE
        return _built("tiny", out / "bundle-tiny")
    return _built("full", FULL_BUNDLE)


def _built(preset: str, folder: Path) -> Path:
    from tools.make_bundle import ensure_bundle  # torch: only when a bundle must be built

    _progress(f"{preset} bundle: {folder} (built first if missing or stale)")
    return ensure_bundle(preset, folder)


def measured_source(source: Path, explicit: Path | None, quick: bool, peer: str) -> Path:
    """The bundle the benchmark measures: a bundle given on the command line, and the quick
    run's tiny one, as they are; else the full voice as hayakoe's exporter writes it, the layout
    of the published voices users run (its BERT from ``source``). ``dialects`` compares the
    exporters' forms with our own export, which it keeps."""
    if explicit is not None or quick or peer == "dialects":
        return source
    return _dialects_folder(source) / "hayakoe"


def measured_view(
    quick: bool, explicit: Path | None, peer: str, out: Path
) -> tuple[Path, Path, str]:
    """The bundle the benchmark measures (``measured_source``) and its one-speaker view in
    ``out``: (bundle, view, voice)."""
    source = bundle_for(quick, explicit, out).resolve()
    measured = measured_source(source, explicit, quick, peer)
    return (measured, *one_speaker_view(measured, out / "bundle", language=source))


def _preset_of(source: Path) -> str:
    return "tiny" if source == TINY_BUNDLE else "full"


def _dialects_folder(source: Path) -> Path:
    """The source bundle's first speaker as the other exporters write it (built by
    tools/make_dialects.py when missing)."""
    from tools.make_dialects import DEFAULT_OUT

    preset = _preset_of(source)
    folder = REPO / DEFAULT_OUT[preset]
    if not (folder / "sbv2").is_dir():
        from tools.make_dialects import build_dialects  # torch: only when they must be built

        _progress(f"building {folder} (the first speaker in other exporters' forms)")
        build_dialects(folder, preset)
    return folder


def dialect_views(source: Path, out: Path) -> list[tuple[str, tuple[Path, str]]]:
    """One-speaker views of the source bundle's first speaker as the other exporters write it,
    each with its voice."""
    from yomiage_engine.aivm import read_aivmx

    from tools.presets import PRESETS

    folder = _dialects_folder(source)
    hayakoe = one_speaker_view(folder / "hayakoe", out / "bundle-hayakoe", language=source)
    converter = one_speaker_view(folder / "sbv2", out / "bundle-sbv2", language=source)
    first_speaker = PRESETS[_preset_of(source)].speakers[0]
    voice_file = folder / f"{first_speaker}.aivmx"  # not the two-speaker one
    aivmx = out / "bundle-aivmx"
    shutil.rmtree(aivmx, ignore_errors=True)
    (aivmx / "onnx").mkdir(parents=True)
    (aivmx / "bert").symlink_to((source / "bert").resolve())
    (aivmx / "onnx" / "bert").symlink_to((source / "onnx" / "bert").resolve())
    (aivmx / voice_file.name).symlink_to(voice_file.resolve())
    first = read_aivmx(voice_file).voices[0]
    return [
        ("hayakoe-form", hayakoe),
        ("sbv2-converter", converter),
        ("aivmx", (aivmx, f"{first.name}/{next(iter(first.styles))}")),
    ]


def configs_for(
    peer: str,
    cache: Path,
    threads: int | None = None,
    views: Sequence[tuple[str, tuple[Path, str]]] = (),
) -> list[Config]:
    """``threads``: Yomiage's threads per run (None: the engine reads them from the box);
    ``views``: for ``dialects``, the bundles of the other exporters' forms (dialect_views)."""
    env = {"YOMIAGE_CACHE_DIR": str(cache)}
    if threads is not None:
        env[THREADS_VARIABLE] = str(threads)
    ours = Config("yomiage", "yomiage", OURS_PYTHON, env)
    if peer == "none":
        return [ours]
    if peer == "hayakoe":
        return [ours, Config("hayakoe", "hayakoe", _peer_python())]
    if peer == "dialects":
        return [
            ours,
            *(
                Config(f"yomiage-{name}", "yomiage", OURS_PYTHON, dict(env), view)
                for name, view in views
            ),
        ]
    if peer == "pitch":
        moved = {**env, OPTIONS_VARIABLE: json.dumps(PITCH_OPTIONS)}
        return [ours, Config("yomiage-pitch", "yomiage", OURS_PYTHON, moved)]
    if peer == "published":
        env = {"YOMIAGE_CACHE_DIR": str(cache), "YOMIAGE_GRAPH_CACHE": "0"}
        return [ours, Config("yomiage-published", "yomiage", OURS_PYTHON, env)]
    return [ours, Config("yomiage-again", "yomiage", OURS_PYTHON, dict(ours.env))]


def _peer_python() -> Path:
    if not PEER_PYTHON.is_file():
        _progress("building .venv-peer (hayakoe 1.3.1) with tools/peer/make_venv.sh")
        subprocess.run([str(PEER_VENV_SCRIPT)], cwd=REPO, check=True)
    return PEER_PYTHON


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--peer",
        choices=["hayakoe", "published", "self", "dialects", "pitch", "none"],
        default="none",
    )
    parser.add_argument("--quick", action="store_true", help="tiny bundle, 2 texts, 1 rep")
    parser.add_argument("--out", type=Path, default=REPO / "bench-out")
    parser.add_argument(
        "--bundle",
        type=Path,
        help="bundle to use instead of the full voice in the published layout",
    )
    parser.add_argument("--texts", nargs="+", choices=sorted(TEXTS))
    parser.add_argument("--reps", type=int)
    parser.add_argument("--warmups", type=int)
    parser.add_argument(
        "--first-start",
        action="store_true",
        help="only Yomiage's start: memory and time on an empty graph cache and on the cache it "
        "left, each start a fresh process (--reps of each, default 3)",
    )
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="reuse Yomiage's graph cache from the last run (first start not measured then)",
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "yomiage-cache"
    if not args.keep_cache:
        shutil.rmtree(cache, ignore_errors=True)
    measured, bundle, voice = measured_view(args.quick, args.bundle, args.peer, out)
    if args.first_start:
        plan = Plan(measured, bundle, voice, texts=(), warmups=0, reps=args.reps or 3, out=out)
    else:
        plan = Plan(
            source=measured,
            bundle=bundle,
            voice=voice,
            texts=tuple(args.texts or (QUICK_TEXTS if args.quick else TEXTS)),
            warmups=args.warmups if args.warmups is not None else (1 if args.quick else 2),
            reps=args.reps or (1 if args.quick else 5),
            out=out,
            during_moments=QUICK_DURING_MOMENTS if args.quick else DURING_MOMENTS,
        )
    try:
        if args.first_start:
            return _report(out, first_start_run(configs_for("none", cache)[0], plan, cache), None)
        # ``dialects`` measures the source bundle itself (measured_source).
        views = dialect_views(measured, out) if args.peer == "dialects" else []
        results = run(configs_for(args.peer, cache, views=views), plan)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    # Targets are ratios to another engine; dialects and pitch are compared line by line.
    line_by_line = ("none", "dialects", "pitch")
    peer_name = None if args.peer in line_by_line else list(results["configs"])[1]
    return _report(out, results, peer_name)


def _report(out: Path, results: dict[str, Any], peer_name: str | None) -> int:
    """results.json, results.md and (but for --first-start) results.png; the table printed."""
    first_start = "starts" in results
    report = first_start_markdown(results) if first_start else markdown(results, peer_name)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    (out / "results.md").write_text(report, encoding="utf-8")
    if not first_start:
        chart(results, out / "results.png")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
