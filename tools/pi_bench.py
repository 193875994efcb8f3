"""The slow box: Yomiage and hayakoe under one Linux CPU cap, calibrated each run so that hayakoe
speaks the short text at its Raspberry Pi 4B speed (0.26-0.30x real time).

    .venv-tools/bin/python -m tools.pi_bench [--reps 3] [--threads N] [--out bench-out/pi]

A proxy, not a Pi: this machine's x86 kernels inside a cgroup that grants the engines a fraction of
one core's time (tools/cpu_cap.py), which makes every message slower than real time, as it is on a
Pi, so that what a listener hears there (the wait for first audio, the gaps while the next sentence
is not ready) can be measured here. ARM itself is checked apart (tests/arm64).

Yomiage's graph cache is prepared first, uncapped (its first start ever is not what is measured
here). The cap: one hayakoe process, its cap changed until the short text runs at 0.28 +- 0.02x
real time twice running (one reading can land there by luck); at that cap the same process then
speaks each of the benchmark's texts once, whose speeds say how much harsher a calibration on a
longer text would be. Then, repetition by repetition, the engines alternating, each in a fresh
process that starts and loads inside the cap: two Assist replies as an LLM writes them (a few
characters at a time; hayakoe takes whole text) to their first speech, one of them with a long
first sentence; the Assist reply and the long text (an eight-sentence announcement) handed over
whole, as Home Assistant hands a message it has whole, streamed to their end (first audio, first
speech past a smooth start's lead, the playback waits a player starting with the first piece would
hear, the time to the last piece); and the 3-sentence text synthesised (speed factor, CPU seconds
per audio second). After each repetition, a prepared message played: Home Assistant's own test of
it (tests/runtime/integration/test_prepare.py) started and run in the cap, which times ``tts.speak``
to the player's first bytes from the cache; beside it, the peer's first audio of the announcement,
which it can only synthesize when it is played. Last, Yomiage's roofline of the 3-sentence text in
the cap (tools/roofline.py). Needs root. Written to the output folder: pi.json, pi.md.

Yomiage takes as many threads as the cap grants whole CPUs (engine/onnx/cores.py: one here), as
it would in a container with a CPU limit; a Pi has no such limit and runs one thread per core,
which no cap on this machine imitates. ``--threads N`` sets Yomiage's threads instead, to see
what threads beyond the quota cost under it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from . import roofline
from .bench import (
    OURS_PYTHON,
    REPO,
    TEXTS,
    BenchError,
    Config,
    Plan,
    Worker,
    configs_for,
    machine,
    measured_view,
)
from .cpu_cap import CpuCap, CpuCapError

# hayakoe 1.3.1 on a Raspberry Pi 4B is 0.3x real time (the brief's figure); issue 40 asks for
# first audio under a cap where it speaks one sentence at 0.26-0.30x.
PI_SPEED = 0.28
PI_TOLERANCE = 0.02
CALIBRATION_TEXT = "short"
SPEED_TEXTS = ("short", "medium", "long")  # the peer's speed at the cap, one sentence to eight
MAX_PROBES = 10  # readings of the calibration text, a confirming second one included
STREAMED = ("assist", "long")  # handed over whole, streamed to their end
AS_WRITTEN = ("assist", "assist_long")  # arriving as an LLM writes them, to their first speech
SYNTHESISED = "medium"  # the 3-sentence text: speed factor
# Home Assistant's own test of a prepared message (tts.speak to the player's first bytes, played
# from its cache), run in the cap: it reports the wait as a JUnit property of that name.
PREPARED_TEST = (
    "tests/runtime/integration/test_prepare.py::"
    "test_on_a_slow_box_a_message_starts_smoothly_but_is_prepared_without_the_lead"
)
PREPARED_PROPERTY = "prepared_audio_s"


@dataclass(frozen=True)
class Calibration:
    cpus: float  # cores' worth of time the cap grants
    probes: list[list[float]]  # every probe as [cap, speed]
    speeds: dict[str, float]  # the peer's speed on each of SPEED_TEXTS at that cap


def calibrate(cap: CpuCap, peer: Config, plan: Plan) -> Calibration:
    """The cap at which ``peer`` speaks the calibration text at the Pi's speed (``pi_cap``),
    then the peer's speed on each of SPEED_TEXTS there."""
    worker = Worker(peer, plan, cap)
    probes: list[list[float]] = []

    def speed_at(cpus: float, name: str) -> float:
        cap.set(cpus)
        answer = worker.ask("synth", text=TEXTS[name])
        speed: float = answer["audio_s"] / answer["compute_s"]
        _progress(f"{cpus:.3f} CPU: {peer.name} speaks the {name} text at {speed:.3f}x real time")
        return speed

    try:
        worker.load()
        worker.ask("synth", text=TEXTS[CALIBRATION_TEXT])  # warm-up, uncapped
        cpus = pi_cap(lambda cpus: speed_at(cpus, CALIBRATION_TEXT), probes)
        if cpus is not None:
            # The short text a third time too: the readings at one cap show a probe's noise.
            speeds = {name: speed_at(cpus, name) for name in SPEED_TEXTS}
            return Calibration(cpus, probes, speeds)
    finally:
        worker.close()
        cap.set(None)
    raise BenchError(f"no cap put {peer.name} at {PI_SPEED}x real time in {MAX_PROBES} probes")


