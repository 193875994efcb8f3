#!/usr/bin/env python3
"""Start Yomiage's Wyoming server: the Home Assistant add-on, or the same image under Docker.

Two ways in, one server:

- **Add-on** (``/data/options.json`` exists: the Supervisor writes it). The options come from
  there; once the server answers, it is announced through the Supervisor's discovery API as the
  ``yomiage`` service (``{"host", "port"}``), which Home Assistant hands to Yomiage's config
  flow (``async_step_hassio``).
- **Container** (no options file): the same options as arguments or ``YOMIAGE_*`` environment
  variables (``run.py --help``); ``--zeroconf`` announces the server on the local network, where
  Yomiage's flow finds it (a host network), or Home Assistant adds it by address.

Voices: the official Hub repository or another repo id → ``yomiage fetch`` into
``/data/voices/<owner>--<name>`` (only new or changed files are downloaded; when the Hub cannot
be reached, voices already there are used); or a local bundle folder (the add-on: under /share or
/media). AivisHub models (page URLs or UUIDs) join the downloaded voices: ``yomiage fetch`` of
those not there yet into the same folder (``/data/voices/aivishub`` where they are all the voices,
with the official language model beside it), served with ``--aivishub`` so that Home Assistant
installs their updates; a model taken off the list is deleted from that folder at the next start
(else the server would go on speaking it). ``run.py healthcheck`` exits 0 when the
server answers ``describe`` (the image's HEALTHCHECK). Standard library only.
YOMIAGE_ADDON_DATA, YOMIAGE_SUPERVISOR_URL and YOMIAGE_ANNOUNCE_HOST move the data folder, the
Supervisor and the announced host (tests; the add-on uses the defaults).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

_LOGGER = logging.getLogger("yomiage-addon")

OFFICIAL_REPO = "lemondouble/hayakoe"
SOURCES = ("official", "hub", "local", "aivishub")
DEFAULT_PORT = 10200
# Waits before each new try of a failed announcement (the Supervisor restarting, say); after
# the last one it is given up.
ANNOUNCE_RETRIES_S = (2.0, 5.0, 15.0, 30.0, 60.0)
# The service the add-on announces (config.yaml's discovery): Home Assistant starts the config
# flow of the integration of that name, Yomiage's own (every option, yomiage.prepare), not the
# generic Wyoming one, so the server is set up once.
DISCOVERY_SERVICE = "yomiage"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A model taken off aivishub_models is forgotten as the integration forgets one, by the engine's
# own functions (its file, what a cut transfer of it left, the graphs prepared from it): in the
# image's Python, since run.py imports nothing of the engine.
_FORGET_MODELS = """
import sys
from pathlib import Path
from yomiage_engine.hub.aivishub import forget_model
from yomiage_engine.onnx.graph_cache import drop_source
folder, prepared_graphs, *uuids = sys.argv[1:]
for uuid in uuids:
    drop_source(Path(folder, uuid + ".aivmx"), Path(prepared_graphs))
    forget_model(folder, uuid)
"""
_LOCAL_ROOTS = (Path("/share"), Path("/media"))


class AddonError(Exception):
    """A problem the user can fix in the add-on's configuration; the message says how."""


