"""Home Assistant's frontend in a real browser: Debian's Chromium, driven by Playwright (its pip
wheel brings the driver; no browser is downloaded), signed in with the owner's tokens from
onboarding, as the frontend keeps them itself (localStorage ``hassTokens``).

The checks read what the user sees: the text of an element and of every shadow root below it,
and the labels the browser draws cut short (``text-overflow: ellipsis`` on text wider than its
box).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Locator, Page, sync_playwright

from tests.ui_text import english_words

from .hass import Hass

CHROMIUM = "/usr/bin/chromium"  # Debian's package (scripts/setup)

# Visible text nodes below an element, through open shadow roots and slots, in document order;
# code (a command, a file name) is not prose and is left out.
_VISIBLE_TEXT = """root => {
  const texts = [];
  const walk = node => {
    if (node.nodeType === Node.TEXT_NODE) {
      const text = node.textContent.trim();
      if (text) texts.push(text);
      return;
    }
    if (node.nodeType === Node.ELEMENT_NODE) {
      const style = getComputedStyle(node);
      if (style.display === "none" || style.visibility === "hidden") return;
      if (["STYLE", "SCRIPT", "CODE", "TEMPLATE"].includes(node.tagName)) return;
      if (node.shadowRoot) { walk(node.shadowRoot); return; }
      if (node.tagName === "SLOT") { node.assignedNodes({flatten: true}).forEach(walk); return; }
    }
    node.childNodes.forEach(walk);
  };
  walk(root);
  return texts;
}"""

# Elements below ``root`` whose text the browser cuts with an ellipsis.
_CUT_TEXT = """root => {
  const cut = [];
  const walk = node => {
    const element = node.nodeType === Node.ELEMENT_NODE;
    if (!element && node.nodeType !== Node.DOCUMENT_FRAGMENT_NODE) return;
    if (element) {
      const style = getComputedStyle(node);
      if (style.display === "none") return;
      if (style.textOverflow === "ellipsis" && node.scrollWidth > node.clientWidth + 1) {
        cut.push(node.textContent.trim());
      }
      if (node.shadowRoot) walk(node.shadowRoot);
    }
    node.childNodes.forEach(walk);
  };
  walk(root);
  return cut;
}"""

_RAW_TEXT = re.compile(r"component\.yomiage\.|\bui\.[a-z_]+\.|\{[a-z_]+\}|\[%key")


@contextmanager
def signed_in_page(hass: Hass, locale: str) -> Iterator[Page]:
    """A browser page of ``hass``'s frontend, signed in as the owner, in ``locale``."""
    tokens = {
        **hass.tokens,
        "hassUrl": hass.base_url,
        "clientId": hass.client_id,
        "expires": int(time.time() * 1000) + int(hass.tokens["expires_in"]) * 1000,
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"],
        )
        try:
            context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
            stored = json.dumps(json.dumps(tokens))
            context.add_init_script(f"localStorage.setItem('hassTokens', {stored});")
            page = context.new_page()
            # Generous: scripts/test runs this beside the other Home Assistant stack's suite on
            # the same cores, where a dialog once took over 20 s to answer a click.
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def shown_texts(element: Locator) -> list[str]:
    texts: list[str] = element.evaluate(_VISIBLE_TEXT)
    return texts


def check_shown(element: Locator, language: str, where: str) -> list[str]:
    """What ``element`` shows, checked as a user would read it: no raw key or placeholder, no
    markdown left as a backtick, no label cut short, no English sentence in Japanese."""
    texts = shown_texts(element)
    shown = "\n".join(texts)
    assert not _RAW_TEXT.search(shown), (where, shown)
    assert "`" not in shown, (where, shown)
    cut: list[str] = element.evaluate(_CUT_TEXT)
    assert not cut, (where, "cut short", cut)
    if language == "ja":
        english = english_words(shown)
        assert not english, (where, sorted(english), shown)
    return texts


def screenshot(page: Page, folder: Path | None, name: str) -> None:
    """For the record (the issue's note): only where a folder is given."""
    if folder is not None:
        page.screenshot(path=str(folder / f"{name}.png"))
