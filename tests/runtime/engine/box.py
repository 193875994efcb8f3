"""A box of the test's own making: time passes only as its cost model says (the engine's clock,
synthesis/clock.py), so every timing decision the engine makes on it is exact, and no outcome
depends on how busy the machine running the test is."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from custom_components.yomiage.engine.synthesis.engine import Engine

from .common import SAMPLE_RATE


class ModelledTime:
    """A clock that stands still until ``advance`` moves it (from any thread); ``reads``
    counts who looked at it (a thread waiting on it looks each time it wakes)."""

    def __init__(self) -> None:
        self._now = 0.0
        self._lock = threading.Lock()
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class _Costly:
    """A session whose every run moves the clock on by what the cost model says it cost."""

    def __init__(
        self, session: Any, clock: ModelledTime, cost: Callable[[dict[str, Any], list[Any]], float]
    ) -> None:
        self._session = session
        self._clock = clock
        self._cost = cost

    def run(self, names: Sequence[str] | None, feeds: dict[str, Any], *options: Any) -> Any:
        outputs = self._session.run(names, feeds, *options)
        self._clock.advance(self._cost(feeds, outputs))
        return outputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class SlowBox:
    """A box ``factor`` times slower than real time: a decoder run costs ``factor`` times the
    audio of the frames it runs over (a piece's overlap included, as a real decoder spends it),
    a whole synthesizer run ``factor`` times the audio it makes, a pause pass
    ``pause_pass_s``; everything else is free. Both may change while the engine runs (the box's
    load changing)."""

    def __init__(self, factor: float, pause_pass_s: float = 0.0) -> None:
        self.factor = factor
        self.pause_pass_s = pause_pass_s
        self.clock = ModelledTime()
        self._frame_s = 0.0  # audio seconds per latent frame, of the engine's voices

    def engine(self, bundle: Path, **options: Any) -> Engine:
        """An engine on this box (``fit``)."""
        return self.fit(Engine(bundle, device="cpu", threads=1, clock=self.clock, **options))

    def fit(self, engine: Engine) -> Engine:
        """``engine`` moved onto this box: its clock is the box's and its sessions are made
        (they cost nothing) and costed. What it has learnt of the decoder's speed moves to the
        box's as it speaks there (a new engine's ``load_all`` times it on the box; one that
        Home Assistant made and timed already forgets that over a few sentences)."""
        config = next(iter(engine.bundle.speakers.values())).config
        self._frame_s = config.hop_length / config.sample_rate
        engine._clock = engine._model_lock._clock = self.clock
        for graphs in engine._graphs.values():
            graphs._clock = self.clock
            graphs.load()
            split = graphs._split_sessions()
            if split is not None:
                decoder = _Costly(split.decoder, self.clock, self._decoded_cost)
                graphs._split = dataclasses.replace(split, decoder=decoder)  # type: ignore[arg-type]
            else:
                graphs._whole = _Costly(graphs._whole_session(), self.clock, self._whole_cost)
            found = graphs._duration_pass()
            if found is not None:
                session, contract = found
                graphs._durations = (_Costly(session, self.clock, self._pause_cost), contract)
        return engine

    def frames_s(self, frames: int) -> float:
        """What decoding ``frames`` costs on this box."""
        return self.factor * frames * self._frame_s

    def _decoded_cost(self, feeds: dict[str, Any], outputs: list[Any]) -> float:
        return self.frames_s(max(value.shape[-1] for value in feeds.values()))

    def _whole_cost(self, feeds: dict[str, Any], outputs: list[Any]) -> float:
        return self.factor * outputs[0].size / SAMPLE_RATE

    def _pause_cost(self, feeds: dict[str, Any], outputs: list[Any]) -> float:
        return self.pause_pass_s
