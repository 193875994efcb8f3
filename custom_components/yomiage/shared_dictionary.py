"""The user dictionary in force: every loaded local entry's words, applied as one.

OpenJTalk's user dictionary (and the English word rule) is process-wide, so two entries cannot
each have their own: their words are merged (entries in the order they were added; for a word in
both, the later entry's reading wins) and the merge is applied whenever an entry loads or unloads.
Its fingerprint goes into every local tts entity's default options, so Home Assistant's cache
key changes for every voice the words affect.
"""

from __future__ import annotations

import asyncio

from homeassistant.core import HomeAssistant
from homeassistant.util.hass_dict import HassKey

from .const import DOMAIN
from .engine.text.readings.user_dict import UserDictionary

DATA_DICTIONARY: HassKey[SharedDictionary] = HassKey(f"{DOMAIN}_user_dictionary")


class SharedDictionary:
    """The words each loaded entry brings, and the fingerprint of what is applied now."""

    def __init__(self) -> None:
        self._by_entry: dict[str, UserDictionary] = {}
        self._lock = asyncio.Lock()
        self.fingerprint = UserDictionary([]).fingerprint

    async def async_set(
        self, hass: HomeAssistant, entry_id: str, words: UserDictionary | None
    ) -> None:
        """Apply the merge with ``entry_id`` bringing ``words`` (None: the entry leaves).

        Raises UserDictionaryError when the merge cannot be compiled; what was applied stays.
        """
        async with self._lock:
            wanted = dict(self._by_entry)
            if words is None:
                wanted.pop(entry_id, None)
            else:
                wanted[entry_id] = words
            merged = _merge(hass, wanted)
            if merged.fingerprint != self.fingerprint:
                # Compiling runs OpenJTalk's dictionary builder: blocking.
                await hass.async_add_executor_job(merged.apply)
            self._by_entry = wanted
            self.fingerprint = merged.fingerprint


def shared_dictionary(hass: HomeAssistant) -> SharedDictionary:
    """The one SharedDictionary of this Home Assistant."""
    return hass.data.setdefault(DATA_DICTIONARY, SharedDictionary())


def _merge(hass: HomeAssistant, by_entry: dict[str, UserDictionary]) -> UserDictionary:
    order = [entry.entry_id for entry in hass.config_entries.async_entries(DOMAIN)]
    ranked = sorted(by_entry, key=lambda entry_id: _rank(order, entry_id))
    return UserDictionary(word for entry_id in ranked for word in by_entry[entry_id].words)


def _rank(order: list[str], entry_id: str) -> int:
    return order.index(entry_id) if entry_id in order else len(order)
