"""The on-disk layout of a voice bundle: the only module that knows file names.

Layout (the published voices on the Hub use the same)::

    <root>/bert/tokenizer/                 character tokenizer (vocab.txt, tokenizer_config.json)
    <root>/onnx/bert/q8/bert_q8.onnx       DeBERTa features, dynamic INT8 (CPU)
    <root>/onnx/bert/fp32/bert.onnx        optional FP32 graph (CUDA cannot run dynamic INT8)
    <root>/onnx/speakers/<name>/config.json, style_vectors.npy, synthesizer.onnx,
                                duration_predictor.onnx (optional: pauses then default to 80 ms)
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    folder: Path
    config: SpeakerConfig

    @property
    def synthesizer(self) -> Path:
        return self.folder / "synthesizer.onnx"

    @property
    def style_vectors(self) -> Path:
        return self.folder / "style_vectors.npy"

    @property
    def duration_predictor(self) -> Path | None:
        path = self.folder / "duration_predictor.onnx"
        return path if path.is_file() else None


@dataclass(frozen=True)
class Bundle:
    root: Path
    speakers: dict[str, SpeakerFiles]

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / TOKENIZER_DIR

    @property
    def bert_q8(self) -> Path:
        return self.root / BERT_Q8

    @property
    def bert_fp32(self) -> Path | None:
        path = self.root / BERT_FP32
        return path if path.is_file() else None

    @property
    def sample_rate(self) -> int:
        return next(iter(self.speakers.values())).config.sample_rate

    @classmethod
    def open(cls, root: str | Path) -> Bundle:
        """Check that every required file is there and the configs agree; load nothing heavy."""
        root = Path(root).expanduser()
        if not root.is_dir():
            raise BundleError(str(root), _not_a_folder(root))
        _require_file(root / TOKENIZER_DIR / "vocab.txt")
        _require_file(root / BERT_Q8)
        speakers = {files.name: files for files in _discover_speakers(root)}
        rates = {files.config.sample_rate for files in speakers.values()}
        if len(rates) > 1:
            raise BundleError(str(root / SPEAKERS_DIR), f"speakers disagree on sample rate {rates}")
        return cls(root=root, speakers=speakers)

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


def _discover_speakers(root: Path) -> list[SpeakerFiles]:
    speakers_dir = root / SPEAKERS_DIR
    folders = (
        sorted(p for p in speakers_dir.iterdir() if p.is_dir()) if speakers_dir.is_dir() else []
    )
    if not folders:
        raise BundleError(str(speakers_dir), "no speaker folders (expected onnx/speakers/<name>/)")
    return [_speaker_files(folder) for folder in folders]


def _speaker_files(folder: Path) -> SpeakerFiles:
    for name in SPEAKER_FILES:
        _require_file(folder / name)
    config = parse_speaker_config(folder / "config.json", speaker_name=folder.name)
    return SpeakerFiles(name=folder.name, folder=folder, config=config)


def parse_speaker_config(path: Path, speaker_name: str) -> SpeakerConfig:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
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
