"""The engine's time: what every timing decision reads (the player's lead, the learnt cost of a
sentence, the turns between requests). A monotonic clock in seconds; tests hand the engine one
they hold, advanced by a cost model of their own, so that each decision is exact. A wait on it
(ArrivingText's) sleeps in real time and reads the clock when it wakes: a clock held still holds
the wait."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]
MONOTONIC: Clock = time.perf_counter
