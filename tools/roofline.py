"""Roofline of Yomiage's stream: per stage, the arithmetic counted from the graph, the time, and
the rate against this box's own FP32 matrix-product peak.

    .venv/bin/python -m tools.roofline --bundle DIR --voice SPEAKER/STYLE [--text long] [--out F]

Runs under the engine's venv (.venv; never torch), in a process of its own (tools/bench.py and
tools/pi_bench.py start it, inside the CPU cap for the latter). The engine streams the text as the
benchmark does (bench_worker: the whole message as one arriving piece) with onnxruntime's profiler
on in every session (sessions.PROFILE_VARIABLE); the runs after the warm-ups are read back per
node. A node's FLOPs come from the shapes the profiler recorded for it: 2 x multiply-adds of the
convolutions and matrix products (the arithmetic a roofline counts; element-wise work is time
without FLOPs). Stages: the session a node ran in (BERT, the duration pass, the decoder by the
channel width of what it writes) and, in the synthesizer's front, its place in the graph by the
node's name (``enc_p/`` text encoder, ``flow/``, ``sdp/`` and ``dp/`` durations). The peak: the
best of several numpy sgemm products (2048 x 2048) on the engine's thread count, in a child
process (OpenBLAS reads its thread count at start), so that the rates compare with what this box
does at its best, not with a datasheet.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Float convolutions and matrix products (onnxruntime's fused and blocked forms included: a
# blocked NCHWc convolution reports its op as Conv).
CONV_OPS = frozenset({"Conv", "FusedConv"})
TRANSPOSED_CONV_OPS = frozenset({"ConvTranspose"})
MATMUL_OPS = frozenset({"MatMul", "FusedMatMul"})
GEMM_OPS = frozenset({"Gemm", "FusedGemm"})
# BERT Q8's int8 products: operations, not FP32 FLOPs (their peak is another one).
INT8_MATMUL_OPS = frozenset(
    {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger", "QLinearMatMul"}
)
INT8_STAGES = frozenset({"BERT"})
# A decoder tensor narrower than this is the audio (one channel, or onnxruntime's block-padded
# form of it: 8): its last convolution is counted with the width it reads. A full-size
# decoder's narrowest stage has 16 channels.
AUDIO_CHANNELS = 16
PEAK_SIZE = 2048
PEAK_REPEATS = 8
FLOW_TARGET = 0.16  # issue 40: the flow's time at most this share of the decoder's

_PEAK_CODE = """
import sys, time, numpy
n, repeats = int(sys.argv[1]), int(sys.argv[2])
a = numpy.random.default_rng(0).standard_normal((n, n), dtype=numpy.float32)
b = a.T.copy()
best = float("inf")
for _ in range(repeats + 1):  # the first one warms the library up
    started = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - started)
