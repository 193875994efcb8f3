"""The on-disk layout of a voice bundle: the only module that knows file names.

Layout (the published voices on the Hub use the same)::

    <root>/bert/tokenizer/                 character tokenizer (vocab.txt, tokenizer_config.json)
    <root>/onnx/bert/q8/bert_q8.onnx       DeBERTa features, dynamic INT8 (CPU)
    <root>/onnx/bert/fp32/bert.onnx        optional FP32 graph (CUDA cannot run dynamic INT8)
    <root>/onnx/speakers/<name>/config.json, style_vectors.npy, synthesizer.onnx,
                                duration_predictor.onnx (optional: pauses then come from the
                                durations the synthesizer computes)
    <root>/*.aivmx                         AivisHub's voice files (aivm.py), beside or instead
                                           of the speaker folders

A folder of voices without the language model (BERT and its tokenizer: a folder of AIVMX files
as downloaded) takes it from another bundle: the one named (``language_model``), else a bundle
folder beside it (docs/VOICES.md).
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .aivm import SUFFIX as AIVMX_SUFFIX
from .aivm import AivmVoice, read_aivmx
from .errors import BundleError

TOKENIZER_DIR = Path("bert/tokenizer")
BERT_Q8 = Path("onnx/bert/q8/bert_q8.onnx")
BERT_FP32 = Path("onnx/bert/fp32/bert.onnx")
SPEAKERS_DIR = Path("onnx/speakers")
SPEAKER_FILES = ("config.json", "style_vectors.npy", "synthesizer.onnx")
OPTIONAL_SPEAKER_FILES = ("duration_predictor.onnx",)


@dataclass(frozen=True)
class SpeakerConfig:
    """What the engine needs from an SBV2 ``config.json``."""

    sample_rate: int
    hop_length: int
    add_blank: bool
    speaker_id: int
    styles: dict[str, int]  # style name -> row of style_vectors.npy


@dataclass(frozen=True)
class SpeakerFiles:
    name: str
    config: SpeakerConfig
    synthesizer: Path
    style_vectors: Path  # style_vectors.npy, or the AIVMX file whose metadata holds them
    duration_predictor: Path | None
    aivm: AivmVoice | None = None  # an AIVMX voice: what its manifest says of it
    embedded_style_vectors: bytes | None = None  # an AIVMX's style vectors (.npy bytes)


@dataclass(frozen=True)
class Bundle:
    root: Path
    speakers: dict[str, SpeakerFiles]
    language_root: Path  # the bundle whose BERT and tokenizer serve these voices

    @property
    def tokenizer_dir(self) -> Path:
        return self.language_root / TOKENIZER_DIR

    @property
    def bert_q8(self) -> Path:
        return self.language_root / BERT_Q8

    @property
    def bert_fp32(self) -> Path | None:
        path = self.language_root / BERT_FP32
        return path if path.is_file() else None

    @property
    def sample_rate(self) -> int:
        return next(iter(self.speakers.values())).config.sample_rate

    @classmethod
    def open(cls, root: str | Path, language_model: Path | None = None) -> Bundle:
        """Check that every required file is there and the configs agree; load nothing heavy.
        ``language_model``: a bundle whose BERT and tokenizer serve voices that come without
        (where ``root`` has none; else a bundle folder beside ``root`` that has them)."""
        root = Path(root).expanduser()
        if not root.is_dir():
            raise BundleError(str(root), _not_a_folder(root))
        speakers: dict[str, SpeakerFiles] = {}
        for files in _discover_speakers(root):
            name = _unique(files.name, speakers)
            speakers[name] = replace(files, name=name)
        # A bundle with part of its own language model is incomplete: say which file is missing.
        has_own = (root / TOKENIZER_DIR).exists() or (root / BERT_Q8).parent.exists()
        language_root = (
            root
            if has_own
            else find_language_model(
                [*([language_model] if language_model else []), *_siblings(root)]
            )
        )
        if language_root is None:
            raise BundleError(
                str(root / TOKENIZER_DIR),
                "no language model (bert/tokenizer and onnx/bert/q8/bert_q8.onnx) here or in "
                "another bundle: download the official voices once (they bring it), or copy "
                "a bundle's bert/ and onnx/bert/ beside these voices",
            )
        _require_file(language_root / TOKENIZER_DIR / "vocab.txt")
        _require_file(language_root / BERT_Q8)
        rates = {files.config.sample_rate for files in speakers.values()}
        if len(rates) > 1:
            raise BundleError(str(root / SPEAKERS_DIR), f"speakers disagree on sample rate {rates}")
        return cls(root=root, speakers=speakers, language_root=language_root)

    def relative(self, path: Path) -> str:
        """A path as shown to users (diagnostics, errors): relative to the bundle root."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return path.name


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise BundleError(str(path), "file is missing")
    if path.stat().st_size == 0:
        raise BundleError(str(path), "file is empty")


