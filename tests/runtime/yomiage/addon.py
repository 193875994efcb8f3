"""Where the add-on's files are, its run script loaded as a module or run as the add-on (for the
Supervisor double), and waiting for the add-on to start."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
ADDON = REPO_ROOT / "addon"
RUN_SCRIPT = ADDON / "run.py"


@functools.cache
def load_run_script() -> ModuleType:
    """addon/run.py is a script copied into the image, not a package module: load it by path."""
    spec = importlib.util.spec_from_file_location("yomiage_addon_run", RUN_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


@dataclass
class RunScriptAddon:
    """The add-on as a process of its run script (what the image runs), its /data a folder: the
    Supervisor double's ``AddonRunner`` on either Home Assistant stack (no Docker there).
    ``environment`` adds to what the Supervisor gives (the Hub's address, in tests)."""

    data: Path
    environment: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=lambda: free_port())
    _process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.data.parent / f"{self.data.name}.log"

    def start(self, options: dict[str, Any], environment: dict[str, str]) -> None:
        self.stop()
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "options.json").write_text(json.dumps(options))  # as the Supervisor does
        env = {
            **os.environ,
            **self.environment,
            **environment,
            "YOMIAGE_ADDON_DATA": str(self.data),
            "YOMIAGE_PORT": str(self.port),
            "YOMIAGE_ANNOUNCE_HOST": "127.0.0.1",  # the add-on network's name for it
        }
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, str(RUN_SCRIPT)], env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            self._process.wait(60)

    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def healthy(self) -> bool:
        """The image's health check (``run.py healthcheck``): the server answers ``describe``."""
        answers: bool = load_run_script().answers_describe(self.port)
        return answers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
