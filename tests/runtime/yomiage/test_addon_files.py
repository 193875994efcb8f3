"""The add-on's files against what the Supervisor documents and checks when it reads a repository.

Building the image is tests/addon_image's (Docker); everything the Supervisor validates before
it builds or pulls is checked here: config.yaml's required keys and their types, the option schema
and its defaults, translations, build.yaml, repository.yaml and the Dockerfile's inputs, and what
the image workflow (.github/workflows/addon.yaml, scripts/addon-image) publishes for each arch.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import voluptuous as vol
import yaml

from custom_components.yomiage.supervisor import ADDON_DEFAULT_FOLDER, ADDON_FOLDERS, REPOSITORY_URL

from .addon import ADDON, REPO_ROOT, load_run_script

ARCHES = ["aarch64", "amd64", "armhf", "armv7", "i386"]
MAP_TYPES = ["config", "ssl", "addons", "backup", "share", "media", "homeassistant_config"]
MAP_TYPES += ["all_addon_configs", "addon_config", "data"]
STARTUP = ["initialize", "system", "services", "application", "once"]
PORT_KEY = vol.Match(r"^\d+/(tcp|udp)$")
# Option types of the add-on schema (developers.home-assistant.io, "Options / Schema").
OPTION_TYPE = re.compile(
    r"^(?:bool|email|url|port|device(?:\(subsystem=[a-z]+\))?"
    r"|(?:str|password|int|float)(?:\((?P<min>[\d.]*),(?P<max>[\d.]*)\))?"
    r"|match\((?P<match>.*)\)|list\((?P<choices>.+)\))\??$"
)
# "image" of build_from: registry/namespace/name:tag (the Supervisor's own pattern)
BUILD_IMAGE = r"^([a-zA-Z\-\.:\d{}]+/)*?([\-\w{}]+)/([\-\w{}]+)(:[\.\-\w{}]+)?$"
# config.yaml's "image": the same without a tag (the Supervisor pulls it tagged with the version)
PULL_IMAGE = r"^([a-zA-Z\-\.:\d{}]+/)*?([\-\w{}]+)/([\-\w{}]+)$"
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "addon.yaml"

CONFIG_SCHEMA = vol.Schema(
    {
        vol.Required("name"): str,
        vol.Required("version"): str,
        vol.Required("slug"): vol.Match(r"^[-_.A-Za-z0-9]+$"),
        vol.Required("description"): str,
        vol.Required("arch"): [vol.In(ARCHES)],
        vol.Optional("url"): vol.Url(),
        vol.Optional("image"): vol.Match(PULL_IMAGE),
        vol.Optional("init"): bool,
        vol.Optional("startup"): vol.In(STARTUP),
        vol.Optional("boot"): vol.In(["auto", "manual", "manual_only"]),
        vol.Optional("discovery"): [str],
        vol.Optional("backup_exclude"): [str],
        vol.Optional("map"): [
            {vol.Required("type"): vol.In(MAP_TYPES), vol.Optional("read_only"): bool}
        ],
        vol.Optional("ports"): {PORT_KEY: vol.Any(None, vol.All(int, vol.Range(1, 65535)))},
        vol.Optional("ports_description"): {PORT_KEY: str},
        vol.Optional("options"): dict,
        vol.Optional("schema"): {str: vol.Any(vol.Match(OPTION_TYPE), [vol.Match(OPTION_TYPE)])},
    },
    extra=vol.PREVENT_EXTRA,  # stricter than the Supervisor (which drops unknown keys): no typos
)
TRANSLATION_SCHEMA = vol.Schema(
    {
        vol.Required("configuration"): {str: {vol.Required("name"): str, "description": str}},
        vol.Optional("network"): {PORT_KEY: str},
    },
    extra=vol.PREVENT_EXTRA,
)


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    config: dict[str, Any] = CONFIG_SCHEMA(_yaml(ADDON / "config.yaml"))
    return config


def _check_option(spec: str | list[str], value: Any, name: str) -> None:
    """Does ``value`` satisfy the option type ``spec``, as the Supervisor reads it?"""
    if isinstance(spec, list):
        assert isinstance(value, list), f"{name}: a list is expected"
        for item in value:
            _check_option(spec[0], item, name)
        return
    match = OPTION_TYPE.match(spec)
    assert match is not None, f"{name}: unknown type {spec!r}"
    kind = spec.rstrip("?").split("(")[0]
    if kind == "bool":
        assert isinstance(value, bool), name
    elif kind in ("int", "float"):
        assert isinstance(value, int | float) and not isinstance(value, bool), name
        low, high = (float(match[part]) if match[part] else None for part in ("min", "max"))
        assert (low is None or value >= low) and (high is None or value <= high), name
    elif kind in ("str", "password"):
        assert isinstance(value, str), name
    elif kind == "list":
        assert value in match["choices"].split("|"), f"{name}: {value!r} is not a choice"
    elif kind == "match":
        assert re.match(match["match"], str(value)), name
    else:
        raise AssertionError(f"{name}: no check for {kind}")


def _optional(spec: str | list[str]) -> bool:
    return (spec[0] if isinstance(spec, list) else spec).endswith("?")


def test_config_has_the_required_keys_with_valid_types(config: dict[str, Any]) -> None:
    assert config["slug"] == "yomiage"
    assert config["discovery"] == ["yomiage"]  # Yomiage's flow only: one entry per server
    assert set(config["arch"]) == {"amd64", "aarch64"}  # onnxruntime has no 32-bit ARM wheels
    assert {entry["type"] for entry in config["map"]} >= {"share"}


def test_version_is_the_project_version_the_image_installs(config: dict[str, Any]) -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["version"] == pyproject["project"]["version"]
    changelog = (ADDON / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {config['version']}" in changelog


def test_default_options_satisfy_the_schema(config: dict[str, Any]) -> None:
    options, schema = config["options"], config["schema"]
    assert set(options) <= set(schema), "options without a schema entry are dropped"
    for name, spec in schema.items():
        if name in options:
            _check_option(spec, options[name], name)
        else:
            assert _optional(spec), f"required option {name} has no default"
    voices = OPTION_TYPE.match(schema["voices"])
    assert voices is not None
    assert voices["choices"].split("|") == ["official", "hub", "local", "aivishub"]


@pytest.mark.parametrize("language", ["en", "ja"])
def test_translations_name_and_describe_every_option_and_port(
    config: dict[str, Any], language: str
) -> None:
    translation = TRANSLATION_SCHEMA(_yaml(ADDON / "translations" / f"{language}.yaml"))
    assert set(translation["configuration"]) == set(config["schema"])
    assert all(entry.get("description") for entry in translation["configuration"].values())
    assert set(translation["network"]) == set(config["ports"])


def test_docs_explain_every_option(config: dict[str, Any]) -> None:
    docs = (ADDON / "DOCS.md").read_text(encoding="utf-8")
    for name in config["schema"]:
        assert f"`{name}`" in docs, name
    for name in ("README.md", "CHANGELOG.md"):
        assert (ADDON / name).read_text(encoding="utf-8").strip()


def test_build_yaml_names_a_debian_python_base_for_every_arch(config: dict[str, Any]) -> None:
    build = _yaml(ADDON / "build.yaml")
    assert set(build["build_from"]) == set(config["arch"])
    for image in build["build_from"].values():
        assert re.match(BUILD_IMAGE, image), image
        assert re.search(r"/python:3\.\d+-slim-bookworm$", image), image


def test_repository_yaml_describes_the_repository() -> None:
    repository = vol.Schema(
        {vol.Required("name"): str, vol.Required("url"): vol.Url(), "maintainer": str},
        extra=vol.PREVENT_EXTRA,
    )(_yaml(REPO_ROOT / "repository.yaml"))
    assert repository["url"].startswith("https://github.com/")
    # The flow adds it to the store by this URL and finds the add-on under the slug it makes.
    assert repository["url"] == REPOSITORY_URL


def test_dockerfile_builds_from_this_folder_and_runs_the_run_script() -> None:
    dockerfile = (ADDON / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG BUILD_FROM=python:3\.\d+-slim-bookworm$", dockerfile, re.M)
    assert re.search(r"^FROM \$\{BUILD_FROM\}$", dockerfile, re.M)
    copies = re.findall(r"^COPY (\S+) ", dockerfile, re.M)
    assert copies and all((ADDON / source).exists() for source in copies), copies
    assert "requirements/runtime.txt" in dockerfile  # pins wyoming and the engine's wheels
    # Without arguments under the Supervisor, with run.py's under plain Docker (Container).
    assert re.search(r'^ENTRYPOINT \["python3", "/run.py"\]$', dockerfile, re.M)
    assert re.search(r'CMD \["python3", "/run.py", "healthcheck"\]', dockerfile)


def _addon_image(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO_ROOT / "scripts" / "addon-image"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_every_arch_pulls_the_image_the_workflow_builds_from_its_base(
    config: dict[str, Any],
) -> None:
    """With image: the Supervisor pulls image.format(arch=...):version instead of building;
    scripts/addon-image tells the workflow that name, the version and build.yaml's base."""
    image, version = config["image"], config["version"]
    assert "{arch}" in image and image == image.lower(), image  # registries take lower case
    build = _yaml(ADDON / "build.yaml")
    for arch in config["arch"]:
        done = _addon_image(arch, f"v{version}")
        assert done.returncode == 0, done.stderr
        outputs = dict(line.split("=", 1) for line in done.stdout.splitlines())
        assert outputs["image"] == image.format(arch=arch)  # the Supervisor's substitution
        assert outputs["version"] == version
        assert outputs["build_from"] == build["build_from"][arch]
        for key in ("name", "description", "url"):
            assert outputs[key] == config[key], key


