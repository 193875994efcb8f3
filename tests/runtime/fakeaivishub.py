"""A fake AivisHub on 127.0.0.1: the part of its API that AivisSpeech Engine uses for models
(voicevox_engine/utility/aivishub_client.py, aivm_manager.py), serving real AIVMX files::

    GET /v1/aivm-models/{uuid}                           the detail (AivmModelResponse's fields)
    GET /v1/aivm-models/{uuid}/download?model_type=AIVMX 302 to the file
    GET /files/{uuid}/{version}.aivmx                     the file, ``Range: bytes=N-`` -> 206

The detail is made from each file's own manifest (name, speakers, styles, languages) plus what
AivisHub adds (author, licence type and text, size, SHA-256 checksum), the newest file first.
Faults for tests: ``answer`` makes a model's routes answer a status (403 private, 404, 503),
``cut_next`` sends part of the next file and resets the connection, ``corrupt`` flips a byte,
``faults.ignore_ranges`` sends whole files whatever the Range.
Every request's path is logged in ``requests``, each file GET's Range in ``ranges``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from custom_components.yomiage.engine.onnx import wire

from .http_server import FileHandler, ServedDouble

MANIFEST_KEY = "aivm_manifest"
LICENSE_TEXT = "ACML 1.0: you may use this voice's speech, crediting it; no redistribution."


def manifest_of(aivmx: bytes) -> dict[str, Any]:
    """The AIVM manifest an AIVMX file holds in its ONNX metadata."""
    model_fields, _ = wire.model_graph(memoryview(aivmx))
    for item in model_fields:
        if item.number == wire.MODEL_METADATA_PROPS:
            entry = {
                p.number: wire.as_text(p.value) for p in wire.fields(wire.as_message(item.value))
            }
            if entry.get(wire.ENTRY_KEY) == MANIFEST_KEY:
                manifest: dict[str, Any] = json.loads(entry[wire.ENTRY_VALUE])
                return manifest
    raise ValueError("no AIVM manifest")


def with_manifest(aivmx: bytes, **changes: Any) -> bytes:
    """``aivmx`` with its manifest's fields changed (a newer ``version``, other ``speakers``):
    what a voice's author uploads as the next version."""
    model_fields, _ = wire.model_graph(memoryview(aivmx))
    manifest = {**manifest_of(aivmx), **changes}
    out = []
    for item in model_fields:
        entry = (
            {p.number: wire.as_text(p.value) for p in wire.fields(wire.as_message(item.value))}
            if item.number == wire.MODEL_METADATA_PROPS
            else {}
        )
        if entry.get(wire.ENTRY_KEY) == MANIFEST_KEY:
            body = wire.text_field(wire.ENTRY_KEY, MANIFEST_KEY)
            body += wire.text_field(wire.ENTRY_VALUE, json.dumps(manifest, ensure_ascii=False))
            out.append(wire.bytes_field(wire.MODEL_METADATA_PROPS, body))
        else:
            out.append(bytes(item.raw))
    return b"".join(out)


@dataclass
class FakeModel:
    """One model on the fake AivisHub: its AIVMX files, oldest first."""

    files: list[bytes]
    author: str = "Yomiage tests"
    license_type: str = "ACML 1.0"
    architecture: str = "Style-Bert-VITS2 (JP-Extra)"

    @property
    def uuid(self) -> str:
        return str(manifest_of(self.files[-1])["uuid"]).lower()

    def file(self, version: str) -> bytes | None:
        return next((f for f in self.files if manifest_of(f)["version"] == version), None)

    def detail(self) -> dict[str, Any]:
        """The model's detail, shaped as AivisSpeech Engine's ``AivmModelResponse``."""
        newest = manifest_of(self.files[-1])
        stamp = "2026-11-01T00:00:00+09:00"
        return {
            "aivm_model_uuid": self.uuid,
            "user": {
                "handle": "yomiage-tests",
                "name": self.author,
                "description": "",
                "icon_url": "https://example.invalid/icon.png",
                "account_type": "User",
                "account_status": "Active",
                "social_links": [],
            },
            "name": newest["name"],
            "description": newest.get("description") or "",
            "detailed_description": "",
            "category": "GeneralPurpose",
            "voice_timbre": "YouthfulFemale",
            "visibility": "Public",
            "is_tag_locked": False,
            "total_download_count": 0,
            "model_files": [self._model_file(f, stamp) for f in reversed(self.files)],
            "tags": [],
            "like_count": 0,
            "is_liked": False,
            "speakers": [_speaker(s) for s in newest["speakers"]],
            "created_at": stamp,
            "updated_at": stamp,
        }

    def _model_file(self, aivmx: bytes, stamp: str) -> dict[str, Any]:
        manifest = manifest_of(aivmx)
        return {
            "aivm_model_uuid": self.uuid,
            "manifest_version": manifest.get("manifest_version", "1.0"),
            "name": manifest["name"],
            "description": manifest.get("description") or "",
            "creators": manifest.get("creators") or [],
            "license_type": self.license_type,
            "license_text": LICENSE_TEXT,
            "model_type": "AIVMX",
            "model_architecture": self.architecture,
            "model_format": "ONNX",
            "training_epochs": None,
            "training_steps": None,
            "version": manifest["version"],
            "file_size": len(aivmx),
            "checksum": hashlib.sha256(aivmx).hexdigest(),
            "download_count": 0,
            "created_at": stamp,
            "updated_at": stamp,
        }


