"""What a voices repo on the Hub offers: its file listing cut into the parts of a bundle.

A *part* is a folder that is published into the model directory as one: complete or not at all
(the tokenizer, the Q8 BERT graph, one folder per speaker). File names come from ``bundle.py``;
this module only knows which folders a bundle is made of. No network here: it reads a listing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..bundle import BERT_Q8, SPEAKER_FILES, SPEAKERS_DIR, TOKENIZER_DIR

TOKENIZER_PREFIX = TOKENIZER_DIR.as_posix()
BERT_PREFIX = BERT_Q8.parent.as_posix()
SPEAKERS_PREFIX = SPEAKERS_DIR.as_posix()
REQUIRED_TOKENIZER_FILES = ("vocab.txt",)  # what Bundle.open insists on


class LayoutError(ValueError):
    """The listing is not a voices repo (a required folder or file is missing)."""


@dataclass(frozen=True)
class RemoteFile:
    path: str  # in the repo, "/"-separated
    size: int  # bytes of the real file (LFS: the object, not the pointer)
    git_oid: str  # git blob sha1, as the tree listing reports it
    sha256: str | None  # LFS files only: the object's sha256

    @property
    def content_id(self) -> str:
        """Names this exact content: the LFS sha256, else the git blob id."""
        return self.sha256 or self.git_oid


@dataclass(frozen=True)
class Part:
    """A folder of the bundle that is published as one."""

    prefix: str  # "onnx/speakers/jvnv-F1-jp"
    files: tuple[RemoteFile, ...]

    @property
    def size(self) -> int:
        return sum(file.size for file in self.files)

    def relative(self, file: RemoteFile) -> str:
        """The file's path inside the part's folder."""
        return file.path[len(self.prefix) + 1 :]


@dataclass(frozen=True)
class RepoLayout:
    shared: tuple[Part, ...]  # tokenizer and BERT: every bundle needs them
    speakers: Mapping[str, Part]  # speaker name -> its folder, sorted by name

    def parts_for(self, speakers: Iterable[str]) -> list[Part]:
        return [*self.shared, *(self.speakers[name] for name in speakers)]


def parse_layout(files: Iterable[RemoteFile]) -> RepoLayout:
    """Cut a recursive file listing into parts; raise ``LayoutError`` naming what is missing."""
    listing = list(files)
    tokenizer = _part(TOKENIZER_PREFIX, listing, REQUIRED_TOKENIZER_FILES)
    bert = _part(BERT_PREFIX, listing, (BERT_Q8.name,))
    speakers = {
        name: _part(f"{SPEAKERS_PREFIX}/{name}", listing, SPEAKER_FILES)
        for name in _speaker_names(listing)
    }
    if not speakers:
        raise LayoutError(f"no speakers (expected {SPEAKERS_PREFIX}/<name>/ folders)")
    return RepoLayout(shared=(tokenizer, bert), speakers=speakers)


def _speaker_names(listing: list[RemoteFile]) -> list[str]:
    """Folders directly below onnx/speakers/ that hold files (discovered, never hard-coded)."""
    names = set()
    for file in listing:
        parts = PurePosixPath(file.path).parts
        if file.path.startswith(f"{SPEAKERS_PREFIX}/") and len(parts) > len(SPEAKERS_DIR.parts) + 1:
            names.add(parts[len(SPEAKERS_DIR.parts)])
    return sorted(names)


def _part(prefix: str, listing: list[RemoteFile], required: Iterable[str]) -> Part:
    files = tuple(sorted((f for f in listing if f.path.startswith(f"{prefix}/")), key=_path))
    present = {f.path for f in files}
    missing = [f"{prefix}/{name}" for name in required if f"{prefix}/{name}" not in present]
    if missing:
        raise LayoutError(f"missing {', '.join(missing)}")
    return Part(prefix=prefix, files=files)


def _path(file: RemoteFile) -> str:
    return file.path
