"""A real ``hass -c DIR`` of the newest Home Assistant release, run as a user runs it, and the
REST calls its frontend makes: onboarding, config flows, tts_get_url, services.

Home Assistant runs in the .ha-current rootfs (the only Python >= 3.14.2 here) from its own venv,
/opt/newest-ha, installed by scripts/setup from requirements/newest-ha.txt. This side only speaks
HTTP to it on 127.0.0.1, as a browser would.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
NEWEST_VENV = "/opt/newest-ha"  # inside .ha-current (scripts/setup)
LOCK = REPO_ROOT / "requirements" / "newest-ha.txt"
TINY_BUNDLE = REPO_ROOT / "tests" / "fixtures" / "bundle-tiny"
RESTART_EXIT_CODE = 100  # hass exits with it to be restarted (by systemd, Docker: here, by us)
START_TIMEOUT_S = 180


def pinned_version() -> str:
    for line in LOCK.read_text().splitlines():
        if line.startswith("homeassistant=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{LOCK} pins no homeassistant")


@dataclass
class Hass:
    """One configuration folder and the ``hass`` process serving it (started again on restart,
    as systemd or Docker would)."""

    config_dir: Path
    port: int
    allow_installs: bool = False  # scripts/bump-newest-ha: let Home Assistant reach the registry
    process: subprocess.Popen[bytes] | None = None
    token: str = ""
    tokens: dict[str, Any] = field(default_factory=dict)  # the owner's, as the frontend keeps them
    starts: int = field(default=0)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        # Without the registry's certificate Home Assistant cannot install anything: every
        # package it asks for must already be in the locked venv.
        cert = "SSL_CERT_FILE=/etc/host-ca.crt " if self.allow_installs else ""
        # The port as a fresh install takes it (configuration.yaml's http: would be a change the
        # frontend asks the owner to confirm, in a dialog over every page).
        command = f'{cert}SETUP_PORT={self.port} exec {NEWEST_VENV}/bin/hass -c "$0"'
        log = (self.config_dir / f"stdout-{self.starts}.log").open("wb")
        self.process = subprocess.Popen(
            [str(REPO_ROOT / "scripts" / "chroot"), ".ha-current", "--setup",
             "sh", "-c", command, str(self.config_dir)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"hass exited: {self.log()[-4000:]}"
            try:
                self.request("GET", "/api/onboarding", auth=False)
                return
            except urllib.error.HTTPError:
                return  # answering (HTTPError before URLError: it is one)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        raise AssertionError(f"hass did not answer in {START_TIMEOUT_S} s: {self.log()[-4000:]}")

    def wait_running(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until Home Assistant says it has started (the API answers long before: a restart
        asked for during the start is never carried out)."""
        deadline = time.monotonic() + timeout_s
        while self.request("GET", "/api/config")["state"] != "RUNNING":
            assert time.monotonic() < deadline, "hass did not finish starting"
            time.sleep(0.5)

    def wait_exit(self, timeout_s: float = 120) -> int:
        assert self.process is not None
        return self.process.wait(timeout_s)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        """Every start's log (Home Assistant keeps the previous one as .log.1)."""
        names = ("home-assistant.log.1", "home-assistant.log")
        paths = [self.config_dir / name for name in names]
        return "".join(path.read_text(errors="replace") for path in paths if path.exists())

    # -- HTTP --------------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        form: dict[str, str] | None = None,
        auth: bool = True,
        timeout_s: float = 120,
    ) -> Any:
        data, headers = None, {}
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        url = path if path.startswith("http") else self.base_url + path
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=timeout_s) as response:
            raw = response.read()
            kind = response.headers.get_content_type()
        return json.loads(raw) if kind == "application/json" else raw

    @property
    def client_id(self) -> str:
        return self.base_url + "/"

    def onboard(self) -> None:
        """The onboarding pages' calls: owner account, login, location, analytics, done."""
        client_id = self.client_id
        user = self.request(
            "POST",
            "/api/onboarding/users",
            {"client_id": client_id, "name": "Test", "username": "test",
             "password": "test-pass-123", "language": "ja"},
            auth=False,
        )  # fmt: skip
        tokens = self.request(
            "POST",
            "/auth/token",
            form={"grant_type": "authorization_code", "code": user["auth_code"],
                  "client_id": client_id},
            auth=False,
        )  # fmt: skip
        self.tokens, self.token = tokens, tokens["access_token"]
        self.request("POST", "/api/onboarding/core_config", {})
        self.request("POST", "/api/onboarding/analytics", {})
        self.request(
            "POST", "/api/onboarding/integration",
            {"client_id": client_id, "redirect_uri": client_id + "?auth_callback=1"},
        )  # fmt: skip

    def flow_step(self, flow_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One step submitted; a progress step is waited out as the frontend does."""
        result: dict[str, Any] = self.request(
            "POST", f"/api/config/config_entries/flow/{flow_id}", body
        )
        deadline = time.monotonic() + 600
        while result["type"] == "progress" and time.monotonic() < deadline:
            time.sleep(1)
            result = self.request("GET", f"/api/config/config_entries/flow/{flow_id}")
        return result


def our_problems(log: str) -> list[str]:
    """Errors logged by our code, and blocking calls Home Assistant detected in it."""
    problems = []
    for line in log.splitlines():
        blocking = "Detected blocking call" in line and "custom_components/yomiage" in line
        if blocking or re.search(r"\b(ERROR|CRITICAL)\b.*\[custom_components\.yomiage", line):
            problems.append(line)
    return problems
