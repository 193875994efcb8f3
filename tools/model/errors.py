"""The one error type of the tools: a problem with a named input file."""

from __future__ import annotations

from pathlib import Path


class ModelFileError(Exception):
    """A missing or malformed model file; the message is one line and names the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
