"""Readings for templated Home Assistant text (times, numbers with units, dates, English words)."""


def rewrite(text: str) -> str:
    """Rewrite ``text`` so that OpenJTalk reads it as a person would (identity for now)."""
    return text
