"""Synthesis options as users see them, their limits, and their translation into model inputs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import InvalidOptionError

# name -> (minimum, maximum), inclusive. One table for the engine, the CLI and the integration.
OPTION_LIMITS: dict[str, tuple[float, float]] = {
    "speed": (0.25, 4.0),
    "style_weight": (0.0, 20.0),
    "sdp_ratio": (0.0, 1.0),
    "noise": (0.0, 2.0),
    "noise_w": (0.0, 2.0),
    "pause_scale": (0.0, 5.0),
    "pitch": (0.5, 2.0),  # f0 multiplier (audio/pitch.py)
    "intonation": (0.0, 2.0),  # f0 excursions around the sentence's mean: 0 = flat
    "volume": (-20.0, 10.0),  # dB over the loudness target (over the raw output, not normalised)
    "lead_silence": (0.0, 1000.0),  # ms of silence before the first sentence
}


@dataclass(frozen=True)
class SynthesisOptions:
    """``speed`` > 1 speaks faster (SBV2's length_scale is its inverse). ``pitch`` and
    ``intonation`` move f0 after the model (audio/pitch.py; 1 and 1 leave the samples as they
    are). ``normalize`` brings each sentence to the loudness target (audio/loudness.py); off,
    the model's raw output. ``smooth_start``: a streamed message known whole, on a box that
    synthesizes slower than real time, opens with just enough silence that it then plays
    without a wait (synthesis/smooth_start.py)."""

    voice: str | None = None  # "speaker/style", "speaker" (its first style) or None (default voice)
    speed: float = 1.0
    style_weight: float = 1.0
    sdp_ratio: float = 0.2
    noise: float = 0.6
    noise_w: float = 0.8
    pause_scale: float = 1.0
    pitch: float = 1.0
    intonation: float = 1.0
    volume: float = 0.0
    lead_silence: float = 0.0
    normalize: bool = True
    smooth_start: bool = True

    def validated(self) -> SynthesisOptions:
        for name, (low, high) in OPTION_LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidOptionError(f"{name} must be a number, not {value!r}", name)
            if not math.isfinite(value) or not low <= value <= high:
                raise InvalidOptionError(
                    f"{name} must be between {low:g} and {high:g}, not {value!r}", name
                )
        for switch in OPTION_SWITCHES:
            value = getattr(self, switch)
            if not isinstance(value, bool):
                raise InvalidOptionError(f"{switch} must be true or false, not {value!r}", switch)
        if self.voice is not None and not isinstance(self.voice, str):
            raise InvalidOptionError(
                f"voice must be text like 'speaker/style', not {self.voice!r}", "voice"
            )
        return self

    def with_changes(self, **changes: Any) -> SynthesisOptions:
        return replace(self, **changes)

    def with_values(self, values: Mapping[str, Any]) -> SynthesisOptions:
        """These options with ``values`` (as a request brings them: numbers may be text) over
        them, validated; an unknown name is an error."""
        changes: dict[str, Any] = {}
        for name, value in values.items():
            if name not in OPTION_NAMES:
                raise InvalidOptionError(
                    f"unknown option {name!r}; options: {', '.join(OPTION_NAMES)}", name
                )
            changes[name] = _number(name, value) if name in OPTION_LIMITS else value
        return replace(self, **changes).validated()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in fields(SynthesisOptions))
# The options that are on or off.
OPTION_SWITCHES: tuple[str, ...] = ("normalize", "smooth_start")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidOptionError(f"{name} must be a number, not {value!r}", name)
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise InvalidOptionError(f"{name} must be a number, not {value!r}", name) from err