print(2 * n**3 / best / 1e9)
"""


# -- FLOPs of one node, from its shapes ----------------------------------------------------------
def node_flops(op: str, inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]]) -> int:
    """Twice the multiply-adds of a convolution or matrix product (0 for any other op).

    From shapes alone, with no attributes: a convolution's output positions times its weight's
    elements (groups and kernel size are in the weight's shape), a transposed one's input
    positions times its weight's elements, a product's output elements times the shared axis
    (whichever side of A holds it, so transposed operands count alike)."""
    if not inputs or not outputs:
        return 0
    out = outputs[0]
    if op in CONV_OPS and len(inputs) > 1:
        return 2 * out[0] * math.prod(out[2:]) * math.prod(inputs[1])
    if op in TRANSPOSED_CONV_OPS and len(inputs) > 1:
        data = inputs[0]
        return 2 * data[0] * math.prod(data[2:]) * math.prod(inputs[1])
    if op in MATMUL_OPS | GEMM_OPS | INT8_MATMUL_OPS and len(out) >= 2:
        a = inputs[0]
        rows = out[-2]
        shared = a[-1] * (a[-2] if len(a) >= 2 else 1) // rows if rows else 0
        return 2 * math.prod(out) * shared
    return 0


# -- which stage a node belongs to --------------------------------------------------------------
# Scopes of the synthesizer's front as every exporter names its nodes (torch's module paths).
FRONT_PARTS = (
    ("/enc_p/", "text encoder"),
    ("/flow/", "flow"),
    ("/sdp/", "durations, in the front"),
    ("/dp/", "durations, in the front"),
)


def stage_of(
    graph: str, node: str, inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]]
) -> str:
    """The stage of node ``node`` of the session of graph ``graph`` (sessions._graph_label),
    from its name and the shapes it read and wrote."""
    if graph.startswith("bert"):
        return "BERT"
    if graph.startswith("duration_predictor") or graph.endswith(".durations"):
        return "duration pass"
    if graph.endswith(".decoder") or "/dec/" in node:
        return _decoder_width(inputs, outputs)
    for part, stage in FRONT_PARTS:
        if part in node:
            return stage
    return "front, other"


def _decoder_width(inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]]) -> str:
    """``decoder C ch``: the channels of what the node writes, but for the last convolution,
    which writes the audio and is counted with the width it reads."""
    output = outputs[0] if outputs else []
    if len(output) < 3:  # shapes and lengths: the pieces' arithmetic
        return "decoder, other"
    if output[1] < AUDIO_CHANNELS and inputs and len(inputs[0]) >= 3:
        return f"decoder {inputs[0][1]} ch"
    return f"decoder {output[1]} ch"


# -- reading onnxruntime's profiles ---------------------------------------------------------------
@dataclass
class Stage:
    name: str
    nodes: int = 0  # node runs
    flops: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class NodeRun:
    graph: str
    name: str
    op: str
    inputs: list[list[int]]
    outputs: list[list[int]]
    seconds: float
    started_ns: int  # on the wall clock (time.time_ns)


def graph_weights(graph: Path) -> dict[str, list[int]]:
    """The shape of each convolution's weight in an ONNX file, by node name: the profiler leaves
    out a weight onnxruntime pre-packed (and released), so it is read from the graph itself."""
    from yomiage_engine.onnx import wire  # the engine's reader: no onnx package at run time

    parsed = wire.read_graph(wire.mapped(graph))
    found: dict[str, list[int]] = {}
    for node in parsed.nodes.values():
        weight = parsed.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if node.op_type in CONV_OPS | TRANSPOSED_CONV_OPS and weight is not None:
            found[node.name] = list(weight.dims)
    return found


def profile_runs(path: Path, weights: dict[str, list[int]] | None = None) -> Iterable[NodeRun]:
    """The node runs of one profile file, which a session of graph ``label`` wrote as
    ``<label>_<date>_<time>_<ms>.json``; its events' ``ts`` count microseconds from then.
    ``weights``: that graph's (graph_weights), for the convolutions whose weight it lacks."""
    events = json.loads(path.read_text(encoding="utf-8"))
    graph = path.stem.rsplit("_", 3)[0]
    start_ns = _profiling_start_ns(path)
    known = weights or {}
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
            continue
        args = event.get("args", {})
        name = event["name"].removesuffix("_kernel_time")
        op = args.get("op_name", "")
        inputs = _shapes(args.get("input_type_shape", []))
        if op in CONV_OPS | TRANSPOSED_CONV_OPS and name in known and _lacks_weight(inputs):
            inputs = [*inputs[:1], known[name], *inputs[1:]]
        yield NodeRun(
            graph=graph,
            name=name,
            op=op,
            inputs=inputs,
            outputs=_shapes(args.get("output_type_shape", [])),
            seconds=event["dur"] / 1e6,
            started_ns=start_ns + int(event["ts"]) * 1000,
        )


def _lacks_weight(inputs: list[list[int]]) -> bool:
    """Whether a convolution's recorded inputs leave its weight out (onnxruntime records no
    pre-packed input: the data alone, or the data and the bias)."""
    return len(inputs) < 2 or len(inputs[1]) < 3


def _profiling_start_ns(path: Path) -> int:
    """When the session started profiling, from the file's name (onnxruntime writes
    ``<prefix>_YYYY-MM-DD_HH-MM-SS_mmm.json`` in local time at that moment)."""
    _, day, clock, milliseconds = path.stem.rsplit("_", 3)
    seconds = time.mktime(time.strptime(f"{day}_{clock}", "%Y-%m-%d_%H-%M-%S"))
    return int(seconds) * 1_000_000_000 + int(milliseconds) * 1_000_000


def _shapes(listed: list[dict[str, list[int]]]) -> list[list[int]]:
    return [next(iter(entry.values()), []) for entry in listed]


def stages(runs: Iterable[NodeRun], since_ns: int = 0) -> dict[str, Stage]:
    """Node runs that started from ``since_ns`` on, summed per stage. A node the exporter did
    not name (onnxruntime's layout reorders and fusions, the rewrite's reshapes: no leading
    ``/``) belongs to the stage of the node run before it in its session, which it serves:
    runs come in the order they ran, one node after another."""
    found: dict[str, Stage] = {}
    before: dict[str, str] = {}  # graph -> stage of its last node run
    for run in runs:
        name = stage_of(run.graph, run.name, run.inputs, run.outputs)
        if not run.name.startswith("/") and name == "front, other":
            name = before.get(run.graph, name)
        before[run.graph] = name
        if run.started_ns < since_ns:
            continue
        entry = found.setdefault(name, Stage(name))
        entry.nodes += 1
        entry.flops += node_flops(run.op, run.inputs, run.outputs)
        entry.seconds += run.seconds
    return found


# -- the box's own peak ---------------------------------------------------------------------------
def sgemm_peak(threads: int, size: int = PEAK_SIZE, repeats: int = PEAK_REPEATS) -> float:
    """GFLOP/s of numpy's float32 matrix product at its best on ``threads`` threads."""
    env = {**os.environ}
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[variable] = str(threads)
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_CODE, str(size), str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip())


