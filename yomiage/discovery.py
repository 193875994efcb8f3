"""Announcing a Yomiage server on the local network (zeroconf / mDNS), so that Home Assistant
finds it: its own wyoming integration, and Yomiage's config flow (which matches the TXT mark of
engine/wyoming_contract.py and sends every synthesis option per request)."""

from __future__ import annotations

import ipaddress
import logging
import socket

from yomiage_engine.wyoming_contract import ZEROCONF_MARK, ZEROCONF_MARK_VERSION, ZEROCONF_TYPE
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

_LOGGER = logging.getLogger(__name__)


def default_name() -> str:
    """The service's name where the user gives none: this machine's, as users know it."""
    return f"yomiage-{socket.gethostname().split('.')[0]}"


def service_info(name: str, address: str, port: int) -> AsyncServiceInfo:
    """What the server announces: the Wyoming service ``name`` at ``address``:``port``."""
    host = socket.gethostname().split(".")[0]
    return AsyncServiceInfo(
        ZEROCONF_TYPE,
        f"{name}.{ZEROCONF_TYPE}",
        addresses=[ipaddress.ip_address(address).packed],
        port=port,
        properties={ZEROCONF_MARK: ZEROCONF_MARK_VERSION},
        server=f"{host}.local.",
    )


def outward_address() -> str:
    """The address other machines reach this one at: the one the default route leaves from
    (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


class Announcement:
    """The service registered while the server runs (``start`` after it listens, ``stop``
    before it closes)."""

    def __init__(self, info: AsyncServiceInfo) -> None:
        self.info = info
        self._zeroconf: AsyncZeroconf | None = None

    async def start(self) -> None:
        self._zeroconf = AsyncZeroconf(ip_version=IPVersion.V4Only)
        await self._zeroconf.async_register_service(self.info)
        _LOGGER.info("announced as %s on the local network (zeroconf)", self.info.name)

    async def stop(self) -> None:
        if self._zeroconf is None:
            return
        await self._zeroconf.async_unregister_service(self.info)
        await self._zeroconf.async_close()
        self._zeroconf = None
