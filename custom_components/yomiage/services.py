"""The ``yomiage.prepare`` action: render a message ahead into Home Assistant's own TTS cache.

A wake-up alarm is known in advance; on a slow box its synthesis takes longer than its playing.
Prepared a few minutes early, the later ``tts.speak`` on a media player (or a play of the same
TTS media source) finds the audio under the same cache key (message, language, options, engine)
and plays at once: the engine is not run again. A prepared message never played costs only
cache space, as Home Assistant's cache rules. (An Assist satellite's announcement adds its
pipeline's voice and its own audio format to the options: not matched yet.) Nobody listens while
a message is prepared: it is rendered without a smooth start's lead of silence, which would
otherwise be cached with it and played later for nothing.
"""

from __future__ import annotations

from contextvars import ContextVar

import voluptuous as vol
from homeassistant.components import tts
from homeassistant.const import ATTR_ENTITY_ID, Platform
from homeassistant.core import HomeAssistant, ServiceCall
from homeassistant.exceptions import ServiceValidationError
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers import entity_registry as er

from .const import DOMAIN

SERVICE_PREPARE = "prepare"
ATTR_MESSAGE = "message"
ATTR_LANGUAGE = "language"
ATTR_OPTIONS = "options"
# True inside a prepare: the Yomiage entity then renders without a smooth start (the module's
# docstring). Home Assistant runs the synthesis in the action's context, or in tasks made from it.
PREPARING: ContextVar[bool] = ContextVar("yomiage_preparing", default=False)

PREPARE_SCHEMA = vol.Schema(
    {
        vol.Required(ATTR_ENTITY_ID): cv.entity_ids,
        vol.Required(ATTR_MESSAGE): cv.string,
        vol.Optional(ATTR_LANGUAGE): cv.string,
        vol.Optional(ATTR_OPTIONS, default={}): dict,
    }
)


def async_register_services(hass: HomeAssistant) -> None:
    hass.services.async_register(DOMAIN, SERVICE_PREPARE, _async_prepare, schema=PREPARE_SCHEMA)


async def _async_prepare(call: ServiceCall) -> None:
    """Synthesize the message now, for each Yomiage entity, into Home Assistant's TTS cache
    (its file cache too, where that is on), as ``tts.speak`` with these options will ask."""
    hass = call.hass
    registry = er.async_get(hass)
    preparing = PREPARING.set(True)
    try:
        await _async_prepare_each(hass, registry, call)
    finally:
        PREPARING.reset(preparing)


async def _async_prepare_each(
    hass: HomeAssistant, registry: er.EntityRegistry, call: ServiceCall
) -> None:
    for entity_id in call.data[ATTR_ENTITY_ID]:
        entry = registry.async_get(entity_id)
        if entry is None or entry.platform != DOMAIN or entry.domain != Platform.TTS:
            raise ServiceValidationError(
                translation_domain=DOMAIN,
                translation_key="not_a_yomiage_entity",
                translation_placeholders={"entity_id": entity_id},
            )
        media_id = tts.generate_media_source_id(
            hass,
            call.data[ATTR_MESSAGE],
            engine=entity_id,
            language=call.data.get(ATTR_LANGUAGE),  # None: the entity's, as tts.speak
            options=dict(call.data[ATTR_OPTIONS]),
            cache=True,
        )
        await tts.async_get_media_source_audio(hass, media_id)
