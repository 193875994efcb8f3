"""The options an entry runs with: what the user stored in the options flow over the defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, Final

from .const import (
    CONF_DEVICE,
    CONF_THREADS,
    CONF_VOICE,
    DEFAULT_DEVICE,
    DEFAULT_THREADS,
    SYNTHESIS_NUMBERS,
    SYNTHESIS_SWITCHES,
)
from .engine import SynthesisOptions

_SYNTHESIS_DEFAULTS = asdict(SynthesisOptions())


def voice_id(speaker: str, style: str) -> str:
    """The id Home Assistant passes back as the ``voice`` option (the engine's own format)."""
    return f"{speaker}/{style}"


# Style-Bert-VITS2's emotion styles (those of the JVNV corpus the official voices learnt) in the
# Japanese that AivisSpeech and a listener use: the voices speak Japanese only, so their labels
# are Japanese in every UI language. Other names (an AIVMX file's, a user's own) are shown as
# they are written.
_STYLE_LABELS: Final = {
    "Neutral": "ノーマル",
    "Happy": "喜び",
    "Sad": "悲しみ",
    "Angry": "怒り",
    "Fear": "恐怖",
    "Surprise": "驚き",
    "Disgust": "嫌悪",
}


def voice_choices(voices: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    """(id, label) of every speaker × style of a bundle, in bundle order."""
    return [
        (voice_id(speaker, style), f"{speaker} – {_STYLE_LABELS.get(style, style)}")
        for speaker, styles in voices.items()
        for style in styles
    ]


def synthesis_defaults(
    options: Mapping[str, Any], default_voice: str, complete: bool = True
) -> dict[str, Any]:
    """The voice and the synthesis options stored in the entry (the tts entity's
    ``default_options``); ``complete``: with the engine's defaults for the others (not for a
    server entry, where the server's settings decide them)."""
    values: dict[str, Any] = {CONF_VOICE: options.get(CONF_VOICE) or default_voice}
    for name in SYNTHESIS_NUMBERS:
        if name in options or complete:
            values[name] = float(options.get(name, _SYNTHESIS_DEFAULTS[name]))
    for name in SYNTHESIS_SWITCHES:
        if name in options or complete:
            values[name] = bool(options.get(name, _SYNTHESIS_DEFAULTS[name]))
    return values


def runtime_settings(options: Mapping[str, Any]) -> tuple[str, int]:
    """(device, threads) the engine is created with; threads 0 lets the engine choose."""
    return (
        str(options.get(CONF_DEVICE, DEFAULT_DEVICE)),
        int(options.get(CONF_THREADS, DEFAULT_THREADS)),
    )
