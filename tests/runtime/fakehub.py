"""A fake Hugging Face Hub on 127.0.0.1: just the HTTP API that huggingface_hub's downloads use.

Read from huggingface_hub 2.4 (``hf_api.py``, ``file_download.py``, ``utils/_http.py``)::

    GET  /api/models/{repo}/revision/{rev}     HfApi.repo_info   -> {"id", "sha", "siblings"}
    GET  /api/models/{repo}/tree/{rev}[/{dir}] HfApi.list_repo_tree (?recursive=true) -> entries
    HEAD /{repo}/resolve/{rev}/{path}          get_hf_file_metadata -> X-Repo-Commit, ETag,
                                               X-Linked-Etag / X-Linked-Size (LFS files)
    GET  /{repo}/resolve/{rev}/{path}          http_get, ``Range: bytes=N-`` -> 206

Errors carry ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound), which is what
huggingface_hub turns into its typed exceptions. Faults for tests: ``cut_next`` sends part of a
file and then resets the connection (a Pi losing Wi-Fi), ``corrupt`` serves wrong bytes of the
right length. Every request is logged in ``requests``. Listens on 127.0.0.1 (or ``host``); ``stop``
ends it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from .http_server import FileHandler, ServedDouble

# What a voices repo's .gitattributes sends to LFS (those get X-Linked-* headers and an sha256).
LFS_SUFFIXES = (".onnx", ".npy", ".bin", ".safetensors")
_API = re.compile(
    r"^/api/models/(?P<repo>[^/]+/[^/]+)(/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?P<path>/.*)?)?$"
)
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


@functools.lru_cache(maxsize=64)  # bytes cache their own hash: a hit costs nothing
def git_blob_sha1(data: bytes) -> str:
    """The object id git (and the Hub's tree listing) gives a file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@functools.lru_cache(maxsize=64)
def lfs_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, bytes]  # path in repo ("a/b.onnx") -> content
    token: str | None = None  # set: the repo is private and needs this bearer token

    @classmethod
    def from_folder(cls, folder: Path, token: str | None = None) -> FakeRepo:
        files = {
            path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
        return cls(files=files, token=token)

    def with_speakers(self, names: dict[str, str]) -> FakeRepo:
        """The same files with speaker folders renamed: ``{"tiny-a": "jvnv-F1-jp"}``."""

        def renamed(path: str) -> str:
            parts = path.split("/")
            if parts[:2] == ["onnx", "speakers"] and len(parts) > 3:
                parts[2] = names.get(parts[2], parts[2])
            return "/".join(parts)

        return FakeRepo({renamed(path): data for path, data in self.files.items()}, self.token)

    @property
    def commit(self) -> str:
        listing = "".join(
            f"{path}:{git_blob_sha1(data)}\n" for path, data in sorted(self.files.items())
        )
        return hashlib.sha1(listing.encode()).hexdigest()

    def entry(self, path: str) -> dict[str, Any]:
        data = self.files[path]
        entry: dict[str, Any] = {
            "type": "file",
            "oid": git_blob_sha1(data),
            "size": len(data),
            "path": path,
        }
        if path.endswith(LFS_SUFFIXES):
            entry["lfs"] = {
                "oid": lfs_sha256(data),
                "size": len(data),
                "pointerSize": 134,
            }
        return entry

    def tree(self, folder: str, recursive: bool) -> list[dict[str, Any]] | None:
        """Entries under ``folder`` ("" = root) as the Hub lists them; None if no such folder."""
        prefix = f"{folder}/" if folder else ""
        below = [path for path in sorted(self.files) if path.startswith(prefix)]
        if folder and not below:
            return None
        entries: dict[str, dict[str, Any]] = {}
        for path in below:
            parts = path[len(prefix) :].split("/")
            depth = len(parts) if recursive else 1
            for level in range(1, min(depth, len(parts) - 1) + 1):  # the folders on the way
                folder_path = prefix + "/".join(parts[:level])
                entries.setdefault(
                    folder_path, {"type": "directory", "oid": "0" * 40, "path": folder_path}
                )
            if recursive or len(parts) == 1:
                entries[path] = self.entry(path)
        return list(entries.values())


@dataclass
class Request:
    kind: str  # "api" or "file" (/resolve)
    method: str
    path: str  # path in repo for files, else the URL path
    range: str | None
    body_bytes: int  # file bytes sent (resolve GET only)


@dataclass
class _Faults:
    cuts: dict[tuple[str, str], int] = field(default_factory=dict)  # (repo, path) -> bytes to send
    corrupt: set[tuple[str, str]] = field(default_factory=set)


class FakeHub(ServedDouble):
    """``with FakeHub({"owner/name": FakeRepo(...)}) as hub: ... hub.url ...``"""

    def __init__(self, repos: dict[str, FakeRepo], host: str = "127.0.0.1") -> None:
        """``host``: "0.0.0.0" where a container on Docker's bridge must reach it too."""
        self.repos = repos
        self.requests: list[Request] = []
        self.faults = _Faults()
        super().__init__(host, _handler_for(self))

    def cut_next(self, repo: str, path: str, after_bytes: int) -> None:
        """The next GET of ``path`` sends ``after_bytes`` of its body, then resets the link."""
        self.faults.cuts[(repo, path)] = after_bytes

    def corrupt(self, repo: str, path: str) -> None:
        """Serve ``path`` with its first byte flipped (same size, wrong hash) from now on."""
        self.faults.corrupt.add((repo, path))

    def file_gets(self, path: str | None = None) -> list[Request]:
        """The file downloads (GET /resolve) served so far, optionally for one path."""
        return [
            r
            for r in self.requests
            if r.kind == "file" and r.method == "GET" and path in (None, r.path)
        ]


def _handler_for(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(_HubHandler):
        pass

    Handler.hub = hub
    return Handler


class _HubHandler(FileHandler):
    hub: FakeHub

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def _dispatch(self, head: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        if (match := _API.match(path)) and not head:
            self._log("api", path, 0)
            self._api(match, recursive="recursive=true" in url.query.lower())
        elif match := _RESOLVE.match(path):
            self._resolve(match, head)
        else:
            self._log("api", path, 0)
            self._error(404, "")

    # --- API ---------------------------------------------------------------------------------
    def _api(self, match: re.Match[str], recursive: bool) -> None:
        repo = self._repo(match["repo"])
        if repo is None or not self._revision_ok(repo, match["rev"] or "main"):
            return
        if match["kind"] != "tree":
            siblings = [{"rfilename": path} for path in sorted(repo.files)]
            self.send_json({"id": match["repo"], "sha": repo.commit, "siblings": siblings})
            return
        entries = repo.tree((match["path"] or "").strip("/"), recursive)
        if entries is None:
            self._error(404, "EntryNotFound")
        else:
            self.send_json(entries)

    # --- files -------------------------------------------------------------------------------
    def _resolve(self, match: re.Match[str], head: bool) -> None:
        repo_id, path = match["repo"], match["path"]
        repo = self._repo(repo_id)
        if repo is None or not self._revision_ok(repo, match["rev"]):
            self._log("file", path, 0, head)
            return
        if path not in repo.files:
            self._log("file", path, 0, head)
            self._error(404, "EntryNotFound", commit=repo.commit)
            return
        data = repo.files[path]
        if (repo_id, path) in self.hub.faults.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = self.range_start()
        self._send_file_headers(repo, path, len(data), start, head)
        if head:
            self._log("file", path, 0, head)
            return
        cut = self.hub.faults.cuts.pop((repo_id, path), None)
        body = data[start:] if cut is None else data[start : start + cut]
        self._log("file", path, len(body), head)  # before sending: the client may finish first
        self.wfile.write(body)
        self.wfile.flush()
        if cut is not None:
            self.reset_connection()

    def _send_file_headers(
        self, repo: FakeRepo, path: str, size: int, start: int, head: bool
    ) -> None:
        entry = repo.entry(path)
        etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("ETag", f'"{etag}"')
        if "lfs" in entry:
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(size))
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.send_header("Content-Length", str(size - start))
        self.end_headers()

    # --- helpers -----------------------------------------------------------------------------
    def _repo(self, repo_id: str) -> FakeRepo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound")
            return None
        if repo.token is not None and self.headers.get("Authorization") != f"Bearer {repo.token}":
            self._error(401, "RepoNotFound")  # the Hub hides private repos behind 401
            return None
        return repo

    def _revision_ok(self, repo: FakeRepo, revision: str) -> bool:
        if revision in ("main", repo.commit):
            return True
        self._error(404, "RevisionNotFound")
        return False

    def _log(self, kind: str, path: str, body_bytes: int, head: bool = False) -> None:
        method = "HEAD" if head else "GET"
        self.hub.requests.append(Request(kind, method, path, self.headers.get("Range"), body_bytes))

    def _error(self, status: int, code: str, commit: str | None = None) -> None:
        headers = {"X-Error-Code": code} if code else {}
        if commit:
            headers["X-Repo-Commit"] = commit
        self.send_json({"error": code or "not found"}, status, headers)
