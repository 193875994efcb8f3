"""The folder of prepared graphs: where a prepared form of a model file lives, and how it is
replaced. An entry (a file, or a folder of files that belong together) is named after its
source's path and versioned by the source's size, mtime and the settings it was made with, so a
changed model or onnxruntime builds a new one."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def default_cache_dir() -> Path:
    """$YOMIAGE_CACHE_DIR, else $XDG_CACHE_HOME/yomiage, else ~/.cache/yomiage."""
    explicit = os.environ.get("YOMIAGE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "yomiage"


def entries_folder(cache_dir: Path | None) -> Path:
    """Where the prepared graphs of a cache folder (None: ``default_cache_dir``) lie."""
    return (cache_dir or default_cache_dir()) / "sessions"


def drop_source(source: Path, cache_dir: Path | None) -> None:
    """Every entry prepared from ``source``, of every part and version (a voice removed)."""
    resolved = source.resolve()
    folder = entries_folder(cache_dir)
    for entry in folder.glob(f"{resolved.stem}*-{_place(resolved)}-*"):
        drop_entry(entry)


def cache_entry(source: Path, folder: Path, settings: str, suffix: str, label: str = "") -> Path:
    """Where a prepared form of ``source`` lives: named after the source's path (and ``label``,
    for several files made from one source), versioned by its size, mtime and ``settings``
    (everything else the prepared file depends on)."""
    resolved = source.resolve()
    stat = resolved.stat()
    identity = f"{stat.st_size}|{stat.st_mtime_ns}|{settings}"
    version = hashlib.sha256(identity.encode()).hexdigest()[:10]
    name = f"{resolved.stem}.{label}" if label else resolved.stem
    return folder / f"{name}-{_place(resolved)}-{version}{suffix}"


def _place(resolved: Path) -> str:
    """A source's part of its entries' names: the same path, the same entries."""
    return hashlib.sha256(str(resolved).encode()).hexdigest()[:10]


def install_entry(built: Path, entry: Path) -> None:
    """Move a finished file or folder into place atomically; drop older versions of the same
    source. A folder another process installed meanwhile stays (it holds the same)."""
    try:
        os.replace(built, entry)
    except OSError:
        if not entry.is_dir():
            raise
    place = entry.name[: entry.name.rindex("-")]
    for old in entry.parent.glob(f"{place}-*"):
        if old.name != entry.name:
            drop_entry(old)


def drop_entry(entry: Path) -> None:
    """Remove an entry, file or folder, if it is there."""
    if entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)
