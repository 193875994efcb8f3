"""The one error a voice download raises (the Hugging Face Hub's, AivisHub's), with a ``reason``
the integration translates."""

from __future__ import annotations

from typing import Literal

from ..errors import DownloadError

Reason = Literal[
    "unknown_repo",  # no such repo, or private and no (valid) token
    "unknown_revision",
    "unknown_speaker",
    "bad_layout",  # the repo is not a voices repo (a required file or folder is missing)
    "unauthorized",  # gated repo, or the token was refused
    "offline",  # the Hub cannot be reached (or HF_HUB_OFFLINE is set)
    "hub_error",  # the Hub answered with an unexpected HTTP status
    "interrupted",  # a transfer broke mid-file: the next call continues it
    "verification",  # size or hash differs from what the Hub lists
    "disk_full",
    "storage",  # the model folder cannot be written
    "busy",  # another download into the same folder is running
    # AivisHub (aivishub.py)
    "not_a_model",  # the text is neither a model page's URL nor a UUID
    "unknown_model",  # no such published model (404)
    "private_model",  # private or withdrawn (403)
    "hub_down",  # AivisHub answers with a server error (5xx)
    "unsupported_model",  # not Style-Bert-VITS2 (JP-Extra), or no AIVMX file
    "no_japanese",  # none of the model's speakers speaks Japanese
]


class FetchError(DownloadError):
    """A download failed; ``reason`` says why in one word, the message in one line."""

    source = "download"  # the translation keys' prefix: these name the Hugging Face Hub

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.translation_key = f"{self.source}_{reason}"


class AivisHubError(FetchError):
    """A voice from AivisHub failed: its translations name AivisHub (``aivishub_<reason>``)."""

    source = "aivishub"


def megabytes(size: int) -> str:
    """A size in a message."""
    return f"{size / 1e6:.1f} MB"
