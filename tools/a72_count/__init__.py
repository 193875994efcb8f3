"""Work on a Raspberry Pi 4B's CPU, counted: Yomiage and hayakoe 1.3.1 in the .arm64 root file
system under ``qemu-aarch64 -cpu cortex-a72`` with a plugin that counts the guest instructions
each thread executes (issue 54, part 1).

    .venv-tools/bin/python -m tools.a72_count [--bundle tiny|full] [--engines yomiage hayakoe]
        [--threads 1 4] [--texts assist medium] [--jobs 1] [--out bench-out/a72]

What runs: for each engine and thread count, one emulated process (tools/a72_count/guest.py in
.arm64's Python 3.11 and /opt/venv, hayakoe from .cache/a72/hayakoe, the same onnxruntime 1.32.0
wheel for both) loads the voice, speaks a warm-up sentence, then each text once, marking where
things happen (plugin.c: a mark is a system call nobody else makes). Yomiage speaks through
``Engine.stream`` (no smooth start; on a clock held still, so that its pieces are chosen as a Pi
4B chooses them, not by emulation's pace); hayakoe through ``generate`` (whole text). Both with
noise 0, so each run does the same work; every onnxruntime session at ``--threads`` intra-op threads
that sleep when idle (Yomiage sets that itself; hayakoe's sessions are given it). Yomiage's
graphs are prepared beforehand through scripts/chroot (not counted). Both engines load the same
bundle: ``full`` is the full-size random voice as hayakoe's exporter writes it (tools/bench.py's
measured view, .cache/dialects-full/hayakoe with BERT from .cache/bundle-full); ``tiny`` is
tests/fixtures/bundle-tiny (fast; a check of the instrument, not a figure of the engines).

Reported per text and over all texts: instructions (all threads; the busiest thread, waits
included; the critical path), per second of audio; to first audio (Yomiage's first chunk;
hayakoe returns whole); per stage, one stage per onnxruntime session (BERT; Yomiage's front,
which runs the text encoder, durations and flow in one run, and its decoder; hayakoe's whole
synthesizer; the duration predictor's graph; pyopenjtalk-plus's reading model) plus what the
Python threads did outside onnxruntime; per thread. Waiting: with several threads onnxruntime's
calling thread waits for its pool in loops that hold an A64 YIELD / WFE / ISB hint, which the
plugin counts apart; how long it waits there depends on how this machine schedules the emulated
threads, not on the A72, so the critical path leaves waits out: per onnxruntime run the busiest
thread's work, plus the work outside onnxruntime. Which thread takes which part of a parallel
loop follows that scheduling too: a stage's critical path moved by up to 8 % between loaded runs
of the same graphs (docs/PERFORMANCE.md, stop 61), so compare levers within one run. Instruction
counts do not depend on how busy this machine is otherwise; they are not cycles (caches, memory
and the A72's issue rate are not modelled), so a Pi figure is predicted by calibration: hayakoe
speaks at 0.3x real time on a Pi 4B (four threads), and Yomiage is predicted from the two
engines' busiest threads, and from their critical paths, per audio second. Emulation is slow:
~180 M guest instructions a second on an idle core for Python and numpy, fewer for convolutions
and on a busy box, while a full-size voice costs 12-16 G instructions per audio second (issue
54): choose small --texts for the full bundle. Written to ``--out``: a72.json (everything, per
run), a72.md (the tables) and each run's folder (its spec, the plugin's counts, the guest's
marks); ``--report-only`` reports them again, runs stopped early with the texts they finished.
``--engines yomiage-parts`` counts Yomiage with each voice's front and decoder run as
consecutive parts, one session each (guest.YomiageInParts): the front as text encoder, durations
and flow, the decoder by channel width; a little more work than the whole graphs.
``--repeats N`` counts each engine and thread count N times; ``--prepared`` skips the
preparation (minutes at full size) where the caches hold it already. Needs root (scripts/chroot)
and ``scripts/setup`` (the plugin, hayakoe's wheels, .arm64)."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1].parent
ROOTFS = REPO / ".arm64"
A72 = REPO / ".cache" / "a72"
PLUGIN = A72 / "libcount.so"
HAYAKOE = A72 / "hayakoe"
GRAPHS = A72 / "graphs"  # Yomiage's graph caches for the emulated CPU, one per thread count
GUEST = Path(__file__).with_name("guest.py")
QEMU = "qemu-aarch64"  # Debian's dynamic build: the static one has no -plugin
# argv[0] inside: Python finds the venv from it. Named by its path on this machine, which the
# guest reaches too (-L falls back to it), so that the venv's files have paths valid on both
# sides: qemu-aarch64 7.2 does not apply -L to statx, and sudachi (pyopenjtalk's tokenizer for
# some texts) checks its dictionary with it.
GUEST_PYTHON = str(ROOTFS / "opt" / "venv" / "bin" / "python")
GUEST_ELF = ROOTFS / "usr" / "bin" / "python3.11"

# The greeting: a one-second reply.
GREETING = "おはようございます。七時になりました。"
# Spoken once after loading, not counted: first runs allocate what later runs reuse.
WARMUP = "はい。"
DEFAULT_TEXTS = ("assist", "medium")
# hayakoe 1.3.1 on a Raspberry Pi 4B: 0.3x real time (the seeds' figure; tools/pi_bench.py).
PI_HAYAKOE_SPEED = 0.3


class CountError(RuntimeError):
    """A run that could not be counted; the message says why."""


def texts() -> dict[str, str]:
    from tools.bench import TEXTS

    return {**TEXTS, "greeting": GREETING}


# -- running ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    engine: str  # yomiage | hayakoe
    threads: int
    folder: Path  # its spec, counts and events
    repeat: int = 1

    @property
    def name(self) -> str:
        again = f"#{self.repeat}" if self.repeat > 1 else ""
        return f"{self.engine}-t{self.threads}{again}"


def check_ready() -> None:
    missing = [
        str(path)
        for path in (PLUGIN, HAYAKOE, ROOTFS / "proc" / "cpuinfo", GUEST_ELF)
        if not path.exists()
    ]
    if shutil.which(QEMU) is None:
        missing.append(QEMU)
    if missing:
        raise CountError(f"missing {', '.join(missing)}: run scripts/setup")


def guest_env() -> dict[str, str]:
    """The guest's environment, nothing of this machine's: one BLAS thread (OpenBLAS's threads
    spin while they wait, which would be counted as work), no network."""
    return {
        "PATH": "/opt/venv/bin:/usr/bin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def spec_for(run: Run, bundle: Path, voice: str, chosen: dict[str, str]) -> dict[str, Any]:
    return {
        "engine": run.engine,
        "threads": run.threads,
        "bundle": str(bundle),
        "voice": voice,
        "cache": str(run.folder / "cache" if run.engine == "hayakoe" else graphs_for(run.threads)),
        "hayakoe_path": str(HAYAKOE),
        "warmup": [WARMUP],
        "texts": chosen,
        "events": str(run.folder / "events.json"),
    }


def graphs_for(threads: int) -> Path:
    """A cache of its own per thread count: the cache keeps one prepared form of a graph, and
    a graph whose preparation depends on the threads would be prepared anew for each."""
    return GRAPHS / f"threads-{threads}"


def prepare(bundle: Path, voice: str, threads: int, folder: Path) -> None:
    """Yomiage's graphs for the emulated CPU at ``threads``, prepared where a child process can
    start (scripts/chroot; qemu-user with a plugin cannot execute the guest's children)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / f"prepare-t{threads}.json"  # one per thread count: counts may run at once
    cache = str(graphs_for(threads))
    chosen = {"bundle": str(bundle), "voice": voice, "threads": threads, "cache": cache}
    spec.write_text(json.dumps(chosen), encoding="utf-8")
    subprocess.run(
        [str(REPO / "scripts" / "chroot"), ".arm64", "python", str(GUEST), "prepare", str(spec)],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "QEMU_CPU": "cortex-a72"},
    )


