"""Voices from AivisHub (hub.aivis-project.com): what a model's page offers, and its AIVMX file
fetched into a folder of voices, resumed, verified and put in place whole.

The integration (config flow, update entities), the ``yomiage fetch`` command and the server use::

    from yomiage_engine.hub.aivishub import fetch_model, installed_models, model_detail, model_uuid

    uuid = model_uuid("https://hub.aivis-project.com/aivm-models/<uuid>")  # or the UUID itself
    model = model_detail(uuid)      # network: one request; name, author, Japanese speakers and
                                    # their styles, the newest AIVMX: version, size, licence
    path = fetch_model(folder, model, progress=callback)   # <folder>/<uuid>.aivmx
    installed_models(folder)        # {uuid: version} of the files there (no network)

- The API is AivisSpeech Engine's (docs/VOICES.md, "AivisHub"): ``GET /aivm-models/{uuid}`` for
  the detail, ``GET /aivm-models/{uuid}/download?model_type=AIVMX`` for the file (redirects
  followed). ``YOMIAGE_AIVISHUB_API`` names another API root (the tests' fake AivisHub).
- A model that is not Style-Bert-VITS2 (JP-Extra) is refused; speakers without Japanese are left
  out, as AivisSpeech leaves them out.
- The transfer goes to ``<folder>/.yomiage/blobs/<uuid>-<version>.partial`` and continues from its
  last byte with a Range request after a cut; before it starts, the free space is checked. Once
  complete it is checked against the API's file size and checksum (AivisHub does not say which
  hash it is: 64 hex digits are taken as SHA-256, as other clients take them) and read as an
  AIVMX whose manifest names this model; then it replaces ``<uuid>.aivmx`` in one rename, so
  whoever looks for voices in ``folder`` never finds half a file.
- ``progress`` as for the Hugging Face download (``download.Progress``, called from the
  downloading thread; raising from it stops the transfer, the partial file is kept).
- Every failure is an ``AivisHubError`` (a ``FetchError`` whose translation key is
  ``aivishub_<reason>``) with a ``reason``: not_a_model (neither a page's URL nor a UUID),
  unknown_model (404), private_model (403), hub_down (AivisHub answers 5xx), hub_error, offline,
  unsupported_model, no_japanese, interrupted, verification, disk_full, storage, busy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from typing import IO, Any

from ..aivm import JAPANESE, SUFFIX, read_aivmx
from ..errors import BundleError
from .download import Progress, ProgressCallback
from .errors import AivisHubError, FetchError, megabytes
from .store import ModelDir, storage_error

API_ROOT = "https://api.aivis-project.com/v1"
API_VARIABLE = "YOMIAGE_AIVISHUB_API"
PAGE_ROOT = "https://hub.aivis-project.com/aivm-models/"
JP_EXTRA = "Style-Bert-VITS2 (JP-Extra)"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TIMEOUT_S = 30.0
_CHUNK = 1 << 20
_USER_AGENT = "Yomiage (Home Assistant text-to-speech)"


@dataclass(frozen=True)
class AivisSpeaker:
    name: str
    styles: tuple[str, ...]


@dataclass(frozen=True)
class AivisFile:
    """The newest AIVMX file of a model."""

    version: str
    size: int
    checksum: str
    license_type: str  # ACML 1.0, ACML-NC 1.0, CC0, Custom, ...
    license_text: str  # empty where AivisHub gives none


@dataclass(frozen=True)
class AivisModel:
    uuid: str
    name: str
    author: str
    description: str
    speakers: tuple[AivisSpeaker, ...]  # those with Japanese; never empty
    file: AivisFile

    @property
    def page(self) -> str:
        return PAGE_ROOT + self.uuid


def model_uuid(text: str) -> str:
    """The model UUID in ``text``: a model page's URL, or the UUID itself."""
    found = _UUID.search(text.strip().lower())
    if found is None or not (text.strip().lower() == found[0] or "aivm-models/" in text):
        raise AivisHubError(
            "not_a_model",
            f"{text.strip()[:80]!r} is neither an AivisHub model page ({PAGE_ROOT}...) nor a UUID",
        )
    return found[0]