# -- the measurement ----------------------------------------------------------------------------
def measure(
    bundle: Path, voice: str, text: str, warmups: int, reps: int, profiles: Path
) -> dict[str, Any]:
    """Stream ``text`` ``warmups + reps`` times with every session profiled; the stages of the
    last ``reps`` runs, summed."""
    from yomiage_engine.onnx.sessions import PROFILE_VARIABLE

    from tools.bench_worker import Yomiage, timed_stream

    os.environ[PROFILE_VARIABLE] = str(profiles)

    engine = Yomiage(bundle, voice)
    threads = engine.engine.threads
    audio_s = engine.synthesize(text) / engine.rate  # a warm-up too
    for _ in range(warmups):
        timed_stream(engine, text, whole=True)
    since = time.time_ns()
    streamed = [timed_stream(engine, text, whole=True) for _ in range(reps)]
    engine.engine.close()
    del engine
    gc.collect()  # a session writes its profile as it goes
    runs = [
        run
        for path in sorted(profiles.glob("*.json"))
        for run in profile_runs(path, _prepared_weights(path))
    ]
    found = stages(runs, since)
    return {
        "text_chars": len(text),
        "audio_s": audio_s,
        "reps": reps,
        "threads": threads,
        "streamed_s": [s["last_audio_s"] for s in streamed],
        # The best of two measurements: a shared box is slower now and then.
        "peak_gflops": max(sgemm_peak(threads) for _ in range(2)),
        "stages": [asdict(stage) for stage in found.values()],
    }


def _prepared_weights(profile: Path) -> dict[str, list[int]]:
    """The weights of the prepared graph (in the engine's graph cache) whose session wrote
    ``profile``; none where the graphs ran as published."""
    from yomiage_engine.onnx.graph_cache import default_cache_dir

    label = profile.stem.rsplit("_", 3)[0]
    entries = sorted((default_cache_dir() / "sessions").glob(f"{label}-*/graph.onnx"))
    return graph_weights(entries[-1]) if entries else {}


