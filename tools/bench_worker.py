"""One benchmark configuration in its own process (started by tools/bench.py; never imports torch).

    python -m tools.bench_worker --impl yomiage|hayakoe --bundle DIR --voice SPEAKER/STYLE

Reads one JSON command per line on stdin and answers one JSON line on stdout:
``{"cmd": "load"}``, ``{"cmd": "synth", "text": ...}``, ``{"cmd": "stream", "text": ...,
"whole": bool, "in_pieces": bool}``,
``{"cmd": "during", "reply": ..., "announcement": ..., "after_s": ...}``, ``{"cmd": "memory"}``,
``{"cmd": "quit"}``. Anything the libraries print goes to stderr, so that
stdout carries only answers. Runs under the venv of the engine it measures (.venv for Yomiage,
.venv-peer for hayakoe), so it imports nothing from the rest of ``tools``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TextIO

MEMORY_FIELDS = ("VmHWM", "VmRSS", "RssAnon", "RssFile")
# Yomiage's threads per run, where set (tools.pi_bench --threads); else the engine reads the box.
THREADS_VARIABLE = "YOMIAGE_BENCH_THREADS"
# Synthesis options over the defaults, as a JSON object (tools.bench --peer pitch).
OPTIONS_VARIABLE = "YOMIAGE_BENCH_OPTIONS"


# The text's pieces as an LLM writes them (``in_pieces``): a few characters each.
PIECE_CHARS = 6


class Piece(NamedTuple):
    samples: int
    silent: int  # samples of digital silence it starts with (all of them: silence only)


class Engine(Protocol):
    imported: float  # perf_counter() when the library had been imported
    rate: int

    def synthesize(self, text: str) -> int:
        """Samples of the whole text."""

    def stream(self, text: str, in_pieces: bool) -> Generator[Piece, None, None]:
        """Each piece as it is ready; ``in_pieces``: the text arrives a few characters at a
        time, as an LLM writes it (where the engine can take it so)."""


def piece(samples: Any) -> Piece:
    """A piece of audio (a numpy array) as the timing needs it."""
    spoken = samples.nonzero()[0]
    return Piece(len(samples), int(spoken[0]) if len(spoken) else len(samples))


def memory(process: str = "self") -> dict[str, int]:
    """Peak (VmHWM) and current resident memory of a process (this one), in kB (Linux)."""
    found: dict[str, int] = {}
    with open(f"/proc/{process}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in MEMORY_FIELDS:
                found[key] = int(value.split()[0])
    return found


class Yomiage:
    def __init__(self, bundle: Path, voice: str) -> None:
        from yomiage_engine import ArrivingText, SynthesisOptions
        from yomiage_engine import Engine as YomiageEngine

        self.imported = time.perf_counter()
        threads = os.environ.get(THREADS_VARIABLE)
        self.engine = YomiageEngine(bundle, device="cpu", threads=int(threads) if threads else None)
        self.engine.load_all()  # the bench bundle view holds the one speaker measured
        chosen = json.loads(os.environ.get(OPTIONS_VARIABLE) or "{}")
        self.options = SynthesisOptions(voice=voice).with_values(chosen)
        self.rate = self.engine.sample_rate
        self.arriving = ArrivingText

    def synthesize(self, text: str) -> int:
        return int(self.engine.synthesize(text, self.options).audio.shape[0])

    def stream(self, text: str, in_pieces: bool) -> Generator[Piece, None, None]:
        # The way Home Assistant asks for speech: a message it has whole as one piece, then the
        # end; an LLM's reply as it is written.
        arriving, size = self.arriving(), PIECE_CHARS if in_pieces else len(text)
        for start in range(0, len(text), size):
            arriving.add(text[start : start + size])
        arriving.finish()
        with contextlib.closing(self.engine.stream_arriving(arriving, self.options)) as chunks:
            for chunk in chunks:
                yield piece(chunk.pcm)


class Hayakoe:
    def __init__(self, bundle: Path, voice: str) -> None:
        from hayakoe import TTS

        self.imported = time.perf_counter()
        speaker, _, self.style = voice.partition("/")
        # hayakoe wants a cache folder even for a local source; it writes nothing there.
        tts = TTS(device="cpu", cache_dir=bundle.parent / "hayakoe-cache", bert_source=str(bundle))
        self.speaker = tts.load(speaker, source=str(bundle)).prepare().speakers[speaker]
        self.rate = int(self.speaker.sampling_rate)

    def synthesize(self, text: str) -> int:
        return len(self.speaker.generate(text, style=self.style).data)

    def stream(self, text: str, in_pieces: bool) -> Generator[Piece, None, None]:
        # hayakoe takes whole text only.
        with contextlib.closing(self.speaker.stream(text, style=self.style)) as pieces:
            for audio in pieces:
                yield piece(audio.data)


IMPLEMENTATIONS: dict[str, Callable[[Path, str], Engine]] = {
    "yomiage": Yomiage,
    "hayakoe": Hayakoe,
}


def timed_synthesis(engine: Engine, text: str) -> dict[str, float]:
    """Wall and CPU seconds of one whole-text synthesis, and the seconds of audio it made."""
    wall, cpu = time.perf_counter(), time.process_time()
    samples = engine.synthesize(text)
    return {
        "compute_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "audio_s": samples / engine.rate,
    }


def timed_stream(
    engine: Engine,
    text: str,
    whole: bool = False,
    in_pieces: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Seconds until the first piece of audio, and until a player that starts with it reaches
    the first speech (past a lead of silence). With ``whole``, the rest too: seconds until the
    last piece, and how long that player would wait for audio after starting (each wait either
    stretches a pause or stops a word). Without it the rest is not synthesised
    (timed_synthesis measures the whole), which keeps a benchmark run short. ``clock``: the
    wall clock, but for the tests of this arithmetic."""
    started, cpu = clock(), time.process_time()
    figures: dict[str, float] = {}
    played_until = waits = 0.0
    with contextlib.closing(engine.stream(text, in_pieces)) as pieces:
        for audio in pieces:
            now = clock() - started
            if not figures:
                figures = {"first_audio_s": now, "first_piece_s": audio.samples / engine.rate}
                played_until = now
            else:
                waits += max(0.0, now - played_until)
                played_until = max(played_until, now)
            if "speech_s" not in figures and audio.silent < audio.samples:
                figures["speech_s"] = played_until + audio.silent / engine.rate
                if not whole:
                    break
            played_until += audio.samples / engine.rate
    if whole:
        figures["waits_s"] = waits
        figures["last_audio_s"] = now
        figures["cpu_s"] = time.process_time() - cpu
    return figures


