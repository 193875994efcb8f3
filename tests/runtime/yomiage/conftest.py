"""Fixtures for the Wyoming server suite: one engine on the tiny bundle, a server per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from yomiage_engine.synthesis.engine import Engine

from yomiage.wyoming_server import WyomingTtsServer

from .client import QUIET

ERROR_GRACE_S = 0.5  # short, so the "silent client after an error" case is quick to test


@pytest.fixture(autouse=True)
def _loopback_sockets(socket_enabled: None) -> None:
    """The Home Assistant plugin blocks sockets; these tests talk over 127.0.0.1 only."""


@pytest.fixture(scope="session")
def engine(tiny_bundle: Path) -> Iterator[Engine]:
    engine = Engine(tiny_bundle, device="cpu", threads=1)
    engine.load_all()
    yield engine
    engine.close()


@pytest.fixture
async def server(engine: Engine) -> AsyncIterator[WyomingTtsServer]:
    """A server on a free loopback port; noise off, so equal requests give equal audio."""
    server = WyomingTtsServer(engine, options=QUIET, error_grace_s=ERROR_GRACE_S)
    await server.start("tcp://127.0.0.1:0")
    yield server
    await server.stop()
