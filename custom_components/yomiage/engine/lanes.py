"""Two decoder runs at once for whole-file synthesis ("lanes").

A decoder session with two threads splits every convolution between them and waits for both
after each one; on two cores it runs ~1.75x as fast as with one thread. Two one-thread runs
decoding two sentences side by side keep both cores busy without those waits: ~10-15 % less
time for the decoder of a long text here (docs/PERFORMANCE.md). Both lanes run on one session
of their own, at once: onnxruntime runs a session from several threads, and a run does its
work in the calling thread plus the session's pool (none with one thread), so one session (one
mapping of the weights) serves both as well as a session per lane did. Streaming keeps the
decoder with every thread: its first piece must come as early as possible, and a sentence of
its own is not shared by two lanes. Streams decoding two later sentences at once while the
player is far ahead were measured and dropped: 3-6 % less compute for a long announcement,
which a player fed faster than real time never hears, while a request arriving meanwhile waits
for a whole sentence on a lane (an Assist reply during an announcement: first audio median
1.62 -> 2.23 s here; docs/PERFORMANCE.md).

The fronts of a whole file (text encoder, durations, flow: frame-rate work that keeps two
threads busy only part of the time) also run two at once, both lanes calling the front session
with every thread: ~10 % less time for the fronts of a long text, and no session of their own
(a one-thread front session would gain more, ~30 %, but map the front's 190 MB once more).

The lanes take the jobs (sentences, or spans of long ones) longest first from one queue, each
the next as soon as it is free, so that both finish at about the same time. They stop taking
jobs when another request waits for its turn, and go on after it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

LANES = 2
# How much faster a two-thread decoder session runs than a one-thread one on two cores (measured
# 1.70-1.78 here): lanes pay when their longer queue finishes before speedup x all the work.
TWO_THREAD_SPEEDUP = 1.75

_Result = TypeVar("_Result")


def lane_threads(intra_op_threads: int) -> int:
    """Threads of the session both lanes run on: its two calling threads and its pool threads
    together make one thread per core; 0 where lanes cannot pay (one core)."""
    if intra_op_threads < LANES:
        return 0
    return intra_op_threads - LANES + 1


def longest_first(frames: Sequence[int]) -> list[int]:
    """Jobs (by their frame counts) in the order the lanes take them."""
    return sorted(range(len(frames)), key=lambda job: -frames[job])


def lanes_pay(frames: Sequence[int]) -> bool:
    """Whether two one-thread lanes taking the jobs longest first finish sooner than the
    two-thread decoder running them one after the other (one job, or one long and one short,
    do not)."""
    loads = [0] * LANES
    for job in longest_first(frames):
        loads[loads.index(min(loads))] += frames[job]
    return max(loads) * TWO_THREAD_SPEEDUP < sum(frames)


def run_lanes(
    queue: deque[int],
    decode: Callable[[int, int], _Result],
    keep_going: Callable[[], bool],
) -> dict[int, _Result]:
    """Both lanes take jobs from ``queue`` (left first) and ``decode(job, lane)`` them, until
    it is empty or, after a job, ``keep_going()`` is false (so each lane decodes at least one
    job per call, and a caller that gives way goes on next time); returns what was decoded, by
    job. The first lane runs in the calling thread, the second in a thread of this call only
    (~0.1 ms to start against seconds of decoding; onnxruntime releases the GIL while it runs).
    A failing lane stops both from taking more jobs; the failure is raised once both stopped."""
    decoded: dict[int, _Result] = {}
    failures: list[BaseException] = []

    def lane(number: int) -> None:
        try:
            while not failures:
                try:
                    job = queue.popleft()  # atomic: the lanes never take the same job
                except IndexError:
                    return
                decoded[job] = decode(job, number)
                if not keep_going():
                    return
        except BaseException as err:  # raised in the calling thread below
            failures.append(err)

    second = threading.Thread(target=lane, args=(1,), name="yomiage-lane-1", daemon=True)
    second.start()
    try:
        lane(0)
    finally:
        second.join()  # no decoding is left running, whatever happened
    if failures:
        raise failures[0]
    return decoded
