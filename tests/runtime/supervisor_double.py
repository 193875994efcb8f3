"""A stand-in for Home Assistant OS's Supervisor: an HTTP server on 127.0.0.1 that speaks the part
of its API Home Assistant's ``aiohasupervisor`` client (0.3 in Home Assistant 2025.4, 0.6 in
2026.10) and our add-on use, for one add-on repository: ours, its add-on as addon/config.yaml
describes it.

Read from the Supervisor's ``supervisor/api/`` (store, apps, discovery; the v1 routes under
``/`` that both clients call, ``/v2`` being the "apps" names)::

    GET    /store/repositories                    -> [{slug, name, source, url, maintainer}]
    POST   /store/repositories {repository}        adds it (slug: sha1(url.lower())[:8])
    DELETE /store/repositories/{slug}
    GET    /store/addons/{slug}                   -> the store's view (installed, available…)
    POST   /store/addons/{slug}/install
    GET    /addons/{slug}/info                    -> the installed add-on (state, options…)
    POST   /addons/{slug}/options {options}        checked against config.yaml's schema
    POST   /addons/{slug}/start | restart | stop | uninstall
    POST   /discovery {service, config}            from the add-on: a service its config lists
    GET    /discovery                             -> messages of started add-ons ("addon" key)

Answers are ``{"result": "ok", "data": …}`` or ``{"result": "error", "message": …}`` (400; 404
for an add-on the store does not know). As the Supervisor does, an add-on with a health check
(ours) is ``startup`` until it is healthy (its server answers), then ``started``; ``start``
(and ``restart``: a stop, then that start) answers once it is healthy (at most 120 s);
discovery messages are kept until the uninstall and listed only while the add-on is
``started``. ``refuse`` makes one step fail as the Supervisor
would (a repository it cannot clone, an install that fails); ``lose_start_answer`` starts the
add-on but answers with an error, as a client that stopped waiting sees it. A started add-on is
a real process (``AddonRunner``): our run script, or our image under Docker (tests/addon_image).
Starting and stopping it runs outside the lock that guards the double's state, one at a time: the
Supervisor answers other calls (the add-on announcing itself) while it waits for a container.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

import yaml

from .http_server import ClosingHTTPServer

REPO_ROOT = Path(__file__).resolve().parents[2]
ADDON_CONFIG = REPO_ROOT / "addon" / "config.yaml"
# As the Supervisor names them (supervisor/store/utils.py), from repository.yaml and config.yaml.
REPOSITORY_URL = yaml.safe_load((REPO_ROOT / "repository.yaml").read_text())["url"]
REPOSITORY_SLUG = hashlib.sha1(REPOSITORY_URL.lower().encode()).hexdigest()[:8]
ADDON_SLUG = f"{REPOSITORY_SLUG}_{yaml.safe_load(ADDON_CONFIG.read_text())['slug']}"
START_WAIT_S = 120.0  # how long the Supervisor's start waits for a healthy add-on
ADDON_TOKEN = "addon-token"  # the SUPERVISOR_TOKEN the add-on gets
CORE_REPOSITORY = {
    "slug": "core",
    "name": "Official add-ons",
    "source": "core",
    "url": "https://home-assistant.io/addons",
    "maintainer": "Home Assistant",
}
# Steps ``refuse`` can make fail.
STEPS = ("add_repository", "install", "options", "start", "restart")


class AddonRunner(Protocol):
    """Runs the add-on as the Supervisor's Docker does: ``start`` with its options and the
    environment the Supervisor gives it; ``exit_code`` None while it runs; ``healthy`` as its
    health check says."""

    def start(self, options: dict[str, Any], environment: dict[str, str]) -> None: ...

    def stop(self) -> None: ...

    def exit_code(self) -> int | None: ...

    def healthy(self) -> bool: ...


@dataclass
class Call:
    method: str
    path: str
    body: Any
    authorization: str | None  # the bearer token: Home Assistant's, or the add-on's


class NoAddon:
    """A Supervisor whose add-on is never started (the run script's own tests)."""

    def start(self, options: dict[str, Any], environment: dict[str, str]) -> None:
        raise AssertionError("this double starts no add-on")

    def stop(self) -> None:
        pass

    def exit_code(self) -> int | None:
        return None

    def healthy(self) -> bool:
        return False


class StuckAddon(NoAddon):
    """An add-on that starts and never gets healthy (a download that hangs)."""

    def start(self, options: dict[str, Any], environment: dict[str, str]) -> None:
        pass


@dataclass
class SupervisorDouble:
    runner: AddonRunner = field(default_factory=NoAddon)
    repository_added: bool = False
    installed: bool = False
    refuse: dict[str, str] = field(default_factory=dict)  # step -> the Supervisor's message
    lose_start_answer: bool = False
    start_wait_s: float = START_WAIT_S
    # Set: the install waits for it (the Supervisor still pulling while the user walks away).
    hold_install: threading.Event | None = None
    calls: list[Call] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    discovery: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config: dict[str, Any] = yaml.safe_load(ADDON_CONFIG.read_text())
        if self.installed:
            self.repository_added = True
            self.options = dict(self.config["options"])
        self._lock = threading.Lock()  # the state; held only to read or change it
        self._runner_lock = threading.Lock()  # one start or stop of the add-on at a time
        self._runner_steps: list[Callable[[], None]] = []  # queued under _lock, run after it
        self._http = ClosingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._http.server_port}"
        self.host = f"127.0.0.1:{self._http.server_port}"  # what Home Assistant's SUPERVISOR holds
        self._thread = threading.Thread(target=self._http.serve_forever, name="supervisor-double")

    def __enter__(self) -> SupervisorDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.runner.stop()  # a start waiting for the add-on's health answers then
        self._http.shutdown()
        self._thread.join()
        self._http.close_connections()
        self._http.server_close()  # joins the request threads

    # -- what tests look at ----------------------------------------------------------------------
    def steps(self) -> list[str]:
        """The changing calls, in order, as ``METHOD path``."""
        return [f"{c.method} {c.path}" for c in self.calls if c.method != "GET"]

    @property
    def state(self) -> str:
        """The add-on's state as the Supervisor reports it."""
        if not self.started:
            return "stopped"
        code = self.runner.exit_code()
        if code is None:
            return "started" if self.runner.healthy() else "startup"
        return "stopped" if code == 0 else "error"

    # -- the API ---------------------------------------------------------------------------------
    def answer(
        self, method: str, path: str, body: Any, authorization: str | None = None
    ) -> tuple[int, Any]:
        with self._lock:
            self.calls.append(Call(method, path, body, authorization))
            for pattern, route in self._routes():
                if (match := re.fullmatch(pattern, f"{method} {path}")) is not None:
                    answer = route(body, *match.groups())
                    break
            else:
                return 404, f"no route {method} {path}"
            runner_steps, self._runner_steps = self._runner_steps, []
        with self._runner_lock:
            for step in runner_steps:
                step()
        starts = {f"/addons/{ADDON_SLUG}/start", f"/addons/{ADDON_SLUG}/restart"}
        if method == "POST" and path in starts and answer[0] == 200:
            return self._wait_until_healthy()  # outside the lock: the add-on announces meanwhile
        return answer

    def _wait_until_healthy(self) -> tuple[int, Any]:
        deadline = time.monotonic() + self.start_wait_s
        while self.state == "startup" and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.lose_start_answer:
            return 500, "the answer to start was lost"
        return 200, {}

    def _routes(self) -> list[tuple[str, Callable[..., tuple[int, Any]]]]:
        return [
            ("GET /store/repositories", self._repositories),
            ("POST /store/repositories", self._add_repository),
            ("DELETE /store/repositories/([^/]+)", self._remove_repository),
            ("GET /store/addons/([^/]+)", self._store_addon),
            ("POST /store/addons/([^/]+)/install", self._install),
            ("GET /addons/([^/]+)/info", self._addon_info),
            ("POST /addons/([^/]+)/options", self._set_options),
            ("POST /addons/([^/]+)/start", self._start),
            ("POST /addons/([^/]+)/restart", self._restart),
            ("POST /addons/([^/]+)/stop", self._stop),
            ("POST /addons/([^/]+)/uninstall", self._uninstall),
            ("GET /discovery", self._discovery_list),
            ("POST /discovery", self._announce),
        ]

    def _refused(self, step: str) -> tuple[int, Any] | None:
        return (400, self.refuse[step]) if step in self.refuse else None

    def _repositories(self, body: Any) -> tuple[int, Any]:
        ours = {
            "slug": REPOSITORY_SLUG,
            "name": "Yomiage add-ons",
            "source": REPOSITORY_URL,
            "url": REPOSITORY_URL,
            "maintainer": "Yomiage contributors",
        }
        return 200, [CORE_REPOSITORY, *([ours] if self.repository_added else [])]

    def _add_repository(self, body: Any) -> tuple[int, Any]:
        if refused := self._refused("add_repository"):
            return refused
        if body.get("repository", "").lower() != REPOSITORY_URL.lower():
            return 400, f"{body.get('repository')} is not a valid app repository"
        if self.repository_added:
            return 400, f"Can't add {REPOSITORY_URL}, already in the store"
        self.repository_added = True
        return 200, {}

    def _remove_repository(self, body: Any, slug: str) -> tuple[int, Any]:
        if slug != REPOSITORY_SLUG or not self.repository_added:
            return 404, f"Repository {slug} does not exist in the store"
        if self.installed:
            return 400, "Can't remove repository: an app from it is installed"
        self.repository_added = False
        return 200, {}

    def _known(self, slug: str) -> tuple[int, Any] | None:
        if slug != ADDON_SLUG or not self.repository_added:
            return 404, f"App {slug} does not exist in the store"
        return None

    def _store_addon(self, body: Any, slug: str) -> tuple[int, Any]:
        return self._known(slug) or (200, self._store_view())

    def _install(self, body: Any, slug: str) -> tuple[int, Any]:
        if unknown := self._known(slug):
            return unknown
        if refused := self._refused("install"):
            return refused
        if self.hold_install is not None:
            self.hold_install.wait(60)
        self.installed = True
        self.options = dict(self.config["options"])
        return 200, {}

    def _installed(self, slug: str) -> tuple[int, Any] | None:
        if unknown := self._known(slug):
            return unknown
        return None if self.installed else (400, f"App {slug} is not installed")

    def _addon_info(self, body: Any, slug: str) -> tuple[int, Any]:
        return self._installed(slug) or (200, self._installed_view())

    def _set_options(self, body: Any, slug: str) -> tuple[int, Any]:
        if problem := self._installed(slug) or self._refused("options"):
            return problem
        options = body.get("options") or {}
        unknown = sorted(set(options) - set(self.config["schema"]))
        if unknown:
            return 400, f"Unknown option(s) {', '.join(unknown)} for {self.config['name']}"
        self.options = options
        return 200, {}

    def _start(self, body: Any, slug: str, step: str = "start") -> tuple[int, Any]:
        if problem := self._installed(slug) or self._refused(step):
            return problem
        environment = {"SUPERVISOR_TOKEN": ADDON_TOKEN, "YOMIAGE_SUPERVISOR_URL": self.url}
        self._runner_steps.append(functools.partial(self.runner.start, self.options, environment))
        self.started = True
        return 200, {}

    def _restart(self, body: Any, slug: str) -> tuple[int, Any]:
        """The runner's start stops what runs first, as the Supervisor's stop then start."""
        return self._start(body, slug, "restart")

    def _stop(self, body: Any, slug: str) -> tuple[int, Any]:
        if problem := self._installed(slug):
            return problem
        self._runner_steps.append(self.runner.stop)
        self.started = False
        return 200, {}

    def _uninstall(self, body: Any, slug: str) -> tuple[int, Any]:
        if problem := self._installed(slug):
            return problem
        self._runner_steps.append(self.runner.stop)
        self.started = self.installed = False
        self.discovery.clear()
        return 200, {}

    def _announce(self, body: Any) -> tuple[int, Any]:
        if body.get("service") not in self.config.get("discovery", []):
            return 400, "Apps must list services they provide via discovery in their config!"
        for message in self.discovery:  # one message per service: a new start updates it
            if message["service"] == body["service"]:
                message["config"] = body.get("config") or {}
                return 200, {"uuid": message["uuid"]}
        message = {
            "addon": ADDON_SLUG,
            "service": body["service"],
            "uuid": uuid.uuid4().hex,
            "config": body.get("config") or {},
        }
        self.discovery.append(message)
        return 200, {"uuid": message["uuid"]}

    def _discovery_list(self, body: Any) -> tuple[int, Any]:
        started = self.state == "started"
        services = {name: [ADDON_SLUG] for name in self.config.get("discovery", [])}
        return 200, {"discovery": list(self.discovery) if started else [], "services": services}

    # -- what the Supervisor says of the add-on --------------------------------------------------
    def _store_view(self) -> dict[str, Any]:
        config = self.config
        return {
            "advanced": False,
            "apparmor": "default",
            "arch": config["arch"],
            "auth_api": False,
            "available": True,
            "build": "image" not in config,
            "description": config["description"],
            "detached": False,
            "docker_api": False,
            "documentation": True,
            "full_access": False,
            "homeassistant": None,
            "homeassistant_api": False,
            "host_network": bool(config.get("host_network", False)),
            "host_pid": False,
            "icon": True,
            "ingress": False,
            "installed": self.installed,
            "logo": True,
            "long_description": None,
            "name": config["name"],
            "rating": 6,
            "repository": REPOSITORY_SLUG,
            "signed": False,
            "slug": ADDON_SLUG,
            "stage": "stable",
            "hassio_api": False,
            "hassio_role": "default",
            "update_available": False,
            "url": config.get("url"),
            "version": config["version"] if self.installed else None,
            "version_latest": config["version"],
        }

    def _installed_view(self) -> dict[str, Any]:
        config = self.config
        return {
            **self._store_view(),
            "audio": False,
            "audio_input": None,
            "audio_output": None,
            "auto_update": False,
            "boot": config.get("boot", "auto"),
            "boot_config": config.get("boot", "auto"),
            "changelog": True,
            "devices": [],
            "devicetree": False,
            "discovery": config.get("discovery", []),
            "dns": [],
            "gpio": False,
            "host_dbus": False,
            "host_ipc": False,
            "host_uts": False,
            "hostname": ADDON_SLUG.replace("_", "-"),
            "ingress_entry": None,
            "ingress_panel": None,
            "ingress_port": None,
            "ingress_url": None,
            "ip_address": "172.30.33.5",
            "kernel_modules": False,
            "machine": [],
            "network": config.get("ports"),
            "network_description": config.get("ports_description"),
            "options": self.options,
            "privileged": [],
            "protected": True,
            "schema": [],
            "services": [],
            "startup": config.get("startup", "application"),
            "state": self.state,
            "stdin": False,
            "system_managed": False,
            "system_managed_config_entry": None,
            "translations": {},
            "uart": False,
            "udev": False,
            "usb": False,
            "video": False,
            "watchdog": False,
            "webui": None,
        }


def _handler(double: SupervisorDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            status, data = double.answer(
                self.command, self.path.split("?")[0], body, self.headers.get("Authorization")
            )
            if status == 200:
                reply = {"result": "ok", "data": data}
            else:
                reply = {"result": "error", "message": data}
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

    return Handler