# -- options ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AddonOptions:
    voices: str  # official | hub | local
    hub_repo: str
    local_folder: str
    speakers: tuple[str, ...]
    aivishub_models: tuple[str, ...]  # page URLs or UUIDs: beside the downloaded voices
    threads: int | None
    volume: float  # dB over the loudness target, for requests that do not set it
    pitch: float  # f0 multiplier, for requests that do not set it
    intonation: float  # f0 excursions around a sentence's mean (0 flat), likewise
    normalize: bool
    smooth_start: bool
    debug_logging: bool
    zeroconf: bool = False  # announce on the local network (Container; the add-on uses discovery)

    @classmethod
    def load(cls, path: Path) -> AddonOptions:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AddonError(f"{path}: missing (the Supervisor writes the options there)") from None
        except (OSError, ValueError) as err:
            raise AddonError(f"{path}: cannot read the options ({err})") from None
        if not isinstance(raw, dict):
            raise AddonError(f"{path}: the options must be a JSON object")
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> AddonOptions:
        voices = raw.get("voices", "official")
        if voices not in SOURCES:
            raise AddonError(f"voices must be one of {', '.join(SOURCES)}, not {voices!r}")
        threads = raw.get("threads")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise AddonError(f"threads must be a whole number of at least 1, not {threads!r}")
        volume = _number(raw, "volume", 0.0, -20, 10, "a number of dB")
        pitch = _number(raw, "pitch", 1.0, 0.5, 2, "a multiplier")
        intonation = _number(raw, "intonation", 1.0, 0, 2, "a multiplier")
        speakers = _texts(raw, "speakers", "speaker names")
        models = _texts(raw, "aivishub_models", "AivisHub model pages or UUIDs")
        if voices == "aivishub" and not models:
            raise AddonError("voices is 'aivishub': list the models' pages in aivishub_models")
        if voices == "local" and models:
            raise AddonError(
                "aivishub_models join downloaded voices (official, hub or aivishub), not a "
                "local folder: copy their .aivmx files into it instead"
            )
        return cls(
            voices=voices,
            hub_repo=str(raw.get("hub_repo") or "").strip(),
            local_folder=str(raw.get("local_folder") or "").strip(),
            speakers=speakers,
            aivishub_models=models,
            threads=threads,
            volume=volume,
            pitch=pitch,
            intonation=intonation,
            normalize=bool(raw.get("normalize", True)),
            smooth_start=bool(raw.get("smooth_start", True)),
            debug_logging=bool(raw.get("debug_logging", False)),
            zeroconf=bool(raw.get("zeroconf", False)),
        )


def options_from_arguments(argv: Sequence[str], environ: Mapping[str, str]) -> AddonOptions:
    """Container: the add-on's options as arguments, each defaulting to its ``YOMIAGE_*``
    environment variable (a list as commas), checked as the add-on's are."""

    def env(name: str, default: str = "") -> str:
        return environ.get(f"YOMIAGE_{name}", default)

    def env_flag(name: str, default: bool) -> bool:
        value = env(name).strip().lower()
        return default if not value else value in ("1", "true", "yes", "on")

    parser = argparse.ArgumentParser(
        prog="run.py",
        description="Yomiage's Wyoming server, as the add-on runs it, for Docker without a "
        "Supervisor. Each option defaults to the YOMIAGE_* environment variable named in its "
        "help (an empty one counts as unset); YOMIAGE_PORT sets the port (10200).",
    )
    parser.add_argument(
        "--voices", choices=SOURCES, default=env("VOICES") or "official", help="(YOMIAGE_VOICES)"
    )
    parser.add_argument(
        "--speaker",
        dest="speakers",
        action="append",
        help="a speaker to download; repeat it (YOMIAGE_SPEAKERS, comma-separated; none: all)",
    )
    parser.add_argument(
        "--hub-repo", default=env("HUB_REPO"), help="with --voices hub (YOMIAGE_HUB_REPO)"
    )
    parser.add_argument(
        "--aivishub-model",
        dest="aivishub_models",
        action="append",
        help="a model's AivisHub page or UUID, beside the downloaded voices; repeat it "
        "(YOMIAGE_AIVISHUB_MODELS, comma-separated)",
    )
    parser.add_argument(
        "--local-folder",
        default=env("LOCAL_FOLDER"),
        help="with --voices local: a bundle folder (YOMIAGE_LOCAL_FOLDER)",
    )
    # A text default goes through ``type`` too: a bad variable is refused as a bad argument.
    for name, kind, default in [
        ("threads", int, None),
        ("volume", float, "0"),
        ("pitch", float, "1"),
        ("intonation", float, "1"),
    ]:
        key = name.upper()
        parser.add_argument(
            f"--{name}", type=kind, default=env(key) or default, help=f"(YOMIAGE_{key})"
        )
    for name, default in [
        ("normalize", True),
        ("smooth-start", True),
        ("zeroconf", False),  # announce on the local network, where Yomiage's flow finds it
        ("debug", False),
    ]:
        key = name.upper().replace("-", "_")
        parser.add_argument(
            f"--{name}",
            action=argparse.BooleanOptionalAction,
            default=env_flag(key, default),
            help=f"(YOMIAGE_{key}: 1 or 0)",
        )
    args = parser.parse_args(list(argv))
    speakers = args.speakers or [name for name in env("SPEAKERS").split(",") if name.strip()]
    models = args.aivishub_models or [m for m in env("AIVISHUB_MODELS").split(",") if m.strip()]
    return AddonOptions.from_dict(
        {
            "voices": args.voices,
            "hub_repo": args.hub_repo,
            "local_folder": args.local_folder,
            "speakers": speakers,
            "aivishub_models": models,
            "threads": args.threads,
            "volume": args.volume,
            "pitch": args.pitch,
            "intonation": args.intonation,
            "normalize": args.normalize,
            "smooth_start": args.smooth_start,
            "debug_logging": args.debug,
            "zeroconf": args.zeroconf,
        }
    )


