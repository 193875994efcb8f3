from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from custom_components.yomiage.engine.synthesis.engine import Engine


@pytest.fixture(scope="session")
def engine(tiny_bundle: Path) -> Iterator[Engine]:
    engine = Engine(tiny_bundle, device="cpu", threads=1)
    yield engine
    engine.close()