def count(run: Run, spec: dict[str, Any]) -> dict[str, Any]:
    """One emulated process, counted: its marks and the plugin's counts, analysed."""
    run.folder.mkdir(parents=True, exist_ok=True)
    spec_path, counts = run.folder / "spec.json", run.folder / "counts.txt"
    spec_path.write_text(json.dumps(spec, ensure_ascii=False, indent=1), encoding="utf-8")
    command = [
        QEMU,
        "-cpu",
        "cortex-a72",
        "-L",
        str(ROOTFS),
        "-0",
        GUEST_PYTHON,
        "-plugin",
        f"{PLUGIN},out={counts}",
        str(GUEST_ELF),
        str(GUEST),
        "run",
        str(spec_path),
    ]
    started = time.monotonic()
    finished = subprocess.run(command, env=guest_env(), capture_output=True, text=True, check=False)
    (run.folder / "stderr.txt").write_text(finished.stderr, encoding="utf-8")
    if finished.returncode != 0:
        tail = "\n".join(finished.stderr.strip().splitlines()[-15:])
        raise CountError(f"{run.name}: the guest failed ({finished.returncode}):\n{tail}")
    (run.folder / "emulated_s").write_text(f"{time.monotonic() - started:.1f}\n", "ascii")
    return analysed_run(run.folder)