# -- what to run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class VoicesPlan:
    bundle: Path  # the bundle folder the server loads
    repo: str | None  # the Hub repository to fetch it from (None: a local folder)
    # Graphs the server prepares for this CPU, kept across restarts (the image's home is not).
    prepared_graphs: Path
    # Whose BERT serves a local folder of voices that has none (.aivmx files): the official
    # voices this add-on downloaded earlier, where they are (else a bundle beside the folder).
    language_model: Path | None = None
    aivishub_models: tuple[str, ...] = ()  # fetched into ``bundle`` where missing, served
    # ``bundle`` is the add-on's own (/data/voices): an AivisHub model there that
    # ``aivishub_models`` does not list is deleted. A local folder is the user's.
    own_folder: bool = True


def plan_voices(
    options: AddonOptions, data_dir: Path, local_roots: Sequence[Path] | None = _LOCAL_ROOTS
) -> VoicesPlan:
    """``local_roots``: where a local folder may be (the add-on sees only /share and /media;
    None: anywhere, as a Container's volumes are the user's)."""
    if options.voices == "local":
        official = _downloaded(data_dir, OFFICIAL_REPO)
        return VoicesPlan(
            _local_folder(options.local_folder, local_roots),
            None,
            data_dir / "prepared-graphs",
            official if official.is_dir() else None,
            own_folder=False,
        )
    prepared, models = data_dir / "prepared-graphs", options.aivishub_models
    if options.voices == "aivishub":  # the official BERT lands beside it (yomiage fetch)
        return VoicesPlan(data_dir / "voices" / "aivishub", None, prepared, aivishub_models=models)
    repo = OFFICIAL_REPO if options.voices == "official" else options.hub_repo
    if not _REPO_ID.match(repo):
        raise AddonError(
            f"hub_repo must be a Hugging Face repository id like owner/name, not {repo!r}"
        )
    return VoicesPlan(_downloaded(data_dir, repo), repo, prepared, aivishub_models=models)


def _downloaded(data_dir: Path, repo: str) -> Path:
    return data_dir / "voices" / repo.replace("/", "--")


def _local_folder(folder: str, roots: Sequence[Path] | None) -> Path:
    if not folder:
        raise AddonError("voices is 'local': set local_folder to a bundle folder")
    path = Path(os.path.normpath(folder))  # /share/../config is not under /share
    if roots is not None and not any(path.is_relative_to(root) for root in roots):
        raise AddonError(f"local_folder {folder!r} must be under {' or '.join(map(str, roots))}")
    if not path.is_dir():
        raise AddonError(f"local_folder {folder!r} does not exist or is not a folder")
    return path


def _yomiage(*args: str) -> list[str]:
    return [sys.executable, "-m", "yomiage.cli", *args]


def fetch_command(plan: VoicesPlan, options: AddonOptions) -> list[str]:
    assert plan.repo is not None
    speakers = [arg for name in options.speakers for arg in ("--speaker", name)]
    return _yomiage("fetch", plan.repo, *speakers, "--to", str(plan.bundle))


def aivishub_fetch_command(plan: VoicesPlan, model: str) -> list[str]:
    """An AivisHub model into the plan's folder unless it is there: a start needs no network;
    its updates come from Home Assistant's update entity."""
    return _yomiage("fetch", model, "--to", str(plan.bundle), "--keep-installed")


