"""Voices from the Hugging Face Hub: list what a repo offers, fetch a bundle, find it offline.

The integration (config flow) and the ``yomiage fetch`` / ``yomiage speakers`` commands use::

    from yomiage_engine.hub.download import (DEFAULT_REPO, FetchError, Progress, fetch_bundle,
        list_offer, local_bundle, installed_speakers)

    offer = list_offer(repo_id, revision=None, token=None)   # network: one revision + one tree call
    offer.speakers                     # ("jvnv-F1-jp", ...) discovered from onnx/speakers/*
    offer.download_size(["jvnv-F1-jp"])  # bytes: tokenizer + Q8 BERT + those speakers

    root = fetch_bundle(model_dir, repo_id, speakers=["jvnv-F1-jp"], revision=offer.commit,
                        token=None, progress=callback)   # -> model_dir, a bundle for Engine(root)
    root = local_bundle(model_dir, ["jvnv-F1-jp"])   # no network: the root, or None if incomplete
    installed_speakers(model_dir)                   # ("jvnv-F1-jp",) published and complete

- Start-up: call ``local_bundle`` first; it makes no request, so Home Assistant starts with the
  Hub unreachable. Only if it returns None, call ``fetch_bundle``.
- ``fetch_bundle`` fetches only ``bert/tokenizer``, ``onnx/bert/q8`` and the chosen speakers'
  folders (all speakers if ``speakers`` is None). Files are checked against the size and hash the
  Hub lists (LFS sha256, else the git blob id); parts already published with that content are not
  transferred again (a repeated call costs two small API requests). Pass ``revision=offer.commit``
  to fetch exactly what was listed.
- Partial files stay in ``<model_dir>/.yomiage/blobs`` when a transfer breaks (Wi-Fi lost, the
  process killed): the next call continues from their last byte with a Range request. A speaker
  folder appears in the bundle complete and verified, or not at all.
- ``progress(Progress(done_bytes, total_bytes, path))`` is called from the downloading thread
  (in Home Assistant: hop to the loop with ``hass.loop.call_soon_threadsafe``). It starts at the
  bytes already on disk and ends at ``done_bytes == total_bytes``. Raising from it cancels the
  download (the exception propagates; partial files are kept).
- Blocking: run these in an executor job. ``token``: for private repos (None = huggingface_hub's
  own: ``HF_TOKEN`` or a stored login). ``endpoint``: another Hub (default ``HF_ENDPOINT``, read at
  call time).
- Every failure is a ``FetchError`` (a ``DownloadError``) with a one-line message and a
  ``reason`` for translation: unknown_repo, unknown_revision, unknown_speaker, bad_layout,
  unauthorized, offline, hub_error, interrupted, verification, disk_full, storage, busy.
  ``translation_key`` is ``download_<reason>``.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import FetchError, Reason, megabytes
from .layout import (
    BERT_PREFIX,
    SPEAKERS_PREFIX,
    TOKENIZER_PREFIX,
    LayoutError,
    Part,
    RemoteFile,
    RepoLayout,
    parse_layout,
)
from .store import ModelDir

if TYPE_CHECKING:
    from .client import HubClient

__all__ = [
    "DEFAULT_REPO",
    "FetchError",
    "Progress",
    "ProgressCallback",
    "Reason",
    "RepoOffer",
    "fetch_bundle",
    "installed_speakers",
    "list_offer",
    "local_bundle",
]

DEFAULT_REPO = "lemondouble/hayakoe"
DEFAULT_REVISION = "main"


@dataclass(frozen=True)
class Progress:
    done_bytes: int
    total_bytes: int
    path: str | None  # the file in transfer (path in the repo), None before and after

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 1.0


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class RepoOffer:
    """What one revision of a voices repo offers."""

    repo_id: str
    revision: str  # as asked ("main", a tag, a commit)
    commit: str  # what it resolved to: pass it back to fetch exactly this
    layout: RepoLayout

    @property
    def speakers(self) -> tuple[str, ...]:
        return tuple(self.layout.speakers)

    def speaker_size(self, speaker: str) -> int:
        return self.layout.speakers[speaker].size

    def download_size(self, speakers: Iterable[str]) -> int:
        """Bytes of the tokenizer, the Q8 BERT and ``speakers`` together."""
        return sum(part.size for part in self.layout.parts_for(self.choose(speakers)))

    def choose(self, speakers: Iterable[str] | None) -> list[str]:
        """The named speakers in order, without repeats (None: all); unknown names raise."""
        wanted = list(dict.fromkeys(self.speakers if speakers is None else speakers))
        unknown = [name for name in wanted if name not in self.layout.speakers]
        if unknown:
            raise FetchError(
                "unknown_speaker",
                f"{self.repo_id}: no speaker {', '.join(unknown)} "
                f"(offered: {', '.join(self.speakers)})",
            )
        return wanted


# --- public API --------------------------------------------------------------------------------
def list_offer(
    repo_id: str = DEFAULT_REPO,
    *,
    revision: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
) -> RepoOffer:
    """Resolve ``revision`` and list the speakers and files the repo offers (network)."""
    revision = revision or DEFAULT_REVISION
    commit, files = _client(repo_id, token, endpoint).resolve(revision)
    try:
        layout = parse_layout(files)
    except LayoutError as err:
        raise FetchError("bad_layout", f"{repo_id}@{revision} is not a voices repo: {err}") from err
    return RepoOffer(repo_id=repo_id, revision=revision, commit=commit, layout=layout)


def fetch_bundle(
    model_dir: str | Path,
    repo_id: str = DEFAULT_REPO,
    *,
    speakers: Iterable[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """Make ``model_dir`` a bundle with the chosen speakers of ``repo_id``; returns its root."""
    offer = list_offer(repo_id, revision=revision, token=token, endpoint=endpoint)
    chosen = offer.choose(speakers)
    store = ModelDir(Path(model_dir).expanduser())
    with store.held():
        _Fetch(offer, store, _client(repo_id, token, endpoint), progress).run(chosen)
    return store.root


def local_bundle(model_dir: str | Path, speakers: Iterable[str] | None = None) -> Path | None:
    """The bundle root if an earlier download left it complete, else None. Makes no request.

    ``speakers``: those that must be there (None: at least one). Checks presence and sizes only
    (hashes were checked when the files arrived), so it is quick enough for every start-up.
    """
    store = ModelDir(Path(model_dir).expanduser())
    manifest = store.read_manifest()
    if not all(store.is_complete(prefix, manifest) for prefix in (TOKENIZER_PREFIX, BERT_PREFIX)):
        return None
    present = set(store.published_speakers(manifest, SPEAKERS_PREFIX))
    wanted = set(speakers) if speakers is not None else set()
    if not present or not wanted <= present:
        return None
    return store.root


def installed_speakers(model_dir: str | Path) -> tuple[str, ...]:
    """Speakers published complete in ``model_dir`` (no request)."""
    store = ModelDir(Path(model_dir).expanduser())
    return tuple(store.published_speakers(store.read_manifest(), SPEAKERS_PREFIX))


# --- one download ------------------------------------------------------------------------------
class _Fetch:
    """Transfers, verifies and publishes the parts of one offer that are not already current."""

    def __init__(
        self,
        offer: RepoOffer,
        store: ModelDir,
        client: HubClient,
        progress: ProgressCallback | None,
    ) -> None:
        self.offer = offer
        self.store = store
        self.client = client
        self.manifest = store.read_manifest()
        self.meter = _Meter(progress)

    def run(self, speakers: Sequence[str]) -> None:
        parts = self.offer.layout.parts_for(speakers)
        pending = [part for part in parts if not self.store.is_current(part, self.manifest)]
        for file in (file for part in pending for file in part.files):
            self.store.reuse_published(file, self.manifest)
        self.meter.start(
            total=sum(part.size for part in parts),
            already=sum(part.size for part in parts if part not in pending),
            staged={f.path: self.store.staged_bytes(f) for part in pending for f in part.files},
        )
        self._check_free_space(pending)
        self.manifest.repo_id = self.offer.repo_id
        self.manifest.revision = self.offer.revision
        self.manifest.commit = self.offer.commit
        for part in pending:
            for file in part.files:
                self._transfer(file)
            self.store.publish(part, self.manifest)
        self.store.write_manifest(self.manifest)
        self.store.clear_staging()
        self.meter.finish()

    def _check_free_space(self, pending: list[Part]) -> None:
        needed = sum(f.size - self.store.staged_bytes(f) for part in pending for f in part.files)
        free = shutil.disk_usage(self.store.root).free
        if needed > free:
            raise FetchError(
                "disk_full",
                f"{self.store.root}: the download needs {megabytes(needed)} more, "
                f"only {megabytes(free)} free",
            )

    def _transfer(self, file: RemoteFile) -> None:
        """Bring one file into the staging area, continuing a partial one; verify it."""
        blob, partial = self.store.blob_path(file), self.store.partial_path(file)
        if blob.is_file():
            return
        if partial.is_file() and partial.stat().st_size > file.size:
            partial.unlink()  # not a prefix of this content: start over
        self.client.download(file, self.offer.commit, partial, self.meter.bar_class(file))
        _verify(partial, file)
        partial.rename(blob)


def _verify(path: Path, file: RemoteFile) -> None:
    """Size and hash as the Hub lists them; a mismatching file is deleted (next try restarts)."""
    size = path.stat().st_size
    actual = _sha256(path) if file.sha256 else _git_blob_id(path, size)
    expected = file.sha256 or file.git_oid
    if size == file.size and actual == expected:
        return
    path.unlink()
    what = f"size {size} != {file.size}" if size != file.size else f"hash {actual} != {expected}"
    raise FetchError(
        "verification", f"{file.path}: downloaded file does not match the Hub ({what}); deleted"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    _hash_into(digest, path)
    return digest.hexdigest()


def _git_blob_id(path: Path, size: int) -> str:
    digest = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    _hash_into(digest, path)
    return digest.hexdigest()


def _hash_into(digest: Any, path: Path) -> None:
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)


# --- progress ----------------------------------------------------------------------------------
class _Meter:
    """Counts bytes for the callback; huggingface_hub reports through a tqdm-like bar per file."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self.total = 0
        self.done = 0
        self.per_file: dict[str, int] = {}  # bytes counted so far for each file in transfer

    def start(self, total: int, already: int, staged: dict[str, int]) -> None:
        self.total = total
        self.per_file = dict(staged)
        self.done = already + sum(staged.values())
        self._emit(None)

    def finish(self) -> None:
        self.done = self.total
        self._emit(None)

    def at(self, file: RemoteFile, position: int) -> None:
        """``file`` now has ``position`` bytes on disk."""
        self.done += position - self.per_file.get(file.path, 0)
        self.per_file[file.path] = position
        self._emit(file.path)

    def bar_class(self, file: RemoteFile) -> Any:
        """What http_get calls like a tqdm class: ``initial`` is the byte it resumes at (0 if
        the server ignored the Range and the file restarts)."""
        meter = self

        class _Bar:
            def __init__(self, *, initial: int = 0, **_: object) -> None:
                self.position = initial
                meter.at(file, initial)

            def __enter__(self) -> _Bar:
                return self

            def __exit__(self, *exc_info: object) -> None:
                pass

            def update(self, n: float | None = 1) -> None:
                self.position += int(n or 0)
                meter.at(file, self.position)

        return _Bar

    def _emit(self, path: str | None) -> None:
        if self.callback is not None:
            self.callback(Progress(self.done, self.total, path))


# --- helpers -----------------------------------------------------------------------------------
def _client(repo_id: str, token: str | None, endpoint: str | None) -> HubClient:
    from .client import HubClient  # huggingface_hub's API: ~1 s to import, online work only

    return HubClient(repo_id, token, endpoint)
