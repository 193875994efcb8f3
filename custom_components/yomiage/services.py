"""The ``yomiage.prepare`` action: render a message ahead into Home Assistant's own TTS cache.

A wake-up alarm is known in advance; on a slow box its synthesis takes longer than its playing.
Prepared a few minutes early, the later ``tts.speak`` on a media player (or a play of the same
TTS media source) finds the audio under the same cache key (message, language, options, engine)
and plays at once: the engine is not run again. A prepared message never played costs only
cache space, as Home Assistant's cache rules. An Assist satellite's announcement asks for the
message with its pipeline's engine, language and voice and its own audio format, not with
options of the automation's: for the satellites named, the message is prepared as each will ask
for it. Nobody listens while a message is prepared: it is rendered without a smooth start's
lead of silence, which would otherwise be cached with it and played later for nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

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
ATTR_SATELLITES = "satellites"
# True inside a prepare: the Yomiage entity then renders without a smooth start (the module's
# docstring). Home Assistant runs the synthesis in the action's context, or in tasks made from it.
PREPARING: ContextVar[bool] = ContextVar("yomiage_preparing", default=False)

PREPARE_SCHEMA = vol.All(
    vol.Schema(
        {
            vol.Optional(ATTR_ENTITY_ID, default=[]): cv.entity_ids,
            vol.Optional(ATTR_SATELLITES, default=[]): cv.entity_ids,
            vol.Required(ATTR_MESSAGE): cv.string,
            vol.Optional(ATTR_LANGUAGE): cv.string,
            vol.Optional(ATTR_OPTIONS, default={}): dict,
        }
    ),
    vol.Any(
        vol.Schema({vol.Required(ATTR_ENTITY_ID): vol.Length(min=1)}, extra=vol.ALLOW_EXTRA),
        vol.Schema({vol.Required(ATTR_SATELLITES): vol.Length(min=1)}, extra=vol.ALLOW_EXTRA),
        msg="name a Yomiage entity, an Assist satellite, or both",
    ),
)


def async_register_services(hass: HomeAssistant) -> None:
    hass.services.async_register(DOMAIN, SERVICE_PREPARE, _async_prepare, schema=PREPARE_SCHEMA)


async def _async_prepare(call: ServiceCall) -> None:
    """Synthesize the message now into Home Assistant's TTS cache (its file cache too, where
    that is on): for each Yomiage entity as ``tts.speak`` with these options will ask, for each
    satellite as its announcement will. Every target is checked before any is rendered."""
    hass = call.hass
    renders = _renders(hass, call)
    preparing = PREPARING.set(True)
    try:
        for render in renders:
            media_id = tts.generate_media_source_id(
                hass,
                call.data[ATTR_MESSAGE],
                engine=render.engine,
                language=render.language,
                options=render.options,
                cache=True,
            )
            await tts.async_get_media_source_audio(hass, media_id)
    finally:
        PREPARING.reset(preparing)


@dataclass(frozen=True)
class _Render:
    """What a later play will ask Home Assistant's TTS for, besides the message."""

    engine: str
    language: str | None  # None: the entity's, as tts.speak
    options: dict[str, Any]


def _renders(hass: HomeAssistant, call: ServiceCall) -> list[_Render]:
    registry = er.async_get(hass)
    language = call.data.get(ATTR_LANGUAGE)
    renders = []
    for entity_id in call.data[ATTR_ENTITY_ID]:
        if not _is_yomiage_entity(registry, entity_id):
            raise ServiceValidationError(
                translation_domain=DOMAIN,
                translation_key="not_a_yomiage_entity",
                translation_placeholders={"entity_id": entity_id},
            )
        renders.append(_Render(entity_id, language, dict(call.data[ATTR_OPTIONS])))
    for satellite_id in call.data[ATTR_SATELLITES]:
        render = _announcement_render(hass, satellite_id)
        if not _is_yomiage_entity(registry, render.engine):
            raise ServiceValidationError(
                translation_domain=DOMAIN,
                translation_key="satellite_not_yomiage",
                translation_placeholders={"satellite": satellite_id, "entity_id": render.engine},
            )
        renders.append(render)
    return renders


def _is_yomiage_entity(registry: er.EntityRegistry, entity_id: str) -> bool:
    entry = registry.async_get(entity_id)
    return entry is not None and entry.platform == DOMAIN and entry.domain == Platform.TTS


def _announcement_render(hass: HomeAssistant, satellite_id: str) -> _Render:
    """The engine, language and options an ``assist_satellite.announce`` on ``satellite_id``
    will ask Home Assistant's TTS for: its pipeline's, with the satellite's audio format."""
    # Imported here: Assist is optional, and loading it is not this integration's to do.
    from homeassistant.components.assist_pipeline.pipeline import async_get_pipeline
    from homeassistant.components.assist_satellite.const import DATA_COMPONENT

    component = hass.data.get(DATA_COMPONENT)
    satellite = None if component is None else component.get_entity(satellite_id)
    if satellite is None:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="not_a_satellite",
            translation_placeholders={"entity_id": satellite_id},
        )
    # The satellite's own lookup of its pipeline select, as its announcement makes it.
    pipeline = async_get_pipeline(hass, satellite._resolve_pipeline())
    engine = tts.async_resolve_engine(hass, pipeline.tts_engine)
    if engine is None:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="satellite_without_tts",
            translation_placeholders={"entity_id": satellite_id},
        )
    options: dict[str, Any] = {}
    if pipeline.tts_voice is not None:
        options[tts.ATTR_VOICE] = pipeline.tts_voice
    options.update(satellite.tts_options or {})
    return _Render(engine, pipeline.tts_language, options)