def unlisted_models(plan: VoicesPlan) -> list[str]:
    """UUIDs of the AivisHub models in the plan's own folder that ``aivishub_models`` no longer
    lists (as ``yomiage fetch`` names them: ``<uuid>.aivmx``)."""
    if not plan.own_folder:
        return []
    listed = {found[0] for model in plan.aivishub_models if (found := _UUID.search(model.lower()))}
    return sorted(
        path.stem
        for path in plan.bundle.glob("*.aivmx")
        if _UUID.fullmatch(path.stem) and path.stem not in listed
    )


def forget_command(plan: VoicesPlan, uuids: Sequence[str]) -> list[str]:
    return [
        sys.executable,
        "-c",
        _FORGET_MODELS,
        str(plan.bundle),
        str(plan.prepared_graphs),
        *uuids,
    ]


def _texts(raw: dict[str, Any], name: str, what: str) -> tuple[str, ...]:
    """An optional list of texts, each stripped, the empty ones left out."""
    values = raw.get(name) or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise AddonError(f"{name} must be a list of {what}, not {values!r}")
    return tuple(value.strip() for value in values if value.strip())


def _number(
    raw: dict[str, Any], name: str, default: float, low: float, high: float, what: str
) -> float:
    """An optional number within the engine's limits (the schema takes no negative bounds)."""
    value = raw.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise AddonError(f"{name} must be {what} from {low:g} to {high:g}, not {value!r}")
    return float(value)


def serve_command(plan: VoicesPlan, options: AddonOptions, port: int) -> list[str]:
    command = [sys.executable, "-m", "yomiage.wyoming_server"]
    command += ["--uri", f"tcp://0.0.0.0:{port}", "--bundle", str(plan.bundle)]
    command += ["--graph-cache", str(plan.prepared_graphs)]
    if plan.language_model is not None:
        command += ["--language-model", str(plan.language_model)]
    if options.threads is not None:
        command += ["--threads", str(options.threads)]
    for model in plan.aivishub_models:
        command += ["--aivishub", model]
    command += ["--volume", f"{options.volume:g}"]
    command += ["--pitch", f"{options.pitch:g}", "--intonation", f"{options.intonation:g}"]
    if not options.normalize:
        command.append("--no-normalize")
    if not options.smooth_start:
        command.append("--no-smooth-start")
    if options.zeroconf:
        command.append("--zeroconf")
    if options.debug_logging:
        command.append("--debug")
    return command


class Child:
    """The process run.py waits on (the download, then the server): SIGTERM and SIGINT go to
    it, from the first moment (as Docker's PID 1 without an init, run.py would ignore them)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = False
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)

    def run(self, command: list[str]) -> subprocess.Popen[bytes]:
        self.process = subprocess.Popen(command)
        return self.process

    def _forward(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)


def ensure_voices(plan: VoicesPlan, options: AddonOptions, child: Child) -> None:
    """Forget the AivisHub models no longer listed, fetch (or update) the voices, then the
    AivisHub models not there yet; with the Hub out of reach, go on with what is on disk."""
    if unlisted := unlisted_models(plan):
        _LOGGER.info("voices: deleting AivisHub models no longer listed: %s", ", ".join(unlisted))
        if child.run(forget_command(plan, unlisted)).wait() != 0 and not child.stopping:
            raise AddonError("could not delete the AivisHub models no longer listed (see above)")
    if plan.repo is not None:
        _ensure_hub_voices(plan, options, child)
    for model in plan.aivishub_models:
        if child.stopping:
            return
        _LOGGER.info("voices: AivisHub model %s", model)
        if child.run(aivishub_fetch_command(plan, model)).wait() != 0 and not child.stopping:
            raise AddonError(f"could not download AivisHub model {model} (see the log above)")


def _ensure_hub_voices(plan: VoicesPlan, options: AddonOptions, child: Child) -> None:
    _LOGGER.info("voices: %s (checking the Hugging Face Hub for new files)", plan.repo)
    if child.run(fetch_command(plan, options)).wait() == 0 or child.stopping:
        return
    speakers = plan.bundle / "onnx" / "speakers"  # speaker folders appear only when complete
    if speakers.is_dir() and any(speakers.iterdir()):
        _LOGGER.warning("could not update the voices; using the ones already downloaded")
        return
    raise AddonError(f"could not download the voices from {plan.repo} (see the log above)")


# -- talking to the server and the Supervisor -----------------------------------------------------
def answers_describe(port: int, timeout_s: float = 2.0) -> bool:
    """True when a Wyoming server on this machine answers ``describe`` with ``info``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as connection:
            connection.sendall(b'{"type": "describe"}\n')
            header = connection.makefile("rb").readline()
        return bool(json.loads(header).get("type") == "info")
    except (OSError, ValueError, AttributeError):
        return False


