"""Inputs shared by the engine tests."""

import time
from typing import Any

import pytest

from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.graphs import decode_window
from custom_components.yomiage.engine.synthesis.options import SynthesisOptions

# Noise off: the graphs become deterministic, so outputs can be compared exactly.
QUIET = SynthesisOptions(noise=0.0, noise_w=0.0)
THREE_SENTENCES = "今日はいい天気ですね。散歩に行きましょう！公園まで歩けますか？"
SAMPLE_RATE = 44100


class Throttle:
    """Makes an engine synthesize as on a box ``factor`` times slower than real time (a
    Raspberry Pi): each decoder run of its voices (or whole synthesizer run, where the graph is
    not split), not another engine's, sleeps that many times the audio of the frames it ran
    over (a piece's overlap included, as a real decoder spends it). ``factor`` may change
    while it runs (the box's load changing)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def apply(self, engine: Engine, patch: pytest.MonkeyPatch) -> None:
        for voice in engine._voices.values():
            decode, synthesize = voice.decode, voice.synthesize
            frame_s = voice.hop / SAMPLE_RATE

            def slow_decode(
                fronted: Any,
                span: tuple[int, int],
                *args: Any,
                _run: Any = decode,
                _frame_s: float = frame_s,
            ) -> Any:
                low, high = decode_window(span, fronted.frames, fronted.context)
                samples = _run(fronted, span, *args)
                time.sleep(self.factor * (high - low) * _frame_s)
                return samples

            def slow_synthesize(*args: Any, _run: Any = synthesize) -> Any:
                samples = _run(*args)
                time.sleep(self.factor * samples.shape[0] / SAMPLE_RATE)
                return samples

            patch.setattr(voice, "decode", slow_decode)
            patch.setattr(voice, "synthesize", slow_synthesize)


def slow_down(engine: Engine, slower: float, patch: pytest.MonkeyPatch) -> None:
    """``engine`` on a box ``slower`` times slower than real time (``Throttle``)."""
    Throttle(slower).apply(engine, patch)
