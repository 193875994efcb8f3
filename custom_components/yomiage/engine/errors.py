"""The few errors the engine raises. Each carries a one-line message meant for a person.

The CLI maps them to exit code 2, the integration to translated ``HomeAssistantError``s (through
``translation_key``). The engine stays usable after any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


class YomiageError(Exception):
    """Base class: something the caller can fix; the message says what."""

    translation_key = "engine_error"
    # What a translated text may name (an option), never prose: the message itself is English.
    placeholders: Mapping[str, str] = MappingProxyType({})


class InvalidTextError(YomiageError):
    """Empty, too long, or nothing speakable in it."""

    translation_key = "invalid_text"


class UnknownVoiceError(YomiageError):
    """The speaker or style is not in the bundle."""

    translation_key = "unknown_voice"


class InvalidOptionError(YomiageError):
    """A synthesis option is out of range (speed <= 0, NaN, ...); ``option`` names it."""

    translation_key = "invalid_option"

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.placeholders = {"option": option}


class BundleError(YomiageError):
    """A bundle file is missing, corrupt or does not match the others."""

    translation_key = "bundle_error"

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class VoiceMismatchError(BundleError):
    """A voice file that loads but was made for another bundle: another language model's
    features, other style vectors, more speakers than its graph has."""


class DeviceUnavailableError(YomiageError):
    """The requested device (CUDA) cannot be used on this machine."""

    translation_key = "device_unavailable"


class DownloadError(YomiageError):
    """A voice download failed (network, unknown repo, bad layout, disk, verification)."""

    translation_key = "download_failed"