def pi_cap(speed_at: Callable[[float], float], probes: list[list[float]]) -> float | None:
    """The cap at which ``speed_at`` reads the Pi's speed twice running (each probe appended to
    ``probes`` as [cap, speed]); None after MAX_PROBES. Speed goes with the time granted, so each
    probe scales the cap by how far off the last one (the mean of a pair) was. One reading is not
    enough: a probe can land in the window by luck (seen on a Zen 4 box: 0.337 CPU read 0.284x,
    then 0.407x and 0.410x)."""
    cpus = 1.0
    while len(probes) < MAX_PROBES:
        speed = speed_at(cpus)
        probes.append([cpus, speed])
        if abs(speed - PI_SPEED) <= PI_TOLERANCE:
            again = speed_at(cpus)
            probes.append([cpus, again])
            if abs(again - PI_SPEED) <= PI_TOLERANCE:
                return cpus
            speed = (speed + again) / 2
        cpus *= PI_SPEED / speed
    return None


def measure(cap: CpuCap, cpus: float, config: Config, plan: Plan) -> dict[str, float]:
    """One repetition of one engine: a fresh process, started, loaded and measured in the cap."""
    cap.set(cpus)
    worker = Worker(config, plan, cap)
    try:
        figures = {"ready_s": worker.load()["ready_s"]}
        for name in AS_WRITTEN:
            written = worker.ask("stream", text=TEXTS[name], in_pieces=True)
            figures.update({f"{name}_written_{key}": value for key, value in written.items()})
        for name in STREAMED:
            streamed = worker.ask("stream", text=TEXTS[name], whole=True)
            figures.update({f"{name}_{key}": value for key, value in streamed.items()})
        synthesised = worker.ask("synth", text=TEXTS[SYNTHESISED])
        figures.update({f"{SYNTHESISED}_{key}": value for key, value in synthesised.items()})
    finally:
        worker.close()
        cap.set(None)
    return figures


def prepared_played_s(cap: CpuCap, cpus: float, plan: Plan, rep: int) -> float:
    """Seconds from ``tts.speak`` to the player's first bytes of a prepared message, Home
    Assistant (its test harness, with Yomiage's tiny voice) started and run inside the cap."""
    report = plan.out / f"prepared-{rep}.xml"
    report.unlink(missing_ok=True)  # an earlier run's figure is not this one's
    command = [str(OURS_PYTHON), "-m", "pytest", PREPARED_TEST, "-q", "-p", "no:cacheprovider"]
    cap.set(cpus)
    try:
        with (plan.out / "prepared.log").open("a", encoding="utf-8") as log:
            subprocess.run(
                cap.wrap([*command, f"--junitxml={report}"]),
                cwd=REPO,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,  # a wait over the test's bound is still a figure to report
            )
    finally:
        cap.set(None)
    if not report.is_file():
        raise BenchError(f"the prepared-message test wrote no report (see {log.name})")
    for prop in ElementTree.parse(report).iter("property"):
        if prop.get("name") == PREPARED_PROPERTY:
            return float(prop.get("value", "nan"))
    raise BenchError(f"the prepared-message test did not get to play it (see {log.name})")