def timed_during(
    engine: Engine,
    reply: str,
    announcement: str,
    after_s: float,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """An Assist reply asked for while an announcement plays: ``announcement`` streamed to its
    end in another thread, ``reply``'s first audio asked for ``after_s`` seconds into it; what
    it cost the announcement shows in its playback waits. ``clock`` as for ``timed_stream``."""
    announced: dict[str, Any] = {}

    def announce() -> None:
        try:
            announced.update(timed_stream(engine, announcement, whole=True, clock=clock))
        except Exception as err:  # raised in the asking thread below
            announced["error"] = err

    thread = threading.Thread(target=announce, name="announcement")
    thread.start()
    try:
        time.sleep(after_s)
        replied = timed_stream(engine, reply, clock=clock)
    finally:
        thread.join()
    if "error" in announced:
        raise announced["error"]
    return {
        "first_audio_s": replied["first_audio_s"],
        "announcement_s": announced["last_audio_s"],
        "announcement_waits_s": announced["waits_s"],
    }


class Worker:
    def __init__(self, impl: str, bundle: Path, voice: str) -> None:
        self.impl, self.bundle, self.voice = impl, bundle, voice
        self.engine: Engine | None = None

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        name = command.get("cmd")
        if name == "load":
            return self.load()
        if name == "memory":
            return {"memory_kb": memory()}
        if name not in ("synth", "stream", "during"):
            raise ValueError(f"unknown command {name!r}")
        if self.engine is None:
            raise RuntimeError("send load first")
        if name == "synth":
            return timed_synthesis(self.engine, command["text"])
        if name == "during":
            return timed_during(
                self.engine, command["reply"], command["announcement"], float(command["after_s"])
            )
        return timed_stream(
            self.engine,
            command["text"],
            bool(command.get("whole")),
            bool(command.get("in_pieces")),
        )

    def load(self) -> dict[str, Any]:
        """Import the library and load one speaker (BERT, synthesizer, duration predictor)."""
        started = time.perf_counter()
        self.engine = IMPLEMENTATIONS[self.impl](self.bundle, self.voice)
        ready = time.perf_counter()
        return {
            "import_s": self.engine.imported - started,
            "load_s": ready - self.engine.imported,
            "memory_kb": memory(),
            # Where the engine started processes of its own (Yomiage's first start prepares
            # each graph in one): the peak resident memory of the largest, in kB.
            "children_peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        }


def serve(worker: Worker, commands: TextIO, answers: TextIO) -> None:
    for line in commands:
        command = json.loads(line)
        if command["cmd"] == "quit":
            return
        try:
            answer = worker.handle(command)
        except Exception as err:  # reported to the orchestrator, which stops the run
            answer = {"error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_worker")
    parser.add_argument("--impl", choices=sorted(IMPLEMENTATIONS), required=True)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--voice", required=True, help="SPEAKER/STYLE")
    args = parser.parse_args()
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # library chatter must not mix in
    serve(Worker(args.impl, args.bundle, args.voice), sys.stdin, answers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
