"""Web addresses and e-mail addresses, which nobody wants read out character by character.

A URL becomes ユーアールエル and an e-mail address メールアドレス, so that a notification such as
"詳細は https://example.com/… を見てください" still reads as a sentence.
"""

from __future__ import annotations

import re

# ASCII URL characters only (Japanese right after an address is the sentence going on), and not
# a final . , ! ? : ; which end the sentence instead. Sentence splitting (split.py) reads it too:
# a ? or ! inside an address ends no sentence.
URL = re.compile(
    r"\b(?:https?://|www\.)[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*[A-Za-z0-9\-_~/#@$&*+=%]", re.IGNORECASE
)
# Starts only at the beginning of a run (the lookbehind), so a long run is scanned once.
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]++@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b", re.ASCII)


def read_links(text: str) -> str:
    """Replace URLs and e-mail addresses with a short spoken placeholder."""
    if "." not in text:
        return text
    text = URL.sub("ユーアールエル", text)
    return _EMAIL.sub("メールアドレス", text) if "@" in text else text
