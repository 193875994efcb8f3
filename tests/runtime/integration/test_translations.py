"""What the frontend shows as plain text, in every language the integration ships: menu labels
are one line cut with "…" (about 56 Latin or 28 full-width characters in the 580 px dialog), and
menu labels and form errors render no markdown (a backtick shows as a backtick). Descriptions
and abort reasons render markdown and may use it. The actions have icons."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ui_text import english_words

INTEGRATION = Path(__file__).resolve().parents[3] / "custom_components" / "yomiage"
LANGUAGES = ["strings.json", "translations/en.json", "translations/ja.json"]
LABEL_WIDTH = 28  # full-width characters a menu label shows in the desktop dialog
# Names, units and identifiers the Japanese texts write in Latin letters, as Home Assistant's
# own Japanese translations do (products, file and folder names, option and action names).


def _width(text: str) -> float:
    """Full-width characters count 1, the others half."""
    return sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.5 for c in text)


def _strings(name: str) -> dict[str, Any]:
    strings: dict[str, Any] = json.loads((INTEGRATION / name).read_text(encoding="utf-8"))
    return strings


@pytest.mark.parametrize("name", LANGUAGES)
def test_menu_labels_fit_one_line_without_markdown(name: str) -> None:
    for step_id, step in _strings(name)["config"]["step"].items():
        for option, label in step.get("menu_options", {}).items():
            assert "`" not in label and "*" not in label, (name, step_id, option, label)
            assert _width(label) <= LABEL_WIDTH, (name, step_id, option, label)


@pytest.mark.parametrize("name", LANGUAGES)
def test_errors_render_as_they_are_written(name: str) -> None:
    strings = _strings(name)
    plain = {
        **{f"config.error.{k}": v for k, v in strings["config"]["error"].items()},
        **{f"options.error.{k}": v for k, v in strings["options"].get("error", {}).items()},
        **{f"exceptions.{k}": v["message"] for k, v in strings["exceptions"].items()},
    }
    for key, text in plain.items():
        assert "`" not in text and "**" not in text, (name, key, text)


def test_every_action_has_an_icon() -> None:
    services = yaml.safe_load((INTEGRATION / "services.yaml").read_text(encoding="utf-8"))
    icons = json.loads((INTEGRATION / "icons.json").read_text(encoding="utf-8"))
    assert set(icons["services"]) == set(services)
    assert all(entry["service"].startswith("mdi:") for entry in icons["services"].values())


@pytest.mark.parametrize("name", LANGUAGES)
def test_placeholders_name_data_never_an_english_message(name: str) -> None:
    """An error's own sentence (English, from the engine, the Hub or the Supervisor) goes to the
    log: a translated text names only data such as a file, an address or a line."""
    text = json.dumps(_strings(name), ensure_ascii=False)
    assert not re.findall(r"\{(message|problem|error|reason)\}", text)


def _texts(tree: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _texts(value, f"{path}.{key}" if path else key)
    elif isinstance(tree, str):
        yield path, tree


def test_the_japanese_texts_are_japanese() -> None:
    """Latin words in the Japanese texts are names (Yomiage, Hugging Face Hub, /share) and
    commands, never English sentences left untranslated."""
    for key, text in _texts(_strings("translations/ja.json")):
        assert not english_words(text), (key, sorted(english_words(text)), text)
