"""Options of the newest-release test (tests/newest_ha)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--allow-installs",
        action="store_true",
        help="Home Assistant may install what it asks for from the registry (bump-newest-ha)",
    )
