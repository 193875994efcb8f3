"""Two decoder runs at once for whole-file synthesis ("lanes").

A decoder session with two threads splits every convolution between them and waits for both
after each one; on two cores it runs ~1.75x as fast as with one thread. Two one-thread sessions
decoding two sentences side by side keep both cores busy without those waits: ~10 % less time
for the decoder of a long text here (docs/PERFORMANCE.md). Streaming keeps the two-thread
session: its first piece must come as early as possible, and a sentence of its own is not
shared by two lanes.

Sentences are paired by length (longest with the next longest, and so on), so that both lanes
of a pair finish at about the same time; a pair whose lengths differ too much, and an odd one
left over, decode one after the other on the two-thread session instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

LANES = 2
# How much faster a two-thread decoder session runs than a one-thread one on two cores (measured
# 1.70-1.78 here). Two lanes pay when the shorter job of a pair is longer than
# (speedup - 1) x the longer one: max(a, b) < (a + b) / speedup.
TWO_THREAD_SPEEDUP = 1.75

_Result = TypeVar("_Result")


def lane_threads(intra_op_threads: int) -> int:
    """Threads per lane session: the cores shared out; 0 where lanes cannot pay (one core)."""
    return intra_op_threads // LANES


def plan_rounds(frames: Sequence[int]) -> list[tuple[int, ...]]:
    """Decoder jobs (by their frame counts) grouped into rounds, longest first: a round of two
    runs on the two lanes at once, a round of one on the two-thread session. Every job appears
    exactly once."""
    order = sorted(range(len(frames)), key=lambda job: -frames[job])
    rounds: list[tuple[int, ...]] = []
    for first in range(0, len(order) - 1, 2):
        longer, shorter = order[first], order[first + 1]
        if _pair_pays(frames[longer], frames[shorter]):
            rounds.append((longer, shorter))
        else:
            rounds.extend(((longer,), (shorter,)))
    if len(order) % 2:
        rounds.append((order[-1],))
    return rounds


def _pair_pays(longer: int, shorter: int) -> bool:
    return longer * TWO_THREAD_SPEEDUP < longer + shorter


def run_side_by_side(jobs: Sequence[Callable[[int], _Result]]) -> list[_Result]:
    """Each job called with its lane number (0, 1) at the same time, results in the jobs' order:
    the first job runs in the calling thread, the second in a thread of its own for this round
    (~0.1 ms to start against seconds of decoding; nothing outlives the call). onnxruntime
    releases the GIL while it runs."""
    if len(jobs) != LANES:
        raise ValueError(f"{len(jobs)} jobs for {LANES} lanes")
    second: list[_Result] = []
    failure: list[BaseException] = []

    def run_second() -> None:
        try:
            second.append(jobs[1](1))
        except BaseException as err:  # handed to the calling thread below
            failure.append(err)

    thread = threading.Thread(target=run_second, name="yomiage-lane-1", daemon=True)
    thread.start()
    try:
        first = jobs[0](0)
    finally:
        thread.join()  # even when the first failed: no decoding is left running
    if failure:
        raise failure[0]
    return [first, second[0]]
