"""The add-on's run script: options, which voices, the commands it runs, discovery, health."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import yaml

from yomiage.download_cli import add_subcommands
from yomiage.wyoming_server import WyomingTtsServer, add_serve_command

from ..supervisor_double import SupervisorDouble
from .addon import ADDON, RUN_SCRIPT, free_port, load_run_script, wait_for
from .client import address


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return load_run_script()


def _defaults() -> dict[str, Any]:
    options: dict[str, Any] = yaml.safe_load((ADDON / "config.yaml").read_text())["options"]
    return options


def _options(run: ModuleType, **changes: Any) -> Any:
    return run.AddonOptions.from_dict({**_defaults(), **changes})


# -- options and plans ---------------------------------------------------------------------------
def test_the_default_options_mean_the_official_voices_in_the_data_volume(
    run: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "options.json").write_text(json.dumps(_defaults()))
    options = run.AddonOptions.load(tmp_path / "options.json")
    plan = run.plan_voices(options, tmp_path)
    assert plan.repo == run.OFFICIAL_REPO
    assert plan.bundle == tmp_path / "voices" / run.OFFICIAL_REPO.replace("/", "--")
    assert options.speakers == () and options.threads is None


@pytest.mark.parametrize("voices", ["official", "hub"])
def test_backups_leave_out_the_voices_and_prepared_graphs_but_not_the_options(
    run: ModuleType, tmp_path: Path, voices: str
) -> None:
    """The Supervisor archives /data as data/..., skipping what a backup_exclude pattern matches
    (PurePath.match: the pattern against the end of the path)."""
    excluded: list[str] = yaml.safe_load((ADDON / "config.yaml").read_text())["backup_exclude"]
    plan = run.plan_voices(_options(run, voices=voices, hub_repo="someone/voices"), tmp_path)
    for place in (plan.bundle, plan.prepared_graphs):
        top = PurePosixPath("data", place.relative_to(tmp_path).parts[0])
        assert any(top.match(pattern) for pattern in excluded), place
    assert not any(PurePosixPath("data/options.json").match(pattern) for pattern in excluded)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "missing"),
        ("{not json", "cannot read"),
        ("[1, 2]", "JSON object"),
        ('{"voices": "cloud"}', "voices must be one of official, hub, local"),
        ('{"threads": 0}', "threads must be a whole number"),
        ('{"speakers": "jvnv-F1-jp"}', "speakers must be a list"),
    ],
)
def test_bad_options_say_what_is_wrong(
    run: ModuleType, tmp_path: Path, content: str | None, words: str
) -> None:
    path = tmp_path / "options.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(run.AddonError, match=words) as caught:
        run.AddonOptions.load(path)
    if content is None or "cannot" in words:
        assert str(path) in str(caught.value)


@pytest.mark.parametrize("repo", ["", "no-slash", "a/b/c", "owner/name with space"])
def test_another_hub_repo_must_be_a_repo_id(run: ModuleType, tmp_path: Path, repo: str) -> None:
    with pytest.raises(run.AddonError, match="hub_repo must be a Hugging Face repository id"):
        run.plan_voices(_options(run, voices="hub", hub_repo=repo), tmp_path)


def test_a_local_folder_must_exist_under_share_or_media(run: ModuleType, tmp_path: Path) -> None:
    """The add-on sees only /share and /media (the test's stand-ins for them here)."""
    roots = (tmp_path / "share", tmp_path / "media")
    (tmp_path / "share" / "voices").mkdir(parents=True)
    options = _options(run, voices="local", local_folder=f"{tmp_path}/share/voices")
    plan = run.plan_voices(options, tmp_path, roots)
    assert (plan.bundle, plan.repo) == (tmp_path / "share" / "voices", None)
    for folder, words in [
        ("", "set local_folder"),
        (str(tmp_path / "elsewhere"), "must be under .*share or .*media"),
        (f"{tmp_path}/share/missing", "does not exist"),
    ]:
        with pytest.raises(run.AddonError, match=words):
            run.plan_voices(_options(run, voices="local", local_folder=folder), tmp_path, roots)
    with pytest.raises(run.AddonError, match="must be under /share or /media"):
        run.plan_voices(options, tmp_path)  # the add-on's own roots


def test_commands_are_the_ones_the_cli_understands(run: ModuleType, tmp_path: Path) -> None:
    options = _options(
        run,
        voices="hub",
        hub_repo="me/my-voices",
        speakers=["a", "b"],
        threads=3,
        volume=-4.5,
        pitch=1.1,
        intonation=0.5,
        normalize=False,
        smooth_start=False,
        debug_logging=True,
    )
    plan = run.plan_voices(options, tmp_path)
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    add_subcommands(commands)
    add_serve_command(commands)

    fetch = run.fetch_command(plan, options)
    assert fetch[:3] == [sys.executable, "-m", "yomiage.cli"]
    fetched = parser.parse_args(fetch[3:])
    assert (fetched.repo, fetched.speakers, fetched.model_dir) == (
        "me/my-voices",
        ["a", "b"],
        plan.bundle,
    )

    serve = run.serve_command(plan, options, 10200)
    assert serve[:3] == [sys.executable, "-m", "yomiage.wyoming_server"]
    served = parser.parse_args(["serve", *serve[3:]])
    assert (served.uri, served.bundle, served.threads, served.debug) == (
        "tcp://0.0.0.0:10200",
        plan.bundle,
        3,
        True,
    )
    assert (
        served.volume,
        served.pitch,
        served.intonation,
        served.normalize,
        served.smooth_start,
    ) == (-4.5, 1.1, 0.5, False, False)
    assert served.graph_cache == tmp_path / "prepared-graphs"  # kept across restarts
    default = parser.parse_args(["serve", *run.serve_command(plan, _options(run), 10200)[3:]])
    assert (
        default.volume,
        default.pitch,
        default.intonation,
        default.normalize,
        default.smooth_start,
    ) == (0.0, 1.0, 1.0, True, True)
    for name, bad in [("volume", 12), ("pitch", 0.1), ("intonation", 3), ("pitch", True)]:
        with pytest.raises(run.AddonError, match=name):
            _options(run, **{name: bad})


class _Child:
    """run.py's child process as ensure_voices starts it: each command recorded, then exiting
    with ``status(command)``."""

    stopping = False

    def __init__(self, status: Callable[[list[str]], int] = lambda command: 0) -> None:
        self.calls: list[list[str]] = []
        self._status = status

    def run(self, command: list[str]) -> SimpleNamespace:
        self.calls.append(command)
        code = self._status(command)
        return SimpleNamespace(wait=lambda: code)


def test_voices_already_downloaded_are_used_when_the_hub_is_out_of_reach(
    run: ModuleType, tmp_path: Path
) -> None:
    offline = _Child(lambda command: 1)  # a download with no network fails
    options = _options(run)
    plan = run.plan_voices(options, tmp_path)
    with pytest.raises(run.AddonError, match="could not download the voices"):
        run.ensure_voices(plan, options, offline)
    (plan.bundle / "onnx" / "speakers" / "jvnv-F1-jp").mkdir(parents=True)
    run.ensure_voices(plan, options, offline)  # no error: serve what is there
    assert len(offline.calls) == 2 and offline.calls[0][3] == "fetch"


# -- the Supervisor --------------------------------------------------------------------------------
@pytest.fixture
def supervisor(socket_enabled: None) -> Iterator[SupervisorDouble]:
    with SupervisorDouble(installed=True) as double:
        yield double


def test_announce_posts_the_yomiage_service_to_the_supervisor(
    run: ModuleType, supervisor: SupervisorDouble
) -> None:
    """Home Assistant hands a yomiage service to Yomiage's own flow (the Wyoming integration
    would make a second entry without the per-request options)."""
    run.announce(supervisor.url, "token-1", "abcd1234-yomiage", 10200)
    (call,) = supervisor.calls
    assert (call.method, call.path, call.authorization) == ("POST", "/discovery", "Bearer token-1")
    assert call.body == {
        "service": "yomiage",
        "config": {"host": "abcd1234-yomiage", "port": 10200},
    }


def test_a_refused_announcement_is_an_error(
    run: ModuleType, supervisor: SupervisorDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(supervisor.config, "discovery", ["wyoming"])  # yomiage not listed
    with pytest.raises(OSError, match="400"):
        run.announce(supervisor.url, "token-1", "host", 10200)


def test_a_stopped_add_on_stops_announcing(
    run: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Supervisor that does not answer is retried for minutes; a stop (SIGTERM marks the
    child as stopping) in the middle of a wait ends the retries within one nap: the Supervisor
    waits for the add-on to exit, then kills it. On a clock the test holds: the stop arrives
    during the first nap of the hour's wait."""
    child = SimpleNamespace(stopping=False)
    attempts: list[str] = []
    naps: list[float] = []
    now = [0.0]

    def unanswered(*_: object) -> None:
        attempts.append("announce")
        raise OSError("timed out")

    def nap(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds
        child.stopping = True

    monkeypatch.setenv("SUPERVISOR_TOKEN", "token-1")
    monkeypatch.setattr(run, "announce", unanswered)
    monkeypatch.setattr(run, "ANNOUNCE_RETRIES_S", (3600.0, 0.0))
    monkeypatch.setattr(run, "time", SimpleNamespace(monotonic=lambda: now[0], sleep=nap))
    run._announce_if_supervised(10200, child)
    assert attempts == ["announce"]  # none after the stop
    assert naps == [0.5]  # the stop is seen after one nap, not the hour


# -- health and the whole add-on -------------------------------------------------------------------
async def test_healthcheck_asks_the_server_to_describe_itself(
    run: ModuleType, server: WyomingTtsServer
) -> None:
    port = address(server)[1]
    assert await asyncio.to_thread(run.answers_describe, port)
    await server.stop()
    assert not await asyncio.to_thread(run.answers_describe, port)


def test_without_a_supervisor_the_arguments_are_the_options(
    run: ModuleType, tiny_bundle: Path, tmp_path: Path
) -> None:
    """Container: no options file, the voices and options as arguments (or YOMIAGE_*
    variables), any folder; the server answers, the health check says so, nothing is
    announced to a Supervisor, SIGTERM stops it cleanly."""
    port = free_port()
    environment = {
        **os.environ,
        "YOMIAGE_ADDON_DATA": str(tmp_path),
        "YOMIAGE_PORT": str(port),
        "YOMIAGE_THREADS": "1",
    }
    arguments = ["--voices", "local", "--local-folder", str(tiny_bundle)]
    addon = subprocess.Popen(
        [sys.executable, str(RUN_SCRIPT), *arguments],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: run.answers_describe(port) or addon.poll() is not None, 120)
        assert addon.poll() is None, "the server stopped"
        health = subprocess.run(
            [sys.executable, str(RUN_SCRIPT), "healthcheck"], env=environment, check=False
        )
        assert health.returncode == 0
    finally:
        addon.send_signal(signal.SIGTERM)
        output = addon.communicate(timeout=60)[0].decode()
    assert addon.returncode == 0, output  # the server stopped cleanly on the forwarded signal
    assert "announced" not in output, "no Supervisor: nothing to announce to"
    assert not run.answers_describe(port)


@pytest.mark.parametrize(
    ("arguments", "environment", "problem"),
    [
        (["--voices", "cloud"], {}, "invalid choice"),
        ([], {"YOMIAGE_VOLUME": "loud"}, "invalid float value"),
        (["--volume", "30"], {}, "volume must be a number of dB from -20 to 10"),
        (["--voices", "local"], {}, "set local_folder to a bundle folder"),
    ],
)
def test_bad_container_options_are_refused_in_one_line(
    run: ModuleType,
    tmp_path: Path,
    arguments: list[str],
    environment: dict[str, str],
    problem: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {**os.environ, "YOMIAGE_ADDON_DATA": str(tmp_path), **environment}
    done = subprocess.run(
        [sys.executable, str(RUN_SCRIPT), *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode != 0
    assert problem in done.stderr, done.stderr


def test_container_options_come_from_the_environment_where_no_argument_sets_them(
    run: ModuleType,
) -> None:
    environment = {
        "YOMIAGE_VOICES": "hub",
        "YOMIAGE_HUB_REPO": "someone/voices",
        "YOMIAGE_SPEAKERS": "a, b",
        "YOMIAGE_SMOOTH_START": "0",
        "YOMIAGE_ZEROCONF": "1",
    }
    options = run.options_from_arguments(["--speaker", "c"], environment)
    assert (options.voices, options.hub_repo, options.speakers) == ("hub", "someone/voices", ("c",))
    assert (options.smooth_start, options.zeroconf, options.normalize) == (False, True, True)
    assert run.options_from_arguments([], environment).speakers == ("a", "b")
    # An argument wins over its variable; an empty variable (compose's ${VAR}) is unset.
    assert run.options_from_arguments(["--smooth-start"], environment).smooth_start
    blank = {"YOMIAGE_VOLUME": "", "YOMIAGE_THREADS": "", "YOMIAGE_NORMALIZE": ""}
    unset = run.options_from_arguments([], blank)
    assert (unset.volume, unset.threads, unset.normalize) == (0.0, None, True)
    assert "--zeroconf" in run.serve_command(run.plan_voices(options, Path("/data")), options, 1)


# -- AivisHub voices -------------------------------------------------------------------------------
PAGE = "https://hub.aivis-project.com/aivm-models/797d6d8d-647e-5f8b-a997-4d5f5bcb91f1"
OTHER = "0f0f0f0f-1111-4222-8333-444455556666"


def test_aivishub_models_are_fetched_where_missing_and_served_for_updates(
    run: ModuleType, tmp_path: Path
) -> None:
    options = _options(run, voices="aivishub", aivishub_models=[f" {PAGE} ", "", OTHER])
    plan = run.plan_voices(options, tmp_path)
    assert plan.bundle == tmp_path / "voices" / "aivishub" and plan.repo is None
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    add_subcommands(commands)
    add_serve_command(commands)
    for model in (PAGE, OTHER):
        fetched = parser.parse_args(run.aivishub_fetch_command(plan, model)[3:])
        assert (fetched.repo, fetched.model_dir, fetched.keep_installed) == (
            model,
            plan.bundle,
            True,
        )
    served = parser.parse_args(["serve", *run.serve_command(plan, options, 10200)[3:]])
    assert (served.bundle, served.aivishub) == (plan.bundle, [PAGE, OTHER])


def test_aivishub_voices_need_models(run: ModuleType) -> None:
    with pytest.raises(run.AddonError, match="aivishub_models"):
        _options(run, voices="aivishub")
    with pytest.raises(run.AddonError, match="aivishub_models must be a list"):
        _options(run, voices="aivishub", aivishub_models=PAGE)
    with pytest.raises(run.AddonError, match="not a local folder"):
        _options(run, voices="local", aivishub_models=[PAGE])


def test_aivishub_models_join_the_official_voices_in_their_folder(
    run: ModuleType, tmp_path: Path
) -> None:
    """The Hub's voices first (their folder has the language model), then the models into it."""
    child = _Child()
    options = _options(run, aivishub_models=[PAGE])
    plan = run.plan_voices(options, tmp_path)
    assert (plan.repo, plan.aivishub_models) == (run.OFFICIAL_REPO, (PAGE,))
    run.ensure_voices(plan, options, child)
    assert [command[4] for command in child.calls] == [run.OFFICIAL_REPO, PAGE]
    assert all(command[command.index("--to") + 1] == str(plan.bundle) for command in child.calls)
    serve = run.serve_command(plan, options, 10200)
    assert serve[serve.index("--aivishub") + 1] == PAGE


def test_an_aivishub_model_that_cannot_be_fetched_stops_the_start(
    run: ModuleType, tmp_path: Path
) -> None:
    child = _Child(lambda command: 0 if command[4] == PAGE else 2)
    options = _options(run, voices="aivishub", aivishub_models=[PAGE, OTHER])
    plan = run.plan_voices(options, tmp_path)
    with pytest.raises(run.AddonError, match=f"AivisHub model {OTHER}"):
        run.ensure_voices(plan, options, child)
    assert [command[4] for command in child.calls] == [PAGE, OTHER]


def test_container_aivishub_models_come_from_arguments_or_the_environment(
    run: ModuleType,
) -> None:
    environment = {"YOMIAGE_VOICES": "aivishub", "YOMIAGE_AIVISHUB_MODELS": f"{PAGE}, {OTHER}"}
    assert run.options_from_arguments([], environment).aivishub_models == (PAGE, OTHER)
    chosen = run.options_from_arguments(["--aivishub-model", OTHER], environment)
    assert chosen.aivishub_models == (OTHER,)


def test_models_taken_off_the_list_are_deleted_from_the_add_ons_folder_only(
    run: ModuleType, tmp_path: Path
) -> None:
    """Files named for a model that aivishub_models no longer lists would still be served: the
    engine forgets them (and what a cut transfer of them left); other files stay, and a local
    folder is the user's."""
    options = _options(run, aivishub_models=[PAGE])
    plan = run.plan_voices(options, tmp_path)
    plan.bundle.mkdir(parents=True)
    kept, gone = PAGE.rsplit("/", 1)[1], OTHER
    for name in (f"{kept}.aivmx", f"{gone}.aivmx", "my-voice.aivmx"):
        (plan.bundle / name).write_bytes(b"aivmx")
    partial = plan.bundle / ".yomiage" / "blobs" / f"{gone}-1.0.0.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"half")
    assert run.unlisted_models(plan) == [gone]

    command = run.forget_command(plan, [gone])
    subprocess.run(command, check=True, timeout=60)
    assert sorted(p.name for p in plan.bundle.glob("*.aivmx")) == [
        f"{kept}.aivmx",
        "my-voice.aivmx",
    ]
    assert not partial.exists()

    local = tmp_path / "share" / "voices"
    local.mkdir(parents=True)
    (local / f"{gone}.aivmx").write_bytes(b"aivmx")
    plan = run.plan_voices(_options(run, voices="local", local_folder=str(local)), tmp_path, None)
    assert run.unlisted_models(plan) == []


def test_a_start_forgets_the_unlisted_models_before_fetching(
    run: ModuleType, tmp_path: Path
) -> None:
    child = _Child()
    options = _options(run, voices="aivishub", aivishub_models=[PAGE])
    plan = run.plan_voices(options, tmp_path)
    plan.bundle.mkdir(parents=True)
    (plan.bundle / f"{OTHER}.aivmx").write_bytes(b"aivmx")
    run.ensure_voices(plan, options, child)
    forget, fetch = run.forget_command(plan, [OTHER]), run.aivishub_fetch_command(plan, PAGE)
    assert child.calls == [forget, fetch]
