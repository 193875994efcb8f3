"""The one error type of the tools: a problem with a named input file."""

from __future__ import annotations

from pathlib import Path


class ModelFileError(Exception):
    """A missing or malformed model file; the message is one line and names the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def first_line(err: BaseException) -> str:
    """An exception's message cut to one line (for messages that must stay one line)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