def run(configs: Sequence[Config], plan: Plan, name: str) -> dict[str, Any]:
    ours, peer = configs
    results: dict[str, Any] = {"machine": machine(), "bundle": str(plan.source), "runs": {}}
    prepare = Worker(ours, plan)  # Yomiage's first start ever (its graph cache), uncapped
    try:
        prepare.load()
    finally:
        prepare.close()
    with CpuCap(name) as cap:
        calibration = calibrate(cap, peer, plan)
        cpus = calibration.cpus
        results["cap_cpus"], results["calibration"] = cpus, calibration.probes
        results["peer_speeds"] = calibration.speeds
        for rep in range(plan.reps):
            for config in (ours, peer) if rep % 2 == 0 else (peer, ours):
                figures = measure(cap, cpus, config, plan)
                runs = results["runs"].setdefault(config.name, {})
                for key, value in figures.items():
                    runs.setdefault(key, []).append(value)
                first, last = figures["assist_written_speech_s"], figures["long_last_audio_s"]
                _progress(
                    f"rep {rep + 1}: {config.name} Assist first speech {first:.2f} s, long text"
                    f" to its end {last:.1f} s, waiting {figures['long_waits_s']:.1f} s"
                )
            prepared = prepared_played_s(cap, cpus, plan, rep)
            results["runs"][ours.name].setdefault("prepared_played_s", []).append(prepared)
            _progress(f"rep {rep + 1}: prepared message played after {prepared:.3f} s")
        results["roofline"] = capped_roofline(cap, cpus, ours, plan)
    return results


def capped_roofline(cap: CpuCap, cpus: float, config: Config, plan: Plan) -> dict[str, Any]:
    """Yomiage's roofline (tools/roofline.py) of the 3-sentence text, started and run in the cap,
    its sgemm peak too: what the stages make of the time the cap grants."""
    _progress(f"roofline of the {SYNTHESISED} text in the cap")
    cap.set(cpus)
    try:
        return roofline.run_in_child(
            config.python,
            plan.bundle,
            plan.voice,
            TEXTS[SYNTHESISED],
            plan.out / "roofline.json",
            config.env,
            wrap=cap.wrap,
            warmups=0,
            reps=1,
        )
    finally:
        cap.set(None)


# -- the report ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    name: str
    ours: float
    peer: float
    goal: str
    met: bool | None  # None: no target, shown for what it says


def rows(results: dict[str, Any], ours: str, peer: str) -> list[Row]:
    """Issues 20's and 30's targets under the cap (medians of the repetitions; the worst first
    speech too). Speech, not silence, is what an Assist user waits for: a smooth start's lead is
    first audio but not first speech."""
    mine, theirs = results["runs"][ours], results["runs"][peer]

    def median(runs: dict[str, list[float]], key: str) -> float:
        return statistics.median(runs[key])

    def speed(runs: dict[str, list[float]]) -> float:
        pairs = zip(runs[f"{SYNTHESISED}_audio_s"], runs[f"{SYNTHESISED}_compute_s"], strict=True)
        return statistics.median(audio / compute for audio, compute in pairs)

    def row(name: str, key: str, goal: str = "-", met: Any = None) -> Row:
        ours_value, peer_value = median(mine, key), median(theirs, key)
        return Row(name, ours_value, peer_value, goal, None if met is None else met(ours_value))

    worst = max(mine["assist_written_speech_s"])
    peer_waits = median(theirs, "assist_waits_s")
    long_s, peer_long_s = median(mine, "long_last_audio_s"), median(theirs, "long_last_audio_s")
    prepared_s = median(mine, "prepared_played_s")
    cost = median(mine, f"{SYNTHESISED}_cpu_s") / median(mine, f"{SYNTHESISED}_audio_s")
    peer_cost = median(theirs, f"{SYNTHESISED}_cpu_s") / median(theirs, f"{SYNTHESISED}_audio_s")
    return [
        row(
            "first speech, Assist reply as an LLM writes it (s)",
            "assist_written_speech_s",
            "<= 2.5 s",
            lambda value: value <= 2.5,
        ),
        Row(
            "first speech, Assist reply as written, worst (s)",
            worst,
            max(theirs["assist_written_speech_s"]),
            "<= 4 s",
            worst <= 4.0,
        ),
        row(
            "first speech, Assist reply with a long first sentence (s)",
            "assist_long_written_speech_s",
            "<= 2.5 s",
            lambda value: value <= 2.5,
        ),
        row("first audio, Assist reply handed whole (s)", "assist_first_audio_s"),
        row("first speech, Assist reply handed whole (s)", "assist_speech_s"),
        row(
            "playback waits, Assist reply handed whole (s)",
            "assist_waits_s",
            "<= 0.5x peer",
            lambda value: value <= 0.5 * peer_waits,
        ),
        Row(
            "first audio, a prepared message played (s; the peer synthesizes it then)",
            prepared_s,
            median(theirs, "long_first_audio_s"),
            "<= 0.5 s",
            prepared_s <= 0.5,
        ),
        row("first audio, announcement handed whole (s)", "long_first_audio_s"),
        row("first speech, announcement handed whole (s)", "long_speech_s"),
        row(
            "playback waits, announcement handed whole (s)",
            "long_waits_s",
            "0",
            lambda value: value <= 0.05,
        ),
        Row(
            "announcement streamed to its end (s)",
            long_s,
            peer_long_s,
            ">= 2x faster",
            peer_long_s >= 2.0 * long_s,
        ),
        Row(
            "speed, 3-sentence text (x real time)",
            speed(mine),
            speed(theirs),
            ">= 2x peer",
            speed(mine) >= 2.0 * speed(theirs),
        ),
        Row("CPU s per audio s, 3-sentence text", cost, peer_cost, "-", None),
    ]


