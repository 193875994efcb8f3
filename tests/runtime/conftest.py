"""Fixtures shared by the runtime suites (engine, text, Home Assistant)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY_BUNDLE = FIXTURES / "bundle-tiny"


@pytest.fixture(scope="session", autouse=True)
def private_graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Prepared graphs go to a folder of this run, never to the user's cache."""
    folder = tmp_path_factory.mktemp("graph-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOMIAGE_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session")
def tiny_bundle() -> Path:
    """The committed tiny bundle (random weights, real architecture): read-only."""
    assert (TINY_BUNDLE / "onnx" / "speakers").is_dir(), (
        "run: python -m tools.make_bundle --preset tiny"
    )
    return TINY_BUNDLE
