"""Where the add-on's files are, its run script loaded as a module, a stand-in for the
Supervisor's discovery API, and waiting for the add-on to start."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
ADDON = REPO_ROOT / "addon"
RUN_SCRIPT = ADDON / "run.py"


def load_run_script() -> ModuleType:
    """addon/run.py is a script copied into the image, not a package module: load it by path."""
    spec = importlib.util.spec_from_file_location("yomiage_addon_run", RUN_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


class FakeSupervisor:
    """Records POSTs and answers like the Supervisor's discovery API."""

    def __init__(self, status: int = 200, reply: dict[str, Any] | None = None) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        answer = json.dumps(reply or {"result": "ok", "data": {"uuid": "5ab8"}}).encode()
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                requests.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_port}"
        self._thread = threading.Thread(target=self._http.serve_forever)

    def __enter__(self) -> FakeSupervisor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._thread.join()
        self._http.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
