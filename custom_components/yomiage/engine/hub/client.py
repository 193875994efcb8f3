"""huggingface_hub calls for one repo: resolve a revision, list files, resume a file transfer.

All HTTP is huggingface_hub's: ``HfApi.repo_info`` / ``list_repo_tree``, then per file
``get_hf_file_metadata`` (HEAD: where the bytes are, possibly a CDN) and ``http_get`` (GET with
``Range`` from the partial file's length). Its exceptions become ``FetchError``s here.

Importing huggingface_hub's API takes about a second (several on a Raspberry Pi), so
``download.py`` imports this module only when it has to go online.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import http_get
from huggingface_hub.hf_api import RepoFile

# Public (documented) but exported lazily, which mypy cannot see.
from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

from .errors import FetchError
from .layout import RemoteFile


class HubClient:
    def __init__(self, repo_id: str, token: str | None, endpoint: str | None) -> None:
        self.repo_id = repo_id
        self.token = token  # None: huggingface_hub's own (HF_TOKEN or a stored login)
        # HF_ENDPOINT is read here, not when huggingface_hub was imported.
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None
        self.api = HfApi(endpoint=self.endpoint, token=token)

    def resolve(self, revision: str) -> tuple[str, list[RemoteFile]]:
        """The commit ``revision`` names and every file in it (two requests)."""
        with self.errors(revision):
            commit = self.api.repo_info(self.repo_id, revision=revision).sha
            if not commit:
                raise FetchError("hub_error", f"{self.repo_id}: no commit named for {revision}")
            listing = self.api.list_repo_tree(self.repo_id, revision=commit, recursive=True)
            return commit, [_remote_file(entry) for entry in listing if isinstance(entry, RepoFile)]

    def download(self, file: RemoteFile, commit: str, partial: Path, bar_class: Any) -> None:
        """Append the rest of ``file`` to ``partial`` (a Range request if it holds bytes).

        ``bar_class`` is called like a tqdm class and its ``update(n)`` told of every chunk.
        """
        url, headers = self._locate(file, commit)
        with self.errors(commit, file, partial), partial.open("ab") as out:
            http_get(
                url,
                out,
                resume_size=out.tell(),
                headers=headers,
                expected_size=file.size,
                displayed_filename=file.path,
                tqdm_class=bar_class,
            )

    def _locate(self, file: RemoteFile, commit: str) -> tuple[str, dict[str, str]]:
        """Where to GET a file (the Hub may redirect to a CDN) and the headers to send there."""
        url = hf_hub_url(self.repo_id, file.path, revision=commit, endpoint=self.endpoint)
        with self.errors(commit, file):
            metadata = get_hf_file_metadata(url, token=self.token, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token)
        if urlsplit(metadata.location).netloc != urlsplit(url).netloc:
            headers.pop("authorization", None)  # never send the token to a CDN
        headers["Accept-Encoding"] = "identity"  # byte ranges must count file bytes
        return metadata.location, headers

    @contextmanager
    def errors(
        self, revision: str, file: RemoteFile | None = None, partial: Path | None = None
    ) -> Iterator[None]:
        """Turn huggingface_hub and transport errors into ``FetchError``; let others through."""
        try:
            yield
        except FetchError:
            raise
        except Exception as err:
            error = self._translate(err, revision, file, partial)
            if error is None:
                raise
            raise error from err

    def _translate(
        self, err: Exception, revision: str, file: RemoteFile | None, partial: Path | None
    ) -> FetchError | None:
        repo = self.repo_id
        if isinstance(err, HFValidationError):
            return FetchError("unknown_repo", f"{repo!r} is not a Hub repo id (owner/name)")
        if isinstance(err, GatedRepoError):  # a RepositoryNotFoundError: test it first
            return FetchError("unauthorized", f"{repo}: gated repo, accept its terms, give a token")
        if isinstance(err, RepositoryNotFoundError):
            return FetchError(
                "unknown_repo", f"{repo}: no such repo on the Hub (a private one needs a token)"
            )
        if isinstance(err, RevisionNotFoundError):
            return FetchError("unknown_revision", f"{repo}: no revision {revision!r}")
        if isinstance(err, RemoteEntryNotFoundError):
            where = file.path if file else "a listed file"
            return FetchError("bad_layout", f"{repo}@{revision}: {where} is missing on the Hub")
        if isinstance(err, OfflineModeIsEnabled):
            return FetchError("offline", f"{repo}: HF_HUB_OFFLINE is set, cannot download")
        if isinstance(err, HfHubHTTPError):
            return _http_status_error(err, repo)
        if isinstance(err, httpx2.UnsupportedProtocol | httpx2.InvalidURL):
            where = self.endpoint or os.environ.get("HF_ENDPOINT", "")
            return FetchError("offline", f"the Hub address {where!r} is not an http(s) URL")
        if isinstance(err, httpx2.ConnectError | httpx2.ConnectTimeout):
            where = self.endpoint or "huggingface.co"
            return FetchError("offline", f"cannot reach the Hub ({where}): {_first_line(err)}")
        if isinstance(err, httpx2.TransportError) or _is_short_transfer(err):
            return _interrupted(file, partial, err)
        return None


def _http_status_error(err: HfHubHTTPError, repo: str) -> FetchError:
    status = err.response.status_code if err.response is not None else 0
    if status in (401, 403):
        return FetchError("unauthorized", f"{repo}: access denied ({status}); check the token")
    return FetchError("hub_error", f"{repo}: the Hub answered {status} ({_first_line(err)})")


def _interrupted(file: RemoteFile | None, partial: Path | None, err: Exception) -> FetchError:
    if file is None or partial is None:
        return FetchError("interrupted", f"the connection to the Hub broke ({_first_line(err)})")
    kept = partial.stat().st_size if partial.is_file() else 0
    return FetchError(
        "interrupted",
        f"{file.path}: the transfer broke after {kept / 1e6:.1f} of {file.size / 1e6:.1f} MB "
        f"({_first_line(err)}); run the download again to continue",
    )


def _is_short_transfer(err: Exception) -> bool:
    """http_get's own check when a response ended early without a transport error."""
    return isinstance(err, OSError) and "Consistency check failed" in str(err)


def _remote_file(entry: RepoFile) -> RemoteFile:
    lfs = entry.lfs
    return RemoteFile(
        path=entry.path,
        size=int(lfs.size if lfs is not None else entry.size),
        git_oid=entry.blob_id,
        sha256=lfs.sha256 if lfs is not None else None,
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