def model_detail(uuid: str, *, api: str | None = None) -> AivisModel:
    """What AivisHub says of model ``uuid`` (network: one request)."""
    with _opened(f"{_api(api)}/aivm-models/{uuid}", uuid) as response:
        try:
            detail = json.load(response)
        except (OSError, HTTPException) as err:
            raise AivisHubError("offline", f"AivisHub: the detail of {uuid} broke off") from err
        except ValueError as err:
            raise AivisHubError("hub_error", f"AivisHub: the detail of {uuid} is not JSON") from err
    try:
        return _model(uuid, detail)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise AivisHubError("hub_error", f"AivisHub: the detail of {uuid} is unreadable") from err


def fetch_model(
    folder: str | Path,
    model: AivisModel,
    *,
    api: str | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """``model``'s AIVMX as ``<folder>/<uuid>.aivmx``, complete and verified; returns its path.
    A file of that version and size already there is kept (no transfer)."""
    store = ModelDir(Path(folder).expanduser())
    target = store.root / f"{model.uuid}{SUFFIX}"
    if _is_installed(target, model):
        return target
    try:
        with store.held():
            partial = store.blobs / f"{model.uuid}-{model.file.version}.partial"
            _transfer(model, partial, _api(api), progress)
            _verify(partial, model)
            os.replace(partial, target)
    except FetchError as err:  # the folder's failures (busy, disk full) are this voice's too
        if isinstance(err, AivisHubError):
            raise
        raise AivisHubError(err.reason, str(err)) from err
    return target


def forget_model(folder: str | Path, uuid: str) -> None:
    """Model ``uuid``'s file in ``folder`` deleted, and what a cut transfer of it left."""
    store = ModelDir(Path(folder).expanduser())
    (store.root / f"{uuid}{SUFFIX}").unlink(missing_ok=True)
    for partial in store.blobs.glob(f"{uuid}-*.partial"):
        partial.unlink(missing_ok=True)


def _is_installed(path: Path, model: AivisModel) -> bool:
    try:
        voice_file = read_aivmx(path) if path.stat().st_size == model.file.size else None
    except (OSError, BundleError):
        return False
    return voice_file is not None and voice_file.model_version == model.file.version


def installed_models(folder: str | Path) -> dict[str, str]:
    """{model uuid: version} of the AIVMX files in ``folder`` (their manifests; no network)."""
    found: dict[str, str] = {}
    for path in sorted(Path(folder).expanduser().glob(f"*{SUFFIX}")):
        try:
            voice_file = read_aivmx(path)
        except BundleError:
            continue  # the engine names the problem when it loads the folder
        found[voice_file.model_uuid] = voice_file.model_version
    return found


# --- the detail ----------------------------------------------------------------------------------
def _model(uuid: str, detail: Mapping[str, Any]) -> AivisModel:
    files = [f for f in detail["model_files"] if str(f["model_type"]).upper() == "AIVMX"]
    if not files:
        raise AivisHubError("unsupported_model", f"AivisHub offers no AIVMX file of {uuid}")
    newest = files[0]  # AivisHub lists the newest first
    architecture = str(newest["model_architecture"])
    name = str(detail["name"])
    if architecture != JP_EXTRA:
        raise AivisHubError(
            "unsupported_model", f"{name}: a {architecture} model; Yomiage speaks {JP_EXTRA} ones"
        )
    speakers = tuple(
        AivisSpeaker(str(s["name"]), tuple(str(style["name"]) for style in s["styles"]))
        for s in detail["speakers"]
        if JAPANESE & {str(language).lower() for language in s["supported_languages"]}
    )
    if not speakers:
        raise AivisHubError("no_japanese", f"{name}: none of its speakers speaks Japanese")
    user = detail.get("user") or {}
    return AivisModel(
        uuid=uuid,
        name=name,
        author=str(user.get("name") or user.get("handle") or ""),
        description=str(detail.get("description") or ""),
        speakers=speakers,
        file=AivisFile(
            version=str(newest["version"]),
            size=int(newest["file_size"]),
            checksum=str(newest["checksum"]).lower(),
            license_type=str(newest["license_type"]),
            license_text=str(newest.get("license_text") or ""),
        ),
    )


# --- the transfer --------------------------------------------------------------------------------
def _transfer(
    model: AivisModel, partial: Path, api: str, progress: ProgressCallback | None
) -> None:
    """Append the rest of the file to ``partial``; a partial of another length starts over."""
    size = model.file.size
    have = partial.stat().st_size if partial.is_file() else 0
    if have > size:
        partial.unlink()
        have = 0
    free = shutil.disk_usage(partial.parent).free
    if size - have > free:
        raise AivisHubError(
            "disk_full",
            f"{partial.parent}: {model.name} needs {megabytes(size - have)} more, "
            f"{megabytes(free)} free",
        )
    report = progress or (lambda _: None)
    report(Progress(have, size, None))
    if have < size:
        url = f"{api}/aivm-models/{model.uuid}/download?model_type=AIVMX"
        with _opened(url, model.uuid, {"Range": f"bytes={have}-"} if have else {}) as response:
            if have and response.status != 206:  # the Range was ignored: the whole file comes
                have = 0
            with partial.open("r+b" if have else "wb") as out:
                out.seek(have)
                out.truncate()
                _copy(response, out, partial, have, model, report)
    report(Progress(size, size, None))


def _copy(
    response: Any,
    out: IO[bytes],
    partial: Path,
    have: int,
    model: AivisModel,
    report: ProgressCallback,
) -> None:
    """The response's bytes after ``have`` into ``out``: a cut connection is ``interrupted``
    (the partial file stays for the next try), a write that fails is the disk's."""
    size, name = model.file.size, f"{model.uuid}{SUFFIX}"
    while have < size:
        try:
            # read1: what has arrived, so that a cut keeps every byte that came before it
            chunk = response.read1(min(_CHUNK, size - have))
        except (OSError, HTTPException) as err:
            raise _interrupted(model, have, err) from err
        if not chunk:
            raise _interrupted(model, have, "the connection closed")
        try:
            out.write(chunk)
        except OSError as err:
            raise storage_error(err, partial.parent) from err
        have += len(chunk)
        report(Progress(have, size, name))


def _interrupted(model: AivisModel, have: int, why: object) -> FetchError:
    return AivisHubError(
        "interrupted",
        f"{model.name}: the transfer broke after {megabytes(have)} of "
        f"{megabytes(model.file.size)} ({why}); the next try continues it",
    )


def _verify(partial: Path, model: AivisModel) -> None:
    """Size, checksum and manifest as AivisHub gives them; a file that fails is deleted."""
    size = partial.stat().st_size
    problem = ""
    if size != model.file.size:
        problem = f"{size} bytes where AivisHub lists {model.file.size}"
    elif _SHA256.fullmatch(model.file.checksum) and _sha256(partial) != model.file.checksum:
        problem = "its SHA-256 differs from AivisHub's checksum"
    else:
        try:
            if read_aivmx(partial).model_uuid != model.uuid:
                problem = "its manifest names another model"
        except BundleError as err:
            problem = f"not an AIVMX file ({err.problem})"
    if problem:
        partial.unlink()
        raise AivisHubError(
            "verification", f"{model.name} {model.file.version}: {problem}; deleted, try again"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --- HTTP and its failures -----------------------------------------------------------------------
def _api(api: str | None) -> str:
    return (api or os.environ.get(API_VARIABLE) or API_ROOT).rstrip("/")


@contextmanager
def _opened(url: str, uuid: str, headers: Mapping[str, str] | None = None) -> Iterator[Any]:
    """The response to a GET of ``url`` (redirects followed); AivisHub's refusals and an
    unreachable AivisHub as ``FetchError``s."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT, **(headers or {})})
    try:
        response = urllib.request.urlopen(request, timeout=_TIMEOUT_S)
    except urllib.error.HTTPError as err:
        raise _status_error(uuid, err.code) from err
    except (urllib.error.URLError, OSError, HTTPException) as err:
        raise AivisHubError(
            "offline", f"cannot reach AivisHub ({getattr(err, 'reason', err)})"
        ) from err
    with response:
        yield response


def _status_error(uuid: str, status: int) -> FetchError:
    if status == 404:
        return AivisHubError("unknown_model", f"AivisHub has no published model {uuid}")
    if status == 403:
        return AivisHubError("private_model", f"AivisHub model {uuid} is private or withdrawn")
    if status >= 500:
        return AivisHubError("hub_down", f"AivisHub is unavailable (HTTP {status}); try later")
    return AivisHubError("hub_error", f"AivisHub answered HTTP {status} for {uuid}")
