"""AIVM and AIVMX files as AivisHub publishes them, through the AIVM reference library (aivmlib).

An AIVMX is Style-Bert-VITS2's ONNX form of a synthesizer with the AIVM metadata in the ONNX
metadata: the manifest (name, speakers and their styles, licence), the hyper-parameters (SBV2's
config.json) and the style vectors. An AIVM is the same metadata in a safetensors checkpoint's
header: what the exporter reads as it reads a model folder. The UUIDs are derived from the name,
so the same voice gives the same file.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import aivmlib
from aivmlib.schemas.aivm_manifest import ModelArchitecture

# What the test voices say of themselves (tools/make_dialects.py); the tests check it arrives.
TEST_VOICE_ABOUT = ("Random weights, for tests: Yomiage's tiny reference voice.", "CC0-1.0")
HYPER_PARAMETERS = "aivm_hyper_parameters"  # the metadata key of SBV2's config.json
_NAMESPACE = uuid.UUID("6f1d0a0e-5a3b-4c1e-9a55-7a0d3c0b9e11")


class AivmFileError(ValueError):
    """An .aivm file aivmlib cannot read; the message says why."""


def write_aivmx(
    graph: Path,
    config: Path,
    style_vectors: Path,
    name: str,
    target: Path,
    about: tuple[str, str] | None = None,
) -> Path:
    """Write ``target``: ``graph`` (Style-Bert-VITS2's form) with the metadata aivmlib generates
    from ``config`` and ``style_vectors`` (its ``Neutral`` style becomes ``ノーマル``)."""
    with graph.open("rb") as model:
        written = aivmlib.write_aivmx_metadata(model, _metadata(config, style_vectors, name, about))
    target.write_bytes(written)
    return target


def write_aivm(
    checkpoint: Path,
    config: Path,
    style_vectors: Path,
    name: str,
    target: Path,
    about: tuple[str, str] | None = None,
) -> Path:
    """Write ``target``: a safetensors ``checkpoint`` with the AIVM metadata in its header."""
    with checkpoint.open("rb") as weights:
        written = aivmlib.write_aivm_metadata(
            weights, _metadata(config, style_vectors, name, about)
        )
    target.write_bytes(written)
    return target


def unpack_aivm(source: Path, folder: Path) -> tuple[Path, Path]:
    """``config.json`` and ``style_vectors.npy`` of an .aivm file, written into ``folder``.
    aivmlib checks the file; the hyper-parameters are taken as written (its schema would drop
    keys it does not know)."""
    try:
        with source.open("rb") as file:
            metadata = aivmlib.read_aivm_metadata(file)
            file.seek(0)
            header_size = int.from_bytes(file.read(8), "little")
            written = json.loads(file.read(header_size))["__metadata__"]
    except (aivmlib.AivmValidationError, OSError, ValueError, KeyError) as err:
        raise AivmFileError(f"{source}: not a readable AIVM file ({err})") from None
    if metadata.style_vectors is None:
        raise AivmFileError(f"{source}: its AIVM metadata holds no style vectors")
    config, style_vectors = folder / "config.json", folder / "style_vectors.npy"
    config.write_text(written[HYPER_PARAMETERS], encoding="utf-8")
    style_vectors.write_bytes(metadata.style_vectors)
    return config, style_vectors


def _metadata(
    config: Path, style_vectors: Path, name: str, about: tuple[str, str] | None
) -> aivmlib.AivmMetadata:
    """What aivmlib generates from a model folder's files, named ``name``, with our test
    voice's description and licence and UUIDs derived from the name."""
    with config.open("rb") as hyper_parameters, style_vectors.open("rb") as vectors:
        metadata = aivmlib.generate_aivm_metadata(
            ModelArchitecture.StyleBertVITS2JPExtra, hyper_parameters, vectors
        )
    manifest = metadata.manifest
    manifest.name = name
    if about is not None:  # (description, licence); else aivmlib's: none
        manifest.description, manifest.license = about
    manifest.uuid = uuid.uuid5(_NAMESPACE, name)
    for speaker in manifest.speakers:
        speaker.uuid = uuid.uuid5(_NAMESPACE, f"{name}/{speaker.name}")
    return metadata