def _speaker(speaker: dict[str, Any]) -> dict[str, Any]:
    return {
        "aivm_speaker_uuid": speaker["uuid"],
        "name": speaker["name"],
        "icon_url": "https://example.invalid/speaker.png",
        "supported_languages": speaker.get("supported_languages", ["ja"]),
        "local_id": speaker["local_id"],
        "styles": [
            {
                "name": style["name"],
                "icon_url": None,
                "local_id": style["local_id"],
                "voice_samples": [],
            }
            for style in speaker["styles"]
        ],
    }


@dataclass
class _Faults:
    answers: dict[str, int] = field(default_factory=dict)  # uuid -> HTTP status of its routes
    cuts: dict[str, int] = field(default_factory=dict)  # uuid -> bytes the next file GET sends
    corrupt: set[str] = field(default_factory=set)
    ignore_ranges: bool = False  # a server (or proxy) that always sends the whole file


class FakeAivisHub(ServedDouble):
    """``with FakeAivisHub([FakeModel([aivmx])]) as hub: ... hub.api ...``"""

    def __init__(self, models: list[FakeModel], host: str = "127.0.0.1") -> None:
        self.models = {model.uuid: model for model in models}
        self.requests: list[str] = []
        self.ranges: list[str | None] = []  # each file GET's Range header
        self.faults = _Faults()
        super().__init__(host, _handler_for(self))

    @property
    def api(self) -> str:
        """The API root to give the engine (``YOMIAGE_AIVISHUB_API``)."""
        return f"{self.url}/v1"

    def add(self, model: FakeModel) -> None:
        self.models[model.uuid] = model

    def answer(self, uuid: str, status: int | None) -> None:
        """Every route of model ``uuid`` answers ``status`` (None: as usual again)."""
        if status is None:
            self.faults.answers.pop(uuid, None)
        else:
            self.faults.answers[uuid] = status

    def cut_next(self, uuid: str, after_bytes: int) -> None:
        self.faults.cuts[uuid] = after_bytes

    def corrupt(self, uuid: str) -> None:
        self.faults.corrupt.add(uuid)

    def file_gets(self) -> list[str]:
        return [path for path in self.requests if path.startswith("/files/")]


def _handler_for(hub: FakeAivisHub) -> type[BaseHTTPRequestHandler]:
    class Handler(_AivisHubHandler):
        pass

    Handler.hub = hub
    return Handler


class _AivisHubHandler(FileHandler):
    hub: FakeAivisHub

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.hub.requests.append(self.path)
        parts = url.path.strip("/").split("/")
        if parts[:2] == ["v1", "aivm-models"] and len(parts) in (3, 4):
            model = self._model(parts[2])
            if model is None:
                return
            if len(parts) == 3:
                self.send_json(model.detail())
            elif parts[3] == "download" and "model_type=AIVMX" in url.query:
                version = manifest_of(model.files[-1])["version"]
                self._redirect(f"/files/{model.uuid}/{version}.aivmx")
            else:
                self.send_json({"detail": "Not Found"}, 404)
        elif parts[0] == "files" and len(parts) == 3:
            model = self._model(parts[1])
            data = model.file(parts[2].removesuffix(".aivmx")) if model else None
            if model is not None and data is None:
                self.send_json({"detail": "Not Found"}, 404)
            elif model is not None and data is not None:
                self._file(model.uuid, data)
        else:
            self.send_json({"detail": "Not Found"}, 404)

    def _model(self, uuid: str) -> FakeModel | None:
        status = self.hub.faults.answers.get(uuid)
        model = self.hub.models.get(uuid)
        if status is None and model is None:
            status = 404
        if status is not None:
            self.send_json({"detail": f"HTTP {status}"}, status)
            return None
        return model

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _file(self, uuid: str, data: bytes) -> None:
        self.hub.ranges.append(self.headers.get("Range"))
        if uuid in self.hub.faults.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0 if self.hub.faults.ignore_ranges else self.range_start()
        self.send_response(206 if start else 200)
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        cut = self.hub.faults.cuts.pop(uuid, None)
        self.wfile.write(data[start:] if cut is None else data[start : start + cut])
        self.wfile.flush()
        if cut is not None:
            self.reset_connection()
