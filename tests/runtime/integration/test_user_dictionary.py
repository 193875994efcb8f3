"""The user dictionary in the options flow: readings change without a restart, and so does the
cache key; bad lines are refused with the line named; every local entry's words apply together."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pyopenjtalk
import pytest
from homeassistant.components import tts
from homeassistant.config_entries import ConfigEntryState, ConfigFlowResult
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.yomiage.const import CONF_USER_DICTIONARY, DOMAIN, OPTION_DICTIONARY
from custom_components.yomiage.engine.text.readings import user_dict
from custom_components.yomiage.engine.text.readings.user_dict import (
    WORD_PROBLEMS,
    UserDictionary,
    UserDictionaryError,
)
from custom_components.yomiage.shared_dictionary import shared_dictionary
from custom_components.yomiage.user_words import parse_user_words

from .common import engine_of, shown

INTEGRATION = Path(__file__).resolve().parents[3] / "custom_components" / DOMAIN
TEXT = "読上です。"
PLAIN_READING = ["ヨミジョウデス。"]  # OpenJTalk's own guess
WORDS = "# names OpenJTalk gets wrong\nsurface,reading,accent\n\n読上,よみあげ,0\n"
WAV = {tts.ATTR_PREFERRED_FORMAT: "wav", "noise": 0.0, "noise_w": 0.0}


@pytest.fixture(autouse=True)
def _plain_openjtalk() -> Iterator[None]:
    """The dictionary is process-wide: leave OpenJTalk as the next test expects it."""
    yield
    user_dict.reset()


async def _save_words(
    hass: HomeAssistant, entry: MockConfigEntry, text: str | None
) -> ConfigFlowResult:
    """Submit the options form with ``text`` as the words (None: the field left empty)."""
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["type"] is FlowResultType.FORM
    user_input = {} if text is None else {CONF_USER_DICTIONARY: text}
    return await hass.config_entries.options.async_configure(result["flow_id"], user_input)


async def _reading(hass: HomeAssistant, entry: MockConfigEntry) -> list[str]:
    reading: list[str] = await hass.async_add_executor_job(engine_of(entry).reading, TEXT)
    return reading


async def _audio(hass: HomeAssistant, entity_id: str, options: dict[str, Any]) -> bytes:
    media_id = tts.generate_media_source_id(
        hass, TEXT, engine=entity_id, language="ja", options=options
    )
    _, data = await tts.async_get_media_source_audio(hass, media_id)
    return data


async def test_words_change_the_reading_the_audio_and_the_cache_key(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, entity_id: str
) -> None:
    assert await _reading(hass, loaded_entry) == PLAIN_READING
    manager = hass.data[tts.DATA_TTS_MANAGER]
    plain_audio = await _audio(hass, entity_id, WAV)
    keys_before = set(manager.mem_cache)

    result = await _save_words(hass, loaded_entry, WORDS)
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()  # the entry reloads with the words applied

    assert loaded_entry.state is ConfigEntryState.LOADED
    assert loaded_entry.options[CONF_USER_DICTIONARY] == WORDS, "kept as typed (comments too)"
    assert await _reading(hass, loaded_entry) == ["ヨミアゲデス。"]
    entity = hass.data[tts.DATA_COMPONENT].get_entity(entity_id)
    fingerprint = parse_user_words(WORDS).fingerprint
    assert entity.default_options[OPTION_DICTIONARY] == fingerprint
    spoken = await _audio(hass, entity_id, WAV)
    assert set(manager.mem_cache) - keys_before, "the same text and options: a new cache key"
    assert spoken != plain_audio, "and new audio (other phones)"

    result = await _save_words(hass, loaded_entry, None)  # the user empties the field
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    assert await _reading(hass, loaded_entry) == PLAIN_READING
    entity = hass.data[tts.DATA_COMPONENT].get_entity(entity_id)
    assert entity.default_options[OPTION_DICTIONARY] == UserDictionary([]).fingerprint
    assert await _audio(hass, entity_id, WAV) == plain_audio, "the first cache entry again"


@pytest.mark.parametrize(
    ("text", "key", "shown_ja"),
    [
        ("読上,ヨミアゲ,0\n読上,yomiage,0", "dictionary_reading", "2 行目：読み「yomiage」"),
        ("# comment\n\n読上,ヨミアゲ", "dictionary_fields", "3 行目：一語には"),
        ("読上,ヨミアゲ,0,1", "dictionary_fields", "この行は 4 個"),
        ("読上，ヨミアゲ，5", "dictionary_accent_range", "0〜4（「ヨミアゲ」"),  # full-width commas
        ("読上,ヨミアゲ,flat", "dictionary_accent_number", "アクセント「flat」"),
        (",ヨミアゲ,0", "dictionary_empty_surface", "1 行目：表記が空です"),
        ("読 上,ヨミアゲ,0", "dictionary_surface_characters", "表記「読 上」"),
        ("読上Yomi,ヨミアゲ,0", "dictionary_surface_mixed", "表記「読上Yomi」"),
    ],
)
async def test_bad_lines_are_refused_naming_the_line_and_the_problem(
    hass: HomeAssistant,
    loaded_entry: MockConfigEntry,
    text: str,
    key: str,
    shown_ja: str,
) -> None:
    """Each rule a line breaks has its own text, naming the line and the field, in the user's
    language."""
    engine = engine_of(loaded_entry)
    result = await _save_words(hass, loaded_entry, text)
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {CONF_USER_DICTIONARY: key}
    placeholders = result["description_placeholders"]
    assert shown_ja in await shown(hass, "ja", f"options.error.{key}", placeholders)
    await shown(hass, "en", f"options.error.{key}", placeholders)
    words_field = next(k for k in result["data_schema"].schema if k == CONF_USER_DICTIONARY)
    assert words_field.description == {"suggested_value": text}, "what the user typed stays"
    assert CONF_USER_DICTIONARY not in loaded_entry.options
    assert engine_of(loaded_entry) is engine, "nothing saved, nothing reloaded"


def test_dictionary_errors_are_translated() -> None:
    for name in ("strings.json", "translations/en.json", "translations/ja.json"):
        strings = json.loads((INTEGRATION / name).read_text(encoding="utf-8"))
        for key in ("fields", *WORD_PROBLEMS):
            assert "{line}" in strings["options"]["error"][f"dictionary_{key}"], (name, key)
        init = strings["options"]["step"]["init"]
        assert init["data"][CONF_USER_DICTIONARY] and init["data_description"][CONF_USER_DICTIONARY]
        exceptions = strings["exceptions"]
        assert exceptions[UserDictionaryError.translation_key]["message"], name
        assert "{line}" in exceptions["user_dictionary_invalid"]["message"], name


async def test_a_request_prepared_before_the_words_changed_is_spoken_with_them(
    hass: HomeAssistant, loaded_entry: MockConfigEntry, entity_id: str
) -> None:
    """Home Assistant fixes an Assist pipeline's options when the run is prepared (possibly
    before the wake word): its request carries the fingerprint of the words then in force."""
    prepared = shared_dictionary(hass).fingerprint
    result = await _save_words(hass, loaded_entry, WORDS)
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    current = shared_dictionary(hass).fingerprint
    assert current != prepared

    stale = await _audio(hass, entity_id, {**WAV, OPTION_DICTIONARY: prepared})
    assert stale == await _audio(hass, entity_id, {**WAV, OPTION_DICTIONARY: current})


async def test_every_local_entry_brings_its_words(hass: HomeAssistant) -> None:
    """OpenJTalk's dictionary is one per process: the entries' words are merged, the later
    entry's reading winning for a word both have."""
    first, second = MockConfigEntry(domain=DOMAIN), MockConfigEntry(domain=DOMAIN)
    first.add_to_hass(hass)
    second.add_to_hass(hass)
    shared = shared_dictionary(hass)
    empty = shared.fingerprint

    await shared.async_set(
        hass, second.entry_id, parse_user_words("読上,ヨミアゲ,0\n鬼滅,キメツ,0")
    )
    await shared.async_set(hass, first.entry_id, parse_user_words("読上,ヨミノボリ,0"))
    assert pyopenjtalk.g2p("読上と鬼滅", kana=True) == "ヨミアゲトキメツ"
    both = shared.fingerprint

    await shared.async_set(hass, second.entry_id, None)  # the second entry unloads
    assert pyopenjtalk.g2p("読上と鬼滅", kana=True) == "ヨミノボリトオニメツ"
    assert shared.fingerprint not in (both, empty)

    await shared.async_set(hass, first.entry_id, None)
    assert pyopenjtalk.g2p("読上", kana=True) == "ヨミジョー"
    assert shared.fingerprint == empty


