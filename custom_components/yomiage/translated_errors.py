"""Engine and server errors as Home Assistant's translated errors.

The translated text says the cause in the user's language, naming only data (an address, a
file, a repository); the engine's own one-line message is English, so it goes to the log, where
whoever looks for the details finds them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from homeassistant.exceptions import HomeAssistantError

from .const import CONF_HOST, CONF_PORT, CONF_REPO_ID, CONF_REVISION, DOMAIN
from .engine import YomiageError

_LOGGER = logging.getLogger(__package__)

_Error = TypeVar("_Error", bound=HomeAssistantError)


def translated(kind: type[_Error], err: YomiageError, **placeholders: str) -> _Error:
    """``err`` as a ``kind`` with its translated text; its message is logged here."""
    _LOGGER.warning("%s (%s)", err, err.translation_key)
    return kind(
        translation_domain=DOMAIN,
        translation_key=err.translation_key,
        translation_placeholders={**err.placeholders, **placeholders},
    )


@contextmanager
def raised_translated(**placeholders: str) -> Iterator[None]:
    """Engine and server errors inside become translated ``HomeAssistantError``s."""
    try:
        yield
    except YomiageError as err:
        raise translated(HomeAssistantError, err, **placeholders) from err


def entry_placeholders(data: Mapping[str, Any]) -> dict[str, str]:
    """What an entry's error texts may name: its server's address, its repository."""
    if CONF_HOST in data:
        return {"address": f"{data[CONF_HOST]}:{data[CONF_PORT]}"}
    if CONF_REPO_ID in data:
        return {"repo": str(data[CONF_REPO_ID]), "revision": str(data.get(CONF_REVISION) or "")}
    return {}