def analysed_run(folder: Path) -> dict[str, Any]:
    """A run's folder (spec, the plugin's counts, the guest's events), analysed; a run stopped
    early gives the texts it finished."""
    spec = json.loads((folder / "spec.json").read_text(encoding="utf-8"))
    guest = json.loads(Path(spec["events"]).read_text(encoding="utf-8"))
    counts = (folder / "counts.txt").read_text(encoding="ascii")
    analysed = analyse(parse_counts(counts), guest)
    emulated = folder / "emulated_s"
    analysed.update(
        engine=spec["engine"],
        threads=spec["threads"],
        emulated_s=float(emulated.read_text()) if emulated.is_file() else None,
        complete=emulated.is_file(),
        sessions=guest["sessions"],
    )
    return analysed


# -- the counts, analysed ---------------------------------------------------------------------
@dataclass(frozen=True)
class Mark:
    k: int
    slot: int  # the vCPU slot (guest thread) that made it
    counts: tuple[int, ...]  # every slot's instructions at that moment
    waiting: tuple[int, ...] = ()  # of them, in waiting loops (none from an older plugin)

    def at(self, slot: int) -> int:
        return self.counts[slot] if slot < len(self.counts) else 0

    def waited(self, slot: int) -> int:
        return self.waiting[slot] if slot < len(self.waiting) else 0

    def work(self, slot: int) -> int:
        """The slot's instructions outside waiting loops."""
        return self.at(slot) - self.waited(slot)


@dataclass(frozen=True)
class Counts:
    marks: dict[int, Mark]
    started: list[int]  # slots, in the order threads started on them
    exited: list[int]
    final: tuple[int, ...]


def parse_counts(text: str) -> Counts:
    """plugin.c's output."""
    marks: dict[int, Mark] = {}
    started: list[int] = []
    exited: list[int] = []
    final: tuple[int, ...] = ()
    for line in text.splitlines():
        kind, *fields = line.split()
        if kind == "M":
            k, slot, *counted = (int(field) for field in fields)
            marks[k] = Mark(k, slot, tuple(counted))
        elif kind == "S":
            k, *waited = (int(field) for field in fields)
            marks[k] = Mark(k, marks[k].slot, marks[k].counts, tuple(waited))
        elif kind == "I":
            started.append(int(fields[0]))
        elif kind == "X":
            exited.append(int(fields[0]))
        elif kind == "E":
            final = tuple(int(field) for field in fields)
    return Counts(marks, started, exited, final)  # no final counts: a run stopped early


def _delta(start: Mark, end: Mark, slots: int) -> list[int]:
    return [end.at(slot) - start.at(slot) for slot in range(slots)]


def _waited(start: Mark, end: Mark, slots: int) -> list[int]:
    return [end.waited(slot) - start.waited(slot) for slot in range(slots)]