def test_a_tag_that_is_not_the_version_publishes_nothing(config: dict[str, Any]) -> None:
    done = _addon_image(config["arch"][0], f"v{config['version']}.1")
    assert done.returncode != 0 and "is not v" in done.stderr
    assert _addon_image("armv7").returncode != 0  # not an arch of config.yaml


def test_image_workflow_builds_every_arch_with_the_dockerfiles_arguments(
    config: dict[str, Any],
) -> None:
    workflow = _yaml(WORKFLOW)
    job = workflow["jobs"]["image"]
    assert set(job["strategy"]["matrix"]["arch"]) == set(config["arch"])
    build = next(step for step in job["steps"] if "build-push-action" in step.get("uses", ""))
    given = {line.split("=", 1)[0] for line in build["with"]["build-args"].splitlines()}
    dockerfile = (ADDON / "Dockerfile").read_text(encoding="utf-8")
    declared = set(re.findall(r"^ARG (\w+)", dockerfile, re.M))
    assert {"BUILD_FROM", "BUILD_VERSION", "YOMIAGE_SOURCE"} <= given & declared
    assert build["with"]["context"] == "addon"


def test_container_users_get_the_release_the_workflow_publishes(config: dict[str, Any]) -> None:
    """The README's command and the compose file name the multi-arch image of this version,
    the one the add-on workflow's container job publishes."""
    image = f"ghcr.io/yomiage/yomiage:{config['version']}"
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    container = readme.split("### Home Assistant Container", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"ghcr\.io/yomiage/\S+", container) == [image]
    compose = _yaml(ADDON / "docker-compose.yml")
    assert compose["services"]["yomiage"]["image"] == image
    workflow = (REPO_ROOT / ".github" / "workflows" / "addon.yaml").read_text(encoding="utf-8")
    assert '--tag "ghcr.io/yomiage/yomiage:$VERSION"' in workflow


def test_the_flow_offers_the_folders_the_add_on_maps(config: dict[str, Any]) -> None:
    """What the flow checks a voice folder against is what config.yaml maps into the add-on and
    run.py accepts; its suggested folder is the add-on's default."""
    mapped = {f"/{entry['type']}" for entry in config["map"]}
    assert {str(folder) for folder in ADDON_FOLDERS} == mapped
    assert {str(folder) for folder in load_run_script()._LOCAL_ROOTS} == mapped
    assert config["options"]["local_folder"] == ADDON_DEFAULT_FOLDER
