"""Fixtures shared by the runtime suites (engine, text, Home Assistant)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY_BUNDLE = FIXTURES / "bundle-tiny"


@pytest.fixture(scope="session")
def tiny_bundle() -> Path:
    """The committed tiny bundle (random weights, real architecture): read-only."""
    assert (TINY_BUNDLE / "onnx" / "speakers").is_dir(), (
        "run: python -m tools.make_bundle --preset tiny"
    )
    return TINY_BUNDLE
