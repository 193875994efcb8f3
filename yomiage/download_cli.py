"""``yomiage fetch`` and ``yomiage speakers``: voices from the Hub on the command line.

``cli.py`` wires them in with ``add_subcommands(commands)``; each command's handler is stored as
``handler`` (returns the exit status) and raises ``FetchError`` (a ``YomiageError``) on failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from yomiage_engine.hub.download import DEFAULT_REPO, Progress, fetch_bundle, list_offer

_REDRAW_S = 0.1  # a terminal progress line is redrawn at most this often


def add_subcommands(commands: Any) -> None:
    """Add ``fetch`` and ``speakers`` to an ``argparse`` sub-parsers object."""
    fetch = commands.add_parser("fetch", help="download voices from the Hugging Face Hub")
    _add_repo_arguments(fetch)
    fetch.add_argument(
        "--speaker",
        dest="speakers",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="speakers to fetch (repeatable; default: all the repo offers)",
    )
    fetch.add_argument("--to", dest="model_dir", type=Path, required=True, help="bundle folder")
    fetch.set_defaults(handler=fetch_command)

    speakers = commands.add_parser("speakers", help="list the speakers a Hub repo offers")
    _add_repo_arguments(speakers)
    speakers.set_defaults(handler=speakers_command)


def _add_repo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "repo", nargs="?", default=DEFAULT_REPO, help=f"Hub repo id (default {DEFAULT_REPO})"
    )
    parser.add_argument("--revision", default=None, help="branch, tag or commit (default main)")
    parser.add_argument(
        "--token", default=None, help="for private repos (default: HF_TOKEN or a stored login)"
    )


def fetch_command(args: argparse.Namespace) -> int:
    bar = ProgressBar(sys.stderr)
    root = fetch_bundle(
        args.model_dir,
        args.repo,
        speakers=args.speakers,
        revision=args.revision,
        token=args.token,
        progress=bar.update,
    )
    bar.close()
    print(f"bundle ready: {root}")
    return 0


def speakers_command(args: argparse.Namespace) -> int:
    offer = list_offer(args.repo, revision=args.revision, token=args.token)
    print(f"{offer.repo_id} @ {offer.revision} ({offer.commit[:12]})")
    print(f"  BERT + tokenizer      {_mb(offer.download_size([])):>10}")
    for name in offer.speakers:
        print(f"  {name:<20}  {_mb(offer.speaker_size(name)):>10}")
    return 0


class ProgressBar:
    """One redrawn line on a terminal; elsewhere (logs, pipes) a line per tenth of the way."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.interactive = stream.isatty()
        self.last_draw = 0.0
        self.last_tenth = -1
        self.started = time.monotonic()
        self.first_done: int | None = None

    def update(self, progress: Progress) -> None:
        if self.first_done is None:
            self.first_done = progress.done_bytes  # bytes already on disk: not part of the rate
        if self.interactive:
            self._redraw(progress)
        elif (tenth := int(progress.fraction * 10)) > self.last_tenth:
            self.last_tenth = tenth
            print(self._line(progress), file=self.stream, flush=True)

    def close(self) -> None:
        if self.interactive:
            print(file=self.stream, flush=True)

    def _redraw(self, progress: Progress) -> None:
        now = time.monotonic()
        finished = progress.done_bytes >= progress.total_bytes
        if now - self.last_draw < _REDRAW_S and not finished:
            return
        self.last_draw = now
        print(f"\r{self._line(progress)}\033[K", end="", file=self.stream, flush=True)

    def _line(self, progress: Progress) -> str:
        filled = round(progress.fraction * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.monotonic() - self.started
        rate = (progress.done_bytes - (self.first_done or 0)) / elapsed if elapsed > 0 else 0.0
        name = Path(progress.path).name if progress.path else ""
        return (
            f"[{bar}] {progress.fraction:6.1%} {_mb(progress.done_bytes)} / "
            f"{_mb(progress.total_bytes)}  {rate / 1e6:5.1f} MB/s  {name}"
        )


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
