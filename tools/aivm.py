"""AIVMX files as AivisHub publishes them, written with the AIVM reference library (aivmlib).

An AIVMX is Style-Bert-VITS2's ONNX form of a synthesizer with the AIVM metadata in the ONNX
metadata: the manifest (name, speakers and their styles, licence), the hyper-parameters (SBV2's
config.json) and the style vectors. The UUIDs are derived from the name, so the same voice gives
the same file.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import aivmlib
from aivmlib.schemas.aivm_manifest import ModelArchitecture

# Shown where users pick voices; the tests check that they arrive.
DESCRIPTION = "Random weights, for tests: Yomiage's tiny reference voice."
LICENSE = "CC0-1.0"
_NAMESPACE = uuid.UUID("6f1d0a0e-5a3b-4c1e-9a55-7a0d3c0b9e11")


def write_aivmx(graph: Path, config: Path, style_vectors: Path, name: str, target: Path) -> Path:
    """Write ``target``: ``graph`` (Style-Bert-VITS2's form) with the metadata aivmlib generates
    from ``config`` and ``style_vectors`` (its ``Neutral`` style becomes ``ノーマル``)."""
    with config.open("rb") as hyper_parameters, style_vectors.open("rb") as vectors:
        metadata = aivmlib.generate_aivm_metadata(
            ModelArchitecture.StyleBertVITS2JPExtra, hyper_parameters, vectors
        )
    manifest = metadata.manifest
    manifest.name = name
    manifest.description = DESCRIPTION
    manifest.license = LICENSE
    manifest.uuid = uuid.uuid5(_NAMESPACE, name)
    for speaker in manifest.speakers:
        speaker.uuid = uuid.uuid5(_NAMESPACE, f"{name}/{speaker.name}")
    with graph.open("rb") as model:
        written = aivmlib.write_aivmx_metadata(model, metadata)
    target.write_bytes(written)
    return target