def wait_until_serving(server: subprocess.Popen[bytes], port: int) -> bool:
    """True once the server answers; False if it ended first (loading voices on a Pi takes
    minutes: no deadline, the image's health check reports a server that never answers)."""
    while server.poll() is None:
        if answers_describe(port):
            return True
        time.sleep(0.5)
    return False


def announce(supervisor_url: str, token: str, host: str, port: int) -> None:
    """Tell Home Assistant (through the Supervisor) where the server is."""
    body = json.dumps({"service": DISCOVERY_SERVICE, "config": {"host": host, "port": port}})
    request = urllib.request.Request(
        f"{supervisor_url.rstrip('/')}/discovery",
        data=body.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    # The Supervisor answers a refusal with 400 (urllib's HTTPError, an OSError).
    with urllib.request.urlopen(request, timeout=30):
        pass


def _announce_if_supervised(port: int, child: Child) -> None:
    """Announce the server, retrying a Supervisor that does not answer yet; not once the add-on
    is being stopped (the Supervisor waits for its exit, then kills it)."""
    token = os.environ.get("SUPERVISOR_TOKEN")
    if not token:
        _LOGGER.info("no SUPERVISOR_TOKEN: not running as an add-on, nothing to announce")
        return
    supervisor_url = os.environ.get("YOMIAGE_SUPERVISOR_URL", "http://supervisor")
    # The Supervisor names the container for the add-on's hostname, which the add-on network's
    # DNS resolves for Home Assistant.
    host = os.environ.get("YOMIAGE_ANNOUNCE_HOST") or socket.gethostname()
    for wait_s in (0.0, *ANNOUNCE_RETRIES_S):
        if not _waited_unless_stopping(wait_s, child):
            return
        try:
            announce(supervisor_url, token, host, port)
        except OSError as err:
            _LOGGER.warning("could not announce the server to Home Assistant: %s", err)
            continue
        _LOGGER.info("announced to Home Assistant: Settings → Devices & services offers Yomiage")
        return
    _LOGGER.error("gave up announcing the server: add it in Yomiage's setup by address")


def _waited_unless_stopping(seconds: float, child: Child) -> bool:
    """Whether ``seconds`` passed without a stop (checked every half second)."""
    deadline = time.monotonic() + seconds
    while not child.stopping and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    return not child.stopping


# -- main -----------------------------------------------------------------------------------------
def run(data_dir: Path, port: int, arguments: Sequence[str]) -> int:
    """Serve until stopped: the Supervisor's options where it wrote them, else ``arguments``."""
    options_file = data_dir / "options.json"
    supervised = options_file.is_file()
    if supervised:
        if arguments:
            _LOGGER.warning("ignoring %s: the add-on's options apply", " ".join(arguments))
        options = AddonOptions.load(options_file)
    else:
        options = options_from_arguments(arguments, os.environ)
    logging.getLogger().setLevel(logging.DEBUG if options.debug_logging else logging.INFO)
    plan = plan_voices(options, data_dir, _LOCAL_ROOTS if supervised else None)
    child = Child()
    ensure_voices(plan, options, child)
    if child.stopping:  # stopped while downloading: a clean stop, not a failure
        return 0
    server = child.run(serve_command(plan, options, port))
    if wait_until_serving(server, port) and supervised:
        _announce_if_supervised(port, child)
    return server.wait()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    port = int(os.environ.get("YOMIAGE_PORT", DEFAULT_PORT))
    if argv[1:] == ["healthcheck"]:
        return 0 if answers_describe(port) else 1
    try:
        return run(Path(os.environ.get("YOMIAGE_ADDON_DATA", "/data")), port, argv[1:])
    except AddonError as err:
        _LOGGER.error("%s", err)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