def _critical_path(
    counts: Counts, inside: list[dict[str, Any]], begin: Mark, end: Mark, python: list[int]
) -> tuple[int, dict[str, int]]:
    """The instructions one after the other between two marks, waits left out: per
    onnxruntime run, the busiest of its threads' work (calling thread and pool threads run side
    by side), plus the Python threads' work outside runs; and that per stage. Where the
    emulating machine runs a pool thread late, the calling thread's wait grows; this does not."""
    slots = max(len(end.counts), len(begin.counts))
    path, in_runs = 0, 0
    stages: dict[str, int] = {}
    open_runs: dict[int, Mark] = {}
    for event in inside:
        mark = counts.marks[event["k"]]
        if event["kind"] == "run_begin":
            open_runs[mark.slot] = mark
        elif event["kind"] == "run_end" and mark.slot in open_runs:
            start = open_runs.pop(mark.slot)
            working = [
                mark.work(slot) - start.work(slot)
                for slot in range(slots)
                if slot == mark.slot or slot not in python
            ]
            stages[event["stage"]] = stages.get(event["stage"], 0) + max(working)
            path += max(working)
            in_runs += mark.work(mark.slot) - start.work(mark.slot)
    outside = sum(end.work(slot) - begin.work(slot) for slot in python) - in_runs
    stages["outside onnxruntime"] = outside
    return path + outside, stages


def analyse(counts: Counts, guest: dict[str, Any]) -> dict[str, Any]:
    """Per text: instructions over its region (all threads, per thread, the busiest), to its
    first audio, per stage (each onnxruntime run: the calling thread and the native threads),
    outside onnxruntime (the Python threads' instructions outside their runs), and what the
    native threads did outside any run (pool threads going to sleep: small where they sleep)."""
    events: list[dict[str, Any]] = guest["events"]
    missing = [event["k"] for event in events if event["k"] not in counts.marks]
    if missing:
        raise CountError(f"marks the plugin did not see: {missing[:5]}")
    slots = max([len(counts.final), *(len(mark.counts) for mark in counts.marks.values())])
    python = sorted({counts.marks[e["k"]].slot for e in events if e["kind"] == "python_thread"})
    native = [slot for slot in range(slots) if slot not in python]
    first = {e["text"]: counts.marks[e["k"]] for e in events if e["kind"] == "first_audio"}
    audio = {text["name"]: text["audio_s"] for text in guest["texts"]}
    result: dict[str, Any] = {"slots": slots, "python_slots": python, "texts": {}}
    for begin_event in (e for e in events if e["kind"] == "text_begin"):
        name = begin_event["text"]
        end_event = next(e for e in events if e["kind"] == "text_end" and e["text"] == name)
        begin, end = counts.marks[begin_event["k"]], counts.marks[end_event["k"]]
        inside = [e for e in events if begin.k < e["k"] < end.k]
        per_slot = _delta(begin, end, slots)
        stages, python_in_runs, native_in_runs, overlaps = _runs(counts, inside, python, native)
        reached = first.get(name, end)
        to_first = _delta(begin, reached, slots)
        waited = _waited(begin, end, slots)
        path, path_stages = _critical_path(counts, inside, begin, end, python)
        path_to_first, first_stages = _critical_path(
            counts, [e for e in inside if e["k"] < reached.k], begin, reached, python
        )
        total = sum(per_slot)
        outside = sum(per_slot[slot] for slot in python) - python_in_runs
        result["texts"][name] = {
            "audio_s": audio[name],
            "instructions": total,
            "busiest_thread": max(per_slot),
            "waiting": sum(waited),
            "busiest_thread_work": max(w - v for w, v in zip(per_slot, waited, strict=True)),
            "critical_path": path,
            "per_thread": {
                _slot_name(slot, python): per_slot[slot]
                for slot in range(slots)
                if per_slot[slot] > 0
            },
            "threads_in_onnxruntime": sum(1 for slot in native if per_slot[slot] > 0.001 * total),
            "first_audio": {
                "instructions": sum(to_first),
                "busiest_thread": max(to_first),
                "critical_path": path_to_first,
                "stages_critical_path": first_stages,
                "whole": name not in first,
            },
            "stages": {**stages, "outside onnxruntime": outside},
            "runs": dict(Counter(e["stage"] for e in inside if e["kind"] == "run_begin")),
            "stages_critical_path": path_stages,
            "native_outside_runs": sum(per_slot[slot] for slot in native) - native_in_runs,
            "overlapping_runs": overlaps,
        }
    result["all"] = _summed(result["texts"])
    return result


