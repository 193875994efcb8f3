"""AivisHub's voice files (``.aivmx``): the AIVM metadata of an ONNX synthesizer, read in place.

An AIVMX is Style-Bert-VITS2's ONNX export of a synthesizer whose ONNX metadata holds the AIVM
manifest (name, description, licence, speakers and their styles as AivisSpeech shows them), the
hyper-parameters (SBV2's config.json) and the style vectors (a base64 .npy). Read through the wire
code (onnx/wire.py): a memory map of the file, only its model-level fields parsed, the weights
never read, so a 250 MB voice costs its metadata, not a second load. (aivmlib, the reference
reader, would decode the whole model with the onnx package.)

Each speaker of the manifest that speaks Japanese becomes a voice (AivisSpeech leaves the others
out too): its name, its styles under their manifest names (``ノーマル`` for the neutral one, as
AivisSpeech lists them), the row of each style's vector and the speaker's id in the model from the
manifest's local ids.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BundleError
from .onnx.wire import WireError, read_interface

SUFFIX = ".aivmx"
MANIFEST_KEY = "aivm_manifest"
HYPER_PARAMETERS_KEY = "aivm_hyper_parameters"
STYLE_VECTORS_KEY = "aivm_style_vectors"
# supported_languages (lower-cased) that make a speaker a voice here, as AivisSpeech reads them.
JAPANESE = frozenset({"ja", "ja-jp"})


@dataclass(frozen=True)
class AivmVoice:
    """One speaker of an AIVMX file."""

    name: str
    speaker_id: int
    styles: dict[str, int]  # style name -> row of the style vectors
    model_uuid: str  # the file's manifest: the model's id on AivisHub (lower case)
    model_name: str  # what AivisHub shows for the model
    description: str
    license: str
    creators: tuple[str, ...]
    version: str


@dataclass(frozen=True)
class AivmxFile:
    path: Path
    model_uuid: str  # the model's id on AivisHub (lower case)
    model_version: str  # its manifest version (SemVer)
    hyper_parameters: dict[str, Any]  # SBV2's config.json
    style_vectors: bytes  # a .npy file's bytes
    voices: list[AivmVoice]


def read_aivmx(path: Path) -> AivmxFile:
    """The metadata of an AIVMX file; BundleError naming what does not parse."""
    try:
        metadata = read_interface(path).metadata
    except (OSError, WireError) as err:
        raise BundleError(str(path), f"not a readable AIVMX file ({err})") from err
    manifest = _json(path, metadata, MANIFEST_KEY)
    hyper_parameters = _json(path, metadata, HYPER_PARAMETERS_KEY)
    try:
        style_vectors = base64.b64decode(metadata[STYLE_VECTORS_KEY], validate=True)
    except KeyError:
        raise BundleError(str(path), f"no {STYLE_VECTORS_KEY} in its metadata") from None
    except (binascii.Error, ValueError) as err:
        raise BundleError(str(path), f"{STYLE_VECTORS_KEY} is not base64 ({err})") from err
    try:
        speakers = manifest["speakers"]
        voices = [_voice(manifest, speaker) for speaker in speakers if _japanese(speaker)]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise BundleError(str(path), f"{MANIFEST_KEY} has no valid speakers ({err!r})") from err
    if not voices:
        what = "no speakers" if not speakers else "no speaker that speaks Japanese"
        raise BundleError(str(path), f"{MANIFEST_KEY} lists {what}")
    first = voices[0]
    return AivmxFile(path, first.model_uuid, first.version, hyper_parameters, style_vectors, voices)


def _japanese(speaker: dict[str, Any]) -> bool:
    """Whether the speaker speaks Japanese ("ja", "ja-JP"); a manifest that does not say is
    taken at its word that it is a Japanese voice."""
    languages = speaker.get("supported_languages")
    if languages is None:
        return True
    return bool(JAPANESE & {str(language).lower() for language in languages})


def _json(path: Path, metadata: dict[str, str], key: str) -> dict[str, Any]:
    if key not in metadata:
        raise BundleError(str(path), f"no {key} in its metadata: not an AIVMX file")
    try:
        value = json.loads(metadata[key])
    except ValueError as err:
        raise BundleError(str(path), f"{key} is not valid JSON ({err})") from err
    if not isinstance(value, dict):
        raise BundleError(str(path), f"{key} is not a JSON object")
    return value


def _voice(manifest: dict[str, Any], speaker: dict[str, Any]) -> AivmVoice:
    styles = {str(style["name"]): int(style["local_id"]) for style in speaker["styles"]}
    if not styles:
        raise ValueError(f"speaker {speaker['name']!r} has no styles")
    return AivmVoice(
        # "speaker/style" names a voice: a slash inside a name would split it.
        name=str(speaker["name"]).replace("/", "／"),
        speaker_id=int(speaker["local_id"]),
        styles=styles,
        model_uuid=str(manifest.get("uuid") or "").lower(),
        model_name=str(manifest.get("name", "")),
        description=str(manifest.get("description") or ""),
        license=str(manifest.get("license") or ""),
        creators=tuple(str(c) for c in manifest.get("creators") or ()),
        version=str(manifest.get("version") or ""),
    )