def has_language_model(root: Path) -> bool:
    """Whether the folder ``root`` holds BERT and its tokenizer (voices may be elsewhere)."""
    return (root / TOKENIZER_DIR / "vocab.txt").is_file() and (root / BERT_Q8).is_file()


def find_language_model(candidates: Iterable[Path]) -> Path | None:
    """The first of ``candidates`` (bundle folders) that holds BERT and its tokenizer."""
    return next((path for path in candidates if has_language_model(path)), None)


def _siblings(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.resolve().parent.iterdir() if p.is_dir() and p != root)
    except OSError:
        return []


def _unique(name: str, taken: dict[str, SpeakerFiles]) -> str:
    """``name``, or it numbered, where another voice has it (two AIVMX files, one name)."""
    unique, number = name, 1
    while unique in taken:
        number += 1
        unique = f"{name} ({number})"
    return unique


def _discover_speakers(root: Path) -> list[SpeakerFiles]:
    speakers_dir = root / SPEAKERS_DIR
    folders = (
        sorted(p for p in speakers_dir.iterdir() if p.is_dir()) if speakers_dir.is_dir() else []
    )
    voice_files = sorted(p for p in root.glob(f"*{AIVMX_SUFFIX}") if p.is_file())
    if not folders and not voice_files:
        raise BundleError(
            str(speakers_dir),
            f"no voices (expected onnx/speakers/<name>/ folders or {AIVMX_SUFFIX} files)",
        )
    found = [_speaker_files(folder) for folder in folders]
    for path in voice_files:
        found.extend(_aivmx_speakers(path))
    return found


def _speaker_files(folder: Path) -> SpeakerFiles:
    for name in SPEAKER_FILES:
        _require_file(folder / name)
    config = parse_speaker_config(folder / "config.json", speaker_name=folder.name)
    durations = folder / "duration_predictor.onnx"
    return SpeakerFiles(
        name=folder.name,
        config=config,
        synthesizer=folder / "synthesizer.onnx",
        style_vectors=folder / "style_vectors.npy",
        duration_predictor=durations if durations.is_file() else None,
    )


def _aivmx_speakers(path: Path) -> list[SpeakerFiles]:
    """A voice per speaker of an AIVMX file: styles and ids from its manifest, the rest of its
    config from its hyper-parameters."""
    aivmx = read_aivmx(path)
    config = _parse_config(path, aivmx.hyper_parameters, speaker_name="")
    return [
        SpeakerFiles(
            name=voice.name,
            config=replace(config, speaker_id=voice.speaker_id, styles=voice.styles),
            synthesizer=path,
            style_vectors=path,
            duration_predictor=None,
            aivm=voice,
            embedded_style_vectors=aivmx.style_vectors,
        )
        for voice in aivmx.voices
    ]


def parse_speaker_config(path: Path, speaker_name: str) -> SpeakerConfig:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BundleError(str(path), f"not a valid SBV2 config ({_describe(err)})") from err
    return _parse_config(path, raw, speaker_name)


def _parse_config(path: Path, raw: Any, speaker_name: str) -> SpeakerConfig:
    """An SBV2 config (``raw``, read from ``path``) in the engine's terms."""
    try:
        data = raw["data"]
        styles = {str(name): int(row) for name, row in data["style2id"].items()}
        config = SpeakerConfig(
            sample_rate=int(data["sampling_rate"]),
            hop_length=int(data["hop_length"]),
            add_blank=bool(data.get("add_blank", True)),
            speaker_id=_speaker_id(data.get("spk2id", {}), speaker_name),
            styles=styles,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise BundleError(str(path), f"not a valid SBV2 config ({_describe(err)})") from err
    if not config.styles:
        raise BundleError(str(path), "data.style2id lists no styles")
    if config.sample_rate <= 0 or config.hop_length <= 0:
        raise BundleError(str(path), "sampling_rate and hop_length must be positive")
    return config


def _speaker_id(spk2id: dict[str, Any], speaker_name: str) -> int:
    """The synthesizer's speaker index: the entry named like the folder, else the first one.

    Published voices are one speaker per folder (spk2id has one entry, id 0).
    """
    if speaker_name in spk2id:
        return int(spk2id[speaker_name])
    return int(next(iter(spk2id.values()), 0))


def _describe(err: Exception) -> str:
    if isinstance(err, KeyError):
        return f"missing key {err}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _not_a_folder(path: Path) -> str:
    """What a bundle path that is no folder is, in words."""
    try:
        path.stat()
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "bundle path is a loop of symbolic links (one points back at another)"
        if err.errno == errno.ENOENT and path.is_symlink():
            return f"bundle path is a symbolic link to {path.readlink()}, which does not exist"
        if err.errno == errno.ENOENT:
            return "bundle folder does not exist"
        return f"bundle path cannot be read: {err.strerror}"
    return "bundle path is a file, not a folder"