def _runs(
    counts: Counts, inside: list[dict[str, Any]], python: list[int], native: list[int]
) -> tuple[dict[str, int], int, int, int]:
    """Each run's instructions by stage (calling thread + native threads), the Python threads'
    instructions inside runs, the native threads' inside runs, and how many runs began while
    another was under way (their native threads' work would count twice)."""
    stages: dict[str, int] = {}
    python_in = native_in = overlaps = 0
    open_runs: dict[int, Mark] = {}  # by calling slot
    for event in inside:
        mark = counts.marks[event["k"]]
        if event["kind"] == "run_begin":
            overlaps += bool(open_runs)
            open_runs[mark.slot] = mark
        elif event["kind"] == "run_end":
            begin = open_runs.pop(mark.slot)
            caller = mark.at(mark.slot) - begin.at(mark.slot)
            pool = sum(mark.at(slot) - begin.at(slot) for slot in native)
            stages[event["stage"]] = stages.get(event["stage"], 0) + caller + pool
            python_in += caller
            native_in += pool
    return stages, python_in, native_in, overlaps


def _slot_name(slot: int, python: list[int]) -> str:
    if python and slot == python[0]:
        return f"{slot} (main)"
    return f"{slot} (python)" if slot in python else f"{slot} (native)"


def _summed(per_text: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Over all texts: sums, and the busiest thread per text summed (the critical path of
    each text, one after the other)."""
    entries = list(per_text.values())
    stages: dict[str, int] = {}
    for entry in entries:
        for stage, value in entry["stages"].items():
            stages[stage] = stages.get(stage, 0) + value
    return {
        "audio_s": sum(e["audio_s"] for e in entries),
        "instructions": sum(e["instructions"] for e in entries),
        "busiest_thread": sum(e["busiest_thread"] for e in entries),
        "critical_path": sum(e["critical_path"] for e in entries),
        "waiting": sum(e["waiting"] for e in entries),
        "stages": stages,
    }


# -- the report -------------------------------------------------------------------------------
G = 1e9


def per_audio_s(entry: dict[str, Any], key: str) -> float:
    seconds = float(entry["audio_s"])
    return float(entry[key]) / seconds if seconds > 0 else math.nan


def predicted_pi(runs: dict[str, dict[str, Any]], text: str | None) -> dict[str, Any] | None:
    """A Pi 4B figure from the counts, calibrated on hayakoe at 4 threads (0.3x real time
    there): Pi seconds follow one thread's instructions, either the busiest thread's as
    emulated (waits included, as they fell on this machine) or the critical path (waits left
    out). Yomiage at 4 threads then runs at 0.3x real time x hayakoe's count per audio second
    / its own, and its first audio comes after its own count to first audio."""
    if "hayakoe-t4" not in runs or "yomiage-t4" not in runs:
        return None

    def pick(run: dict[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = run["all"] if text is None else run["texts"].get(text)
        return found

    theirs, ours = pick(runs["hayakoe-t4"]), pick(runs["yomiage-t4"])
    if theirs is None or ours is None:
        return None
    predicted: dict[str, Any] = {"hayakoe_x_real_time": PI_HAYAKOE_SPEED}
    for key, label in (("busiest_thread", "busiest"), ("critical_path", "critical_path")):
        seconds_per = (1 / PI_HAYAKOE_SPEED) / per_audio_s(theirs, key)
        predicted[f"yomiage_x_real_time_{label}"] = (
            PI_HAYAKOE_SPEED * per_audio_s(theirs, key) / per_audio_s(ours, key)
        )
        if text is not None:
            first = ours["first_audio"][key] * seconds_per
            predicted[f"yomiage_first_audio_s_{label}"] = first
            predicted[f"hayakoe_first_audio_s_{label}"] = theirs["first_audio"][key] * seconds_per
    return predicted


def markdown(results: dict[str, Any]) -> str:
    runs: dict[str, dict[str, Any]] = results["runs"]
    lines = [
        "# Instructions on a Cortex-A72 (qemu-aarch64 -cpu cortex-a72, counted per thread)",
        "",
        f"Bundle: `{results['bundle']}` ({results['bundle_kind']}), voice `{results['voice']}`. "
        f"Command: `{results['command']}`. G = 10^9 guest instructions. Busiest thread: as "
        "emulated, its waits for other threads included; critical path: per onnxruntime run "
        "the busiest thread's work, waits left out, plus the work outside onnxruntime.",
        "",
        "| run | text | audio s | all threads G/audio s | busiest thread G/audio s "
        "| critical path G/audio s | waiting G | to first audio: all / busiest / critical "
        "path (G) | threads in onnxruntime |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        for text, entry in [*run["texts"].items(), ("all texts", run["all"])]:
            first = entry.get("first_audio")
            shown_first = (
                "-"
                if first is None
                else f"{first['instructions'] / G:.2f} / {first['busiest_thread'] / G:.2f} / "
                f"{first['critical_path'] / G:.2f}" + (" (whole)" if first["whole"] else "")
            )
            lines.append(
                f"| {name} | {text} | {entry['audio_s']:.2f} "
                f"| {per_audio_s(entry, 'instructions') / G:.2f} "
                f"| {per_audio_s(entry, 'busiest_thread') / G:.2f} "
                f"| {per_audio_s(entry, 'critical_path') / G:.2f} | {entry['waiting'] / G:.2f} "
                f"| {shown_first} | {entry.get('threads_in_onnxruntime', '-')} |"
            )
    lines += ["", "Per stage, all texts (G per audio second; share of the run's instructions):", ""]
    # In the order the runs met them: the decoder's stages from frame rate to its narrow end.
    stage_names = list(
        dict.fromkeys(stage for run in runs.values() for stage in run["all"]["stages"])
    )
    lines.append("| run | " + " | ".join(stage_names) + " |")
    lines.append("|---|" + "---|" * len(stage_names))
    for name, run in runs.items():
        whole = run["all"]
        cells = []
        for stage in stage_names:
            value = whole["stages"].get(stage)
            cells.append(
                "-"
                if value is None
                else f"{value / whole['audio_s'] / G:.2f} ({value / whole['instructions']:.0%})"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += _first_audio_stages(runs)
    lines += ["", "Per thread, each text (G instructions; native: onnxruntime's pool threads):", ""]
    for name, run in runs.items():
        for text, entry in run["texts"].items():
            shown = ", ".join(f"{slot}: {v / G:.2f}" for slot, v in entry["per_thread"].items())
            lines.append(f"- {name}, {text}: {shown}")
    predicted = results.get("predicted_pi") or {}
    if predicted:
        lines += [
            "",
            "Predicted on a Raspberry Pi 4B (4 threads; hayakoe calibrated to "
            f"{PI_HAYAKOE_SPEED}x real time; time follows one thread's instructions: the busiest "
            "as emulated / the critical path):",
            "",
            "| text | hayakoe x real time | Yomiage x real time | Yomiage first audio s "
            "| hayakoe first audio (whole) s |",
            "|---|---|---|---|---|",
        ]
        for text, figure in predicted.items():
            lines.append(
                f"| {text} | {figure['hayakoe_x_real_time']:.2f} "
                f"| {_pair(figure, 'yomiage_x_real_time', '.2f')} "
                f"| {_pair(figure, 'yomiage_first_audio_s', '.1f')} "
                f"| {_pair(figure, 'hayakoe_first_audio_s', '.1f')} |"
            )
    return "\n".join(lines) + "\n"


def _first_audio_stages(runs: dict[str, dict[str, Any]]) -> list[str]:
    """Where the critical path to each streamed text's first audio goes, per stage (G)."""
    streamed = [
        (name, text, entry["first_audio"])
        for name, run in runs.items()
        for text, entry in run["texts"].items()
        if not entry["first_audio"]["whole"] and "stages_critical_path" in entry["first_audio"]
    ]
    if not streamed:
        return []
    stage_names = list(
        dict.fromkeys(stage for *_, first in streamed for stage in first["stages_critical_path"])
    )
    lines = ["", "To first audio, the critical path per stage (G):", ""]
    lines.append("| run | text | " + " | ".join(stage_names) + " | all |")
    lines.append("|---|---|" + "---|" * (len(stage_names) + 1))
    for name, text, first in streamed:
        stages = first["stages_critical_path"]
        cells = [f"{stages[stage] / G:.3f}" if stage in stages else "-" for stage in stage_names]
        lines.append(
            f"| {name} | {text} | " + " | ".join(cells) + f" | {first['critical_path'] / G:.3f} |"
        )
    return lines


def _pair(figure: dict[str, Any], key: str, shown: str) -> str:
    if f"{key}_busiest" not in figure:
        return "-"
    return f"{figure[f'{key}_busiest']:{shown}} / {figure[f'{key}_critical_path']:{shown}}"


# -- the command ------------------------------------------------------------------------------
def bundle_view(kind: str) -> tuple[Path, Path, str]:
    """(the bundle measured, its one-speaker view, the voice), as tools.bench measures with
    ``--peer hayakoe``. The view lies in the checkout, which scripts/chroot shows the rootfs."""
    from tools.bench import measured_view

    return measured_view(kind == "tiny", None, "hayakoe", A72 / "views" / kind)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.a72_count", description=__doc__)
    parser.add_argument("--bundle", choices=["tiny", "full"], default="tiny")
    parser.add_argument(
        "--engines",
        nargs="+",
        choices=["yomiage", "hayakoe", "yomiage-parts"],
        default=["yomiage", "hayakoe"],
        help="yomiage-parts: Yomiage with its front and decoder run in parts (text encoder, "
        "durations, flow; the decoder by channel width)",
    )
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--texts", nargs="+", choices=sorted(texts()), default=DEFAULT_TEXTS)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each engine and threads")
    parser.add_argument("--jobs", type=int, default=1, help="emulated processes at once")
    parser.add_argument("--out", type=Path, default=REPO / "bench-out" / "a72")
    parser.add_argument(
        "--prepared",
        action="store_true",
        help="Yomiage's graphs are prepared for these threads already: skip that step (a run "
        "that would load a graph as published stops at once)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: report the runs in --out again (those stopped early: what they "
        "finished)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    if args.report_only:
        return report(out, json.loads((out / "a72.json").read_text(encoding="utf-8")))
    check_ready()
    out.mkdir(parents=True, exist_ok=True)
    measured, view, voice = bundle_view(args.bundle)
    chosen = {name: texts()[name] for name in args.texts}
    if {"yomiage", "yomiage-parts"} & set(args.engines) and not args.prepared:
        for threads in args.threads:
            _progress(f"preparing Yomiage's graphs for {threads} thread(s) (scripts/chroot)")
            prepare(view, voice, threads, view.parent)
    # Thread counts first, engines side by side: with --jobs 2 the pair compared runs together.
    planned = [
        Run(engine, threads, out / f"{engine}-t{threads}-{repeat}", repeat)
        for repeat in range(1, args.repeats + 1)
        for threads in args.threads
        for engine in args.engines
    ]

    def one(run: Run) -> None:
        _progress(f"{run.name}: counting {', '.join(chosen)} (emulated: minutes)")
        counted = count(run, spec_for(run, view, voice, chosen))
        _progress(f"{run.name}: done in {counted['emulated_s']:.0f} s")

    results: dict[str, Any] = {
        "command": "python -m tools.a72_count " + " ".join(argv or sys.argv[1:]),
        "bundle": str(measured.relative_to(REPO) if measured.is_relative_to(REPO) else measured),
        "bundle_kind": args.bundle,
        "voice": voice,
        "texts": chosen,
        "planned": [run.folder.name for run in planned],
    }
    # Written first: --report-only finds the runs of a command stopped before its end.
    (out / "a72.json").write_text(json.dumps(results, ensure_ascii=False, indent=1), "utf-8")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, planned))
    return report(out, results)


def report(out: Path, results: dict[str, Any]) -> int:
    """The runs in ``out`` (those ``results`` planned) analysed, written and shown."""
    runs: dict[str, dict[str, Any]] = {}
    planned = results.get("planned") or sorted(p.name for p in out.iterdir() if p.is_dir())
    for folder_name in planned:
        folder = out / folder_name
        if (folder / "spec.json").is_file() and (folder / "events.json").is_file():
            engine, threads, repeat = folder_name.rsplit("-", 2)
            name = Run(engine, int(threads[1:]), folder, int(repeat)).name
            runs[name] = analysed_run(folder)
    results["runs"] = runs
    chosen = results["texts"]
    predicted = {
        text: figure for text in [*chosen, None] if (figure := predicted_pi(runs, text)) is not None
    }
    results["predicted_pi"] = {
        ("all texts" if text is None else text): figure for text, figure in predicted.items()
    }
    (out / "a72.json").write_text(json.dumps(results, ensure_ascii=False, indent=1), "utf-8")
    (out / "a72.md").write_text(markdown(results), encoding="utf-8")
    sys.stdout.write(markdown(results))
    return 0


def _progress(message: str) -> None:
    print(f"[a72] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