async def test_a_dictionary_that_cannot_be_applied_fails_setup(
    hass: HomeAssistant, mock_entry: MockConfigEntry, caplog: pytest.LogCaptureFixture
) -> None:
    hass.config_entries.async_update_entry(mock_entry, options={CONF_USER_DICTIONARY: WORDS})
    broken = UserDictionaryError("/tmp/user.dic: OpenJTalk could not compile it (disk full)")
    with patch.object(UserDictionary, "apply", side_effect=broken):
        assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.SETUP_ERROR
    # The entry's reason in the user's words, OpenJTalk's in the log (Home Assistant 2025.4
    # drops the reason's last full stop).
    expected = await shown(hass, "en", "exceptions.user_dictionary_error.message", None)
    assert mock_entry.reason is not None
    assert mock_entry.reason.rstrip(".") == expected.rstrip(".")
    assert str(broken) in caplog.text


async def test_saved_words_the_rules_now_refuse_fail_setup_naming_the_line(
    hass: HomeAssistant, mock_entry: MockConfigEntry, caplog: pytest.LogCaptureFixture
) -> None:
    hass.config_entries.async_update_entry(
        mock_entry, options={CONF_USER_DICTIONARY: "読上,ヨミアゲ,0\n読上,ヨミアゲ,9"}
    )
    assert not await hass.config_entries.async_setup(mock_entry.entry_id)
    assert mock_entry.state is ConfigEntryState.SETUP_ERROR
    assert mock_entry.reason is not None
    expected = await shown(hass, "en", "exceptions.user_dictionary_invalid.message", {"line": "2"})
    assert mock_entry.reason.rstrip(".") == expected.rstrip(".")
    assert "line 2" in caplog.text


async def test_diagnostics_show_the_fingerprint_not_the_words(
    hass: HomeAssistant, hass_client: ClientSessionGenerator, mock_entry: MockConfigEntry
) -> None:
    hass.config_entries.async_update_entry(mock_entry, options={CONF_USER_DICTIONARY: WORDS})
    assert await async_setup_component(hass, "http", {})
    assert await async_setup_component(hass, "diagnostics", {})
    assert await hass.config_entries.async_setup(mock_entry.entry_id)
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, mock_entry)
    assert "読上" not in json.dumps(diagnostics, ensure_ascii=False)
    assert diagnostics["entry"]["options"][CONF_USER_DICTIONARY] == "**REDACTED**"
    fingerprint = parse_user_words(WORDS).fingerprint
    assert diagnostics["engine"]["user_dictionary_fingerprint"] == fingerprint