def markdown(results: dict[str, Any], ours: str, peer: str) -> str:
    host = results["machine"]
    probes = ", ".join(f"{cpus:.3f} CPU -> {speed:.3f}x" for cpus, speed in results["calibration"])
    lines = [
        f"Slow-box proxy, not a Pi: {host['cpu']} ({host['cores']} cores, x86 kernels) inside one "
        f"CPU cap of **{results['cap_cpus']:.3f} CPU**, where {peer} speaks the short text at "
        f"{results['calibration'][-1][1]:.2f}x real time (aimed at {PI_SPEED} +- {PI_TOLERANCE};"
        f" calibration: {probes}). Bundle `{Path(results['bundle']).name}`;"
        f" median of {len(results['runs'][ours]['ready_s'])} repetitions, fresh processes;"
        f" {ours}'s threads per run: {results.get('ours_threads') or 'read from the box'}.",
        *_speeds_line(results, peer),
        "",
        f"| under the cap | {ours} | {peer} | goal | met |",
        "|---|---|---|---|---|",
    ]
    for row in rows(results, ours, peer):
        met = "-" if row.met is None else "yes" if row.met else "**no**"
        lines.append(f"| {row.name} | {row.ours:.2f} | {row.peer:.2f} | {row.goal} | {met} |")
    if "roofline" in results:
        lines += ["", *roofline.markdown(results["roofline"])]
    return "\n".join(lines) + "\n"


def _speeds_line(results: dict[str, Any], peer: str) -> list[str]:
    """The peer's speed on each text at the cap, and the cap at which it would speak that text at
    the aim instead (speed goes with the time granted)."""
    speeds: dict[str, float] = results["peer_speeds"]
    cpus = results["cap_cpus"]
    each = ", ".join(
        f"{name} {speed:.2f}x (at {PI_SPEED}x: {cpus * PI_SPEED / speed:.3f} CPU)"
        for name, speed in speeds.items()
    )
    return ["", f"At this cap {peer} speaks the texts at: {each}."]


def _progress(message: str) -> None:
    print(f"[pi_bench] {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.pi_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench-out" / "pi")
    parser.add_argument(
        "--bundle",
        type=Path,
        help="bundle to use instead of the full voice in the published layout",
    )
    parser.add_argument(
        "--peer",
        choices=["hayakoe", "self"],
        default="hayakoe",
        help="self: calibrate on Yomiage (a smoke test of the harness)",
    )
    parser.add_argument(
        "--threads", type=int, help="Yomiage's threads per run (default: read from the box)"
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    measured, bundle, voice = measured_view(False, args.bundle, args.peer, out)
    plan = Plan(measured, bundle, voice, texts=(), warmups=0, reps=args.reps, out=out)
    configs = configs_for(args.peer, out / "yomiage-cache", args.threads)
    try:
        results = run(configs, plan, f"yomiage-pi-bench-{out.name}")
    except (BenchError, CpuCapError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    results["ours_threads"] = args.threads
    report = markdown(results, configs[0].name, configs[1].name)
    (out / "pi.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    (out / "pi.md").write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
