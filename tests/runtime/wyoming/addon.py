"""Where the add-on's files are, and its run script loaded as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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
