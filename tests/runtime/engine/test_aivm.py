"""AivisHub's voice files read in place (engine/aivm.py): the model they belong to, and a voice for
each speaker that speaks Japanese."""

from __future__ import annotations

from pathlib import Path

import pytest

from custom_components.yomiage.engine.aivm import read_aivmx
from custom_components.yomiage.engine.errors import BundleError

from ..fakeaivishub import manifest_of, with_manifest
from ..voice_files import AIVMX, DUO_AIVMX, DUO_SPEAKERS


def test_the_file_names_its_model_and_version() -> None:
    read = read_aivmx(AIVMX)
    manifest = manifest_of(AIVMX.read_bytes())
    assert (read.model_uuid, read.model_version) == (manifest["uuid"].lower(), "1.0.0")
    assert [voice.name for voice in read.voices] == ["tiny-a"]


@pytest.mark.parametrize(
    ("languages", "voices"),
    [
        ((["ja"], ["ja-JP", "en-US"]), DUO_SPEAKERS),
        ((["ja"], ["en"]), DUO_SPEAKERS[:1]),
        ((["en-US"], ["JA"]), DUO_SPEAKERS[1:]),
    ],
)
def test_only_speakers_of_japanese_are_voices(
    tmp_path: Path, languages: tuple[list[str], list[str]], voices: tuple[str, ...]
) -> None:
    speakers = manifest_of(DUO_AIVMX.read_bytes())["speakers"]
    for speaker, spoken in zip(speakers, languages, strict=True):
        speaker["supported_languages"] = spoken
    path = tmp_path / "duo.aivmx"
    path.write_bytes(with_manifest(DUO_AIVMX.read_bytes(), speakers=speakers))
    assert tuple(voice.name for voice in read_aivmx(path).voices) == voices


def test_a_file_without_a_japanese_speaker_is_refused_when_loaded(tmp_path: Path) -> None:
    speakers = manifest_of(DUO_AIVMX.read_bytes())["speakers"]
    for speaker in speakers:
        speaker["supported_languages"] = ["en"]
    path = tmp_path / "english.aivmx"
    path.write_bytes(with_manifest(DUO_AIVMX.read_bytes(), speakers=speakers))
    with pytest.raises(BundleError, match="no speaker that speaks Japanese"):
        read_aivmx(path)
