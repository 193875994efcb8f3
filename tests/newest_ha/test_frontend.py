"""Yomiage as a user meets it in Home Assistant's own frontend (the newest release, Chromium),
in English and then with Home Assistant and the browser in Japanese: the add flow's menu, the
official voices and a voice from AivisHub without a network, a voice folder added, the options
and the media panel's *Say*. Every dialog is read as the user reads it (tests/newest_ha/browser.py):
no raw key, no backtick, no label cut short, no English in the Japanese UI.
``YOMIAGE_SCREENSHOTS`` names a folder for the screenshots of each step."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from .browser import check_shown, screenshot, signed_in_page
from .hass import REPO_ROOT, Hass, our_problems

TRANSLATIONS = REPO_ROOT / "custom_components" / "yomiage" / "translations"
LOCALES = {"en": "en-US", "ja": "ja-JP"}
ENTITY_NAME = "Yomiage tiny"  # the entry's title (the folder's name) under our brand
MESSAGES = {"en": "おはようございます。", "ja": "今日は晴れです。"}
FLOW_DIALOG = "dialog-data-entry-flow"
SAY = {"en": "Say", "ja": "発言"}  # the media panel's button, in the frontend's own words
CHECK_TIMEOUT_MS = 60_000  # the flow loads and checks the bundle before it answers
AIVISHUB_PAGE = "https://hub.aivis-project.com/aivm-models/797d6d8d-647e-5f8b-a997-4d5f5bcb91f1"


def ours(language: str) -> dict[str, Any]:
    texts: dict[str, Any] = json.loads((TRANSLATIONS / f"{language}.json").read_text())
    return texts


def open_add_flow(page: Page, hass: Hass, title: str) -> None:
    """The integrations page's link for one domain; the frontend asks first whether to set it
    up (the dialog's last button goes on)."""
    page.goto(f"{hass.base_url}/config/integrations/dashboard/add?domain=yomiage")
    page.locator("dialog-box ha-button:visible").last.click()
    expect(page.locator(FLOW_DIALOG).get_by_text(title, exact=True)).to_be_visible()


def close_flow(page: Page, title: str) -> None:
    page.locator(f"{FLOW_DIALOG} ha-icon-button[data-dialog=close]").first.click()
    expect(page.locator(FLOW_DIALOG).get_by_text(title, exact=True)).to_be_hidden()


def walk_add_flow(page: Page, hass: Hass, language: str, shots: Path | None) -> None:
    texts = ours(language)["config"]
    menu = texts["step"]["user"]
    open_add_flow(page, hass, menu["title"])
    dialog = page.locator(FLOW_DIALOG)
    shown = check_shown(dialog, language, "menu")
    # No Supervisor here: the app's choice is left out, every other one is offered.
    offered = [label for option, label in menu["menu_options"].items() if option != "addon"]
    assert set(offered) <= set(shown), (offered, shown)
    screenshot(page, shots, f"{language}-1-menu")

    # The official voices without a network: a form that says why, not the end of the flow.
    dialog.get_by_text(menu["menu_options"]["official"], exact=True).click()
    expect(dialog.get_by_text(texts["error"]["download_offline"], exact=True)).to_be_visible()
    check_shown(dialog, language, "official voices offline")
    screenshot(page, shots, f"{language}-2-official-offline")
    close_flow(page, texts["step"]["official"]["title"])

    # A voice from AivisHub, its page pasted without a network: the form says why.
    open_add_flow(page, hass, menu["title"])
    aivishub = texts["step"]["aivishub"]
    dialog.get_by_text(menu["menu_options"]["aivishub"], exact=True).click()
    expect(dialog.get_by_text(aivishub["title"], exact=True)).to_be_visible()
    check_shown(dialog, language, "AivisHub page form")
    dialog.locator("input").first.fill(AIVISHUB_PAGE)
    dialog.locator("input").first.press("Enter")
    expect(dialog.get_by_text(texts["error"]["aivishub_offline"], exact=True)).to_be_visible()
    check_shown(dialog, language, "AivisHub offline")
    screenshot(page, shots, f"{language}-2-aivishub-offline")
    close_flow(page, aivishub["title"])

    open_add_flow(page, hass, menu["title"])
    dialog.get_by_text(menu["menu_options"]["local"], exact=True).click()
    expect(dialog.get_by_text(texts["step"]["local"]["title"], exact=True)).to_be_visible()
    check_shown(dialog, language, "voice folder form")
    dialog.locator("input").first.fill("voices/tiny")
    dialog.locator("input").first.press("Enter")
    if language == "en":
        # Created: the frontend offers the device's name and area, then "Skip and finish".
        expect(dialog.locator("step-flow-create-entry")).to_be_visible(timeout=CHECK_TIMEOUT_MS)
        check_shown(dialog, language, "created")
        screenshot(page, shots, f"{language}-3-created")
        dialog.get_by_role("button", name="Skip and finish").click()
        expect(dialog.locator("step-flow-create-entry")).to_be_hidden()
    else:
        # The same folder again: the flow ends on our reason, in the user's language.
        already = dialog.get_by_text(texts["abort"]["already_configured"], exact=True)
        expect(already).to_be_visible(timeout=CHECK_TIMEOUT_MS)
        check_shown(dialog, language, "already set up")
        screenshot(page, shots, f"{language}-3-already-set-up")
        close_flow(page, texts["abort"]["already_configured"])


def walk_options(page: Page, hass: Hass, language: str, shots: Path | None) -> None:
    options = ours(language)["options"]["step"]["init"]
    page.goto(f"{hass.base_url}/config/integrations/integration/yomiage")
    page.locator('ha-config-entry-row ha-icon-button[slot="end"]').first.click()
    dialog = page.locator(FLOW_DIALOG)
    expect(dialog.get_by_text(options["title"], exact=True)).to_be_visible()
    shown = check_shown(dialog, language, "options")
    labels = set(options["data"].values())
    assert labels & set(shown), (labels, shown)
    screenshot(page, shots, f"{language}-4-options")
    close_flow(page, options["title"])


def say_in_media_panel(page: Page, hass: Hass, language: str, shots: Path | None) -> None:
    page.goto(f"{hass.base_url}/media-browser/browser")
    page.locator("#grid-text_to_speech").click()
    page.get_by_text(ENTITY_NAME, exact=True).last.click()
    panel = page.locator("ha-browse-media-tts")
    expect(panel).to_be_visible()
    if language == "ja":
        # With Home Assistant in Japanese the panel picks our language itself and shows the
        # voices at once, the default voice first (English: docs/FRONTEND.md).
        voice = panel.locator("ha-tts-voice-picker")
        expect(voice).to_be_visible()
        expect(voice).to_contain_text("tiny-a – ノーマル")
    panel.locator("textarea").fill(MESSAGES[language])
    check_shown(panel, language, "media panel")
    screenshot(page, shots, f"{language}-5-panel")
    with page.expect_response(lambda response: "/api/tts_proxy/" in response.url) as audio:
        panel.get_by_role("button", name=SAY[language], exact=True).click()
    assert audio.value.status == 200, audio.value.status
    assert audio.value.headers["content-type"].startswith("audio/"), audio.value.headers
    screenshot(page, shots, f"{language}-5-say")


def set_system_language(page: Page, hass: Hass, language: str) -> None:
    """Settings → System → General's language, as that page saves it (a websocket command)."""
    page.goto(hass.base_url)
    page.wait_for_function("document.querySelector('home-assistant')?.hass?.connection")
    page.evaluate(
        "language => document.querySelector('home-assistant').hass.callWS("
        "{type: 'config/core/update', language})",
        language,
    )


def test_frontend_in_english_and_japanese(hass_process: Hass) -> None:
    hass = hass_process
    hass.start()
    hass.onboard()
    hass.wait_running()
    folder = os.environ.get("YOMIAGE_SCREENSHOTS")
    shots = Path(folder) if folder else None
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    for language in ("en", "ja"):
        with signed_in_page(hass, LOCALES[language]) as page:
            set_system_language(page, hass, language)
            walk_add_flow(page, hass, language, shots)
            walk_options(page, hass, language, shots)
            say_in_media_panel(page, hass, language, shots)
    assert not our_problems(hass.log())
