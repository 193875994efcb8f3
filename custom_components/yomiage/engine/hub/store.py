"""The model directory on disk: published parts, a manifest of them, and a staging area.

::

    <dir>/bert/tokenizer/ onnx/bert/q8/ onnx/speakers/<name>/   the bundle: complete, verified parts
    <dir>/.yomiage/manifest.json           what was published: path -> size, content id; origin
    <dir>/.yomiage/blobs/<id>.partial      a transfer in progress, kept across calls (resume)
    <dir>/.yomiage/blobs/<id>              transferred and verified, not yet published
    <dir>/.yomiage/lock                    one download per directory at a time

Blobs are named by content (LFS sha256 or git blob id), so a partial file survives a new commit on
the branch as long as that file did not change. A part enters the bundle with one folder rename,
so the engine never sees half a speaker. No network here.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import FetchError
from .layout import Part, RemoteFile

if sys.platform != "win32":
    import fcntl

_LOGGER = logging.getLogger(__name__)

STATE_DIR = ".yomiage"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class PublishedFile:
    size: int
    content_id: str


@dataclass
class Manifest:
    """What the bundle folder holds and where it came from (the last download that published)."""

    repo_id: str = ""
    revision: str = ""
    commit: str = ""
    files: dict[str, PublishedFile] = field(default_factory=dict)  # path in bundle -> file

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MANIFEST_VERSION,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "files": {
                path: {"size": f.size, "content_id": f.content_id}
                for path, f in sorted(self.files.items())
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        files = {
            str(path): PublishedFile(size=int(entry["size"]), content_id=str(entry["content_id"]))
            for path, entry in data["files"].items()
        }
        return cls(str(data["repo_id"]), str(data["revision"]), str(data["commit"]), files)

    def under(self, prefix: str) -> dict[str, PublishedFile]:
        return {path: f for path, f in self.files.items() if path.startswith(f"{prefix}/")}


class ModelDir:
    """One model directory: the bundle root plus its ``.yomiage`` state folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / STATE_DIR
        self.blobs = self.state / "blobs"
        self.manifest_path = self.state / "manifest.json"

    # --- reading (no writes, safe at start-up) --------------------------------------------------
    def read_manifest(self) -> Manifest:
        """The manifest, or an empty one if absent or unreadable (then parts are fetched again)."""
        try:
            return Manifest.from_json(json.loads(self.manifest_path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return Manifest()
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            _LOGGER.warning(
                "%s is unreadable (%s); treating the folder as empty", self.manifest_path, err
            )
            return Manifest()

    def is_complete(self, prefix: str, manifest: Manifest) -> bool:
        """The part at ``prefix`` was published and every file of it is still there, full size."""
        files = manifest.under(prefix)
        return bool(files) and all(self._has(path, f.size) for path, f in files.items())

    def is_current(self, part: Part, manifest: Manifest) -> bool:
        """The published part holds exactly the remote part's content."""
        wanted = {f.path: f.content_id for f in part.files}
        published = {path: f.content_id for path, f in manifest.under(part.prefix).items()}
        return wanted == published and self.is_complete(part.prefix, manifest)

    def published_speakers(self, manifest: Manifest, speakers_prefix: str) -> list[str]:
        names = {
            path[len(speakers_prefix) + 1 :].split("/")[0]
            for path in manifest.under(speakers_prefix)
        }
        return sorted(
            name for name in names if self.is_complete(f"{speakers_prefix}/{name}", manifest)
        )

    def _has(self, path: str, size: int) -> bool:
        try:
            return (self.root / path).stat().st_size == size
        except OSError:
            return False

    # --- staging ----------------------------------------------------------------------------
    def blob_path(self, file: RemoteFile) -> Path:
        return self.blobs / file.content_id

    def partial_path(self, file: RemoteFile) -> Path:
        return self.blobs / f"{file.content_id}.partial"

    def staged_bytes(self, file: RemoteFile) -> int:
        """Bytes of ``file`` already here: all if verified, else what the partial holds."""
        if self.blob_path(file).is_file():
            return file.size
        try:
            return min(self.partial_path(file).stat().st_size, file.size)
        except FileNotFoundError:
            return 0

    def reuse_published(self, file: RemoteFile, manifest: Manifest) -> None:
        """Stage an unchanged file of a part that is being updated from the bundle itself."""
        published = manifest.files.get(file.path)
        blob = self.blob_path(file)
        if published is None or published.content_id != file.content_id or blob.exists():
            return
        if self._has(file.path, file.size):
            _place(self.root / file.path, blob)

    @contextmanager
    def held(self) -> Iterator[None]:
        """The folder made and held for one download; its storage failures as ``FetchError``
        (another download holding it: busy)."""
        with storage_errors(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
            with self.locked():
                yield

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory for one download; raises ``BlockingIOError`` if another holds it."""
        self.blobs.mkdir(parents=True, exist_ok=True)
        if (
            sys.platform == "win32"
        ):  # no advisory locks there: one download at a time is on the user
            yield
            return
        with (self.state / "lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- publishing -------------------------------------------------------------------------
    def publish(self, part: Part, manifest: Manifest) -> None:
        """Move a part's verified blobs into the bundle as one folder, then record it."""
        assembly = self.state / "assembly"
        shutil.rmtree(assembly, ignore_errors=True)
        for file in part.files:
            _place(self.blob_path(file), assembly / part.relative(file))
        _swap_in(assembly, self.root / part.prefix, self.state / "replaced")
        for path in manifest.under(part.prefix):
            del manifest.files[path]
        for file in part.files:
            manifest.files[file.path] = PublishedFile(size=file.size, content_id=file.content_id)
        self.write_manifest(manifest)

    def write_manifest(self, manifest: Manifest) -> None:
        temporary = self.manifest_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(manifest.to_json(), indent=1), encoding="utf-8")
        os.replace(temporary, self.manifest_path)

    def clear_staging(self) -> None:
        """Drop every blob and partial: called once all wanted parts are published."""
        shutil.rmtree(self.blobs, ignore_errors=True)
        shutil.rmtree(self.state / "assembly", ignore_errors=True)


def _place(source: Path, target: Path) -> None:
    """Hard-link (no copy; the source stays, e.g. for another file with the same content)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # file systems without hard links
        shutil.copyfile(source, target)


def _swap_in(folder: Path, target: Path, trash: Path) -> None:
    """Replace ``target`` by ``folder`` with renames only (same file system, no copy)."""
    shutil.rmtree(trash, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rename(trash)
    folder.rename(target)
    shutil.rmtree(trash, ignore_errors=True)


@contextmanager
def storage_errors(root: Path) -> Iterator[None]:
    """Failures to write into ``root`` as ``FetchError``s; others pass."""
    try:
        yield
    except FetchError:
        raise
    except BlockingIOError as err:
        raise FetchError("busy", f"{root}: another download into this folder is running") from err
    except OSError as err:
        raise storage_error(err, root) from err


def storage_error(err: OSError, root: Path) -> FetchError:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return FetchError("disk_full", f"{root}: disk full while downloading")
    where = err.filename or root
    return FetchError("storage", f"{where}: cannot write ({err.strerror or err})")
