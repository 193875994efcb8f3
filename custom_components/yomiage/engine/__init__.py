"""Yomiage engine: Japanese text to speech with Style-Bert-VITS2 JP-Extra voices on onnxruntime.

Importable without Home Assistant (installed as ``yomiage_engine`` for the CLI and the Wyoming
server). The synthesis API is imported from here; its names load on first use, so that importing
the package (for its errors, options or WAV framing) never loads numpy or onnxruntime.

Sub-packages, top-down: ``text`` (normalisation, readings, OpenJTalk), ``synthesis`` (the engine,
voices, BERT, pauses, pieces, options, results), ``audio`` (PCM, WAV, loudness), ``onnx``
(sessions, device choice, graph rewrite and cache) and ``hub`` (downloads of published voices).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import (
        BundleError,
        DeviceUnavailableError,
        DownloadError,
        InvalidOptionError,
        InvalidTextError,
        UnknownVoiceError,
        VoiceMismatchError,
        YomiageError,
    )
    from .onnx.graph_cache import default_cache_dir
    from .synthesis.arriving import ArrivingText
    from .synthesis.engine import Engine
    from .synthesis.options import OPTION_LIMITS, OPTION_SWITCHES, SynthesisOptions
    from .synthesis.results import AudioChunk, SentenceReport, Synthesis, sentence_reports

_HOMES = {
    "ArrivingText": ".synthesis.arriving",
    "AudioChunk": ".synthesis.results",
    "BundleError": ".errors",
    "DeviceUnavailableError": ".errors",
    "DownloadError": ".errors",
    "Engine": ".synthesis.engine",
    "InvalidOptionError": ".errors",
    "InvalidTextError": ".errors",
    "OPTION_LIMITS": ".synthesis.options",
    "OPTION_SWITCHES": ".synthesis.options",
    "SentenceReport": ".synthesis.results",
    "Synthesis": ".synthesis.results",
    "SynthesisOptions": ".synthesis.options",
    "UnknownVoiceError": ".errors",
    "VoiceMismatchError": ".errors",
    "YomiageError": ".errors",
    "default_cache_dir": ".onnx.graph_cache",
    "sentence_reports": ".synthesis.results",
}

__all__ = [
    "OPTION_LIMITS",
    "OPTION_SWITCHES",
    "ArrivingText",
    "AudioChunk",
    "BundleError",
    "DeviceUnavailableError",
    "DownloadError",
    "Engine",
    "InvalidOptionError",
    "InvalidTextError",
    "SentenceReport",
    "Synthesis",
    "SynthesisOptions",
    "UnknownVoiceError",
    "VoiceMismatchError",
    "YomiageError",
    "default_cache_dir",
    "sentence_reports",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value