# -- the table --------------------------------------------------------------------------------
STAGE_ORDER = ("BERT", "text encoder", "durations, in the front", "flow", "front, other")


def _ordered(found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def key(name: str) -> tuple[int, int, str]:
        if name in STAGE_ORDER:
            return (0, STAGE_ORDER.index(name), name)
        if name == "duration pass":
            return (1, 0, name)
        width = name.removeprefix("decoder ").removesuffix(" ch")
        return (2, -int(width) if width.isdigit() else 0, name)

    return [found[name] for name in sorted(found, key=key)]


def flow_to_decoder(roofline: dict[str, Any]) -> float:
    """The flow's time over the decoder's (every width)."""
    by_name = {s["name"]: s for s in roofline["stages"]}
    decoder = sum(s["seconds"] for name, s in by_name.items() if name.startswith("decoder"))
    flow = by_name.get("flow", {}).get("seconds", 0.0)
    return float(flow / decoder) if decoder else math.nan


def markdown(roofline: dict[str, Any]) -> list[str]:
    """The roofline table, per run of the text, and the flow's share of the decoder's time."""
    reps, peak = roofline["reps"], roofline["peak_gflops"]
    found = {s["name"]: s for s in roofline["stages"]}
    total = sum(s["seconds"] for s in found.values())
    lines = [
        f"Roofline of the streamed text ({roofline['text_chars']} characters, "
        f"{roofline['audio_s']:.1f} s of audio; onnxruntime's profile of {reps} streams after "
        f"the warm-ups, per stream): FP32 peak of this box {peak:.0f} GFLOP/s (numpy sgemm "
        f"{PEAK_SIZE}^3 at its best, {roofline['threads']} threads, as the engine runs).",
        "",
        "| stage | node runs | GFLOP | time s | share of time | GFLOP/s | of peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage in _ordered(found):
        gflop, seconds = stage["flops"] / 1e9 / reps, stage["seconds"] / reps
        rate = gflop / seconds if seconds else math.nan
        unit = " (int8 ops)" if stage["name"] in INT8_STAGES else ""
        of_peak = f"{rate / peak:.0%}" if gflop and not unit else "-"
        shown_rate = f"{rate:.0f}{unit}" if gflop else "-"
        lines.append(
            f"| {stage['name']} | {stage['nodes'] // reps} | {gflop:.1f} | {seconds:.3f} "
            f"| {seconds * reps / total:.1%} | {shown_rate} | {of_peak} |"
        )
    ratio = flow_to_decoder(roofline)
    met = "met" if ratio <= FLOW_TARGET else "**not met**"
    lines += [
        "",
        f"Flow / decoder time: {ratio:.3f} (target <= {FLOW_TARGET}: {met}).",
        "",
    ]
    return lines


def run_in_child(
    python: Path,
    bundle: Path,
    voice: str,
    text: str,
    out: Path,
    env: dict[str, str],
    wrap: Callable[[list[str]], list[str]] | None = None,
    warmups: int = 1,
    reps: int = 2,
) -> dict[str, Any]:
    """This module's measurement in a fresh process of ``python`` (the engine's venv), its log
    beside ``out``; ``wrap``: what starts the command (a CPU cap's ``wrap``)."""
    command = [str(python), "-m", "tools.roofline", "--bundle", str(bundle), "--voice", voice]
    command += ["--text", text, "--out", str(out), "--warmups", str(warmups), "--reps", str(reps)]
    if wrap is not None:
        command = wrap(command)
    root = Path(__file__).resolve().parent.parent
    log = out.with_suffix(".log")
    with log.open("w", encoding="utf-8") as stderr:
        subprocess.run(
            command,
            cwd=root,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            check=True,
        )
    found: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.roofline", description=__doc__)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--voice", required=True)
    parser.add_argument("--text", required=True, help="the text itself")
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="JSON written here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="yomiage-profile-") as profiles:
        found = measure(args.bundle, args.voice, args.text, args.warmups, args.reps, Path(profiles))
    args.out.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print("\n".join(markdown(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
