"""What pyproject.toml installs (the add-on's image, the Container image and `pip install .`):
every package of the engine and of the yomiage command."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_installed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    for name, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            assert ".".join((name, *relative.parts)) in listed, init.parent
