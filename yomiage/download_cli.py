"""``yomiage fetch`` and ``yomiage speakers``: voices from the Hugging Face Hub or AivisHub on the
command line.

A source is a Hub repo id (``owner/name``), or an AivisHub model's page URL or UUID: its AIVMX file
goes into the folder, and the official voices' language model (BERT) into a folder beside it once,
where the engine finds it (a folder of voices takes the language model of a bundle beside it).
``cli.py`` wires them in with ``add_subcommands(commands)``; each command's handler is stored as
``handler`` (returns the exit status) and raises ``FetchError`` (a ``YomiageError``) on failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from yomiage_engine import InvalidOptionError
from yomiage_engine.aivm import SUFFIX
from yomiage_engine.bundle import find_language_model
from yomiage_engine.hub.aivishub import (
    AivisModel,
    fetch_model,
    installed_models,
    model_detail,
    model_uuid,
)
from yomiage_engine.hub.download import DEFAULT_REPO, Progress, fetch_bundle, list_offer
from yomiage_engine.hub.errors import megabytes

_REDRAW_S = 0.1  # a terminal progress line is redrawn at most this often


def add_subcommands(commands: Any) -> None:
    """Add ``fetch`` and ``speakers`` to an ``argparse`` sub-parsers object."""
    fetch = commands.add_parser(
        "fetch", help="download voices from the Hugging Face Hub or a model of AivisHub"
    )
    _add_repo_arguments(fetch)
    fetch.add_argument(
        "--speaker",
        dest="speakers",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="speakers to fetch (repeatable; default: all the repo offers; Hub repos only)",
    )
    fetch.add_argument(
        "--to", dest="model_dir", type=Path, required=True, help="bundle folder, or voices folder"
    )
    fetch.add_argument(
        "--keep-installed",
        action="store_true",
        help="an AivisHub model already in the folder is kept as it is, without asking AivisHub "
        "(a start that needs no network; updates come when asked for)",
    )
    fetch.set_defaults(handler=fetch_command)

    speakers = commands.add_parser(
        "speakers", help="list the speakers a Hub repo or an AivisHub model offers"
    )
    _add_repo_arguments(speakers)
    speakers.set_defaults(handler=speakers_command)


def _add_repo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "repo",
        nargs="?",
        default=DEFAULT_REPO,
        help=f"Hub repo id (default {DEFAULT_REPO}), or an AivisHub model's page URL or UUID",
    )
    parser.add_argument("--revision", default=None, help="branch, tag or commit (default main)")
    parser.add_argument(
        "--token", default=None, help="for private repos (default: HF_TOKEN or a stored login)"
    )


def fetch_command(args: argparse.Namespace) -> int:
    uuid = _aivishub_model(args)
    if uuid is not None:
        if args.keep_installed and uuid in installed_models(args.model_dir):
            print(f"voice ready: {args.model_dir / uuid}{SUFFIX} (kept as installed)")
            return 0
        return _fetch_aivishub(uuid, args.model_dir)
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
    uuid = _aivishub_model(args)
    if uuid is not None:
        _describe(model_detail(uuid))
        return 0
    offer = list_offer(args.repo, revision=args.revision, token=args.token)
    print(f"{offer.repo_id} @ {offer.revision} ({offer.commit[:12]})")
    print(f"  BERT + tokenizer      {megabytes(offer.download_size([])):>10}")
    for name in offer.speakers:
        print(f"  {name:<20}  {megabytes(offer.speaker_size(name)):>10}")
    return 0


def _aivishub_model(args: argparse.Namespace) -> str | None:
    """The AivisHub model the source names; None for a Hub repo id (owner/name). A flag of the
    other kind of source is refused."""
    keep = getattr(args, "keep_installed", False)
    if "/" in args.repo and "aivm-models/" not in args.repo:
        if keep:
            raise InvalidOptionError("--keep-installed is for AivisHub models", "keep_installed")
        return None
    hub_only = [flag for flag in ("speakers", "revision", "token") if getattr(args, flag, None)]
    if hub_only:
        flag = hub_only[0].removesuffix("s")
        raise InvalidOptionError(f"--{flag} is for Hugging Face repos, not AivisHub", flag)
    return model_uuid(args.repo)


def _fetch_aivishub(uuid: str, folder: Path) -> int:
    model = model_detail(uuid)
    _describe(model)
    bar = ProgressBar(sys.stderr)
    path = fetch_model(folder, model, progress=bar.update)
    bar.close()
    beside = folder.expanduser().resolve().parent
    if find_language_model(sorted(p for p in beside.iterdir() if p.is_dir())) is None:
        print(f"the language model (BERT) from {DEFAULT_REPO}, once for every voice beside it:")
        bar = ProgressBar(sys.stderr)
        fetch_bundle(beside / DEFAULT_REPO.replace("/", "--"), speakers=[], progress=bar.update)
        bar.close()
    print(f"voice ready: {path}")
    return 0


def _describe(model: AivisModel) -> None:
    print(f"{model.name} by {model.author} ({model.page})")
    print(f"  version {model.file.version}, {megabytes(model.file.size)}")
    print(f"  licence: {model.file.license_type}")
    for speaker in model.speakers:
        print(f"  {speaker.name}: {', '.join(speaker.styles)}")


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
            f"[{bar}] {progress.fraction:6.1%} {megabytes(progress.done_bytes)} / "
            f"{megabytes(progress.total_bytes)}  {rate / 1e6:5.1f} MB/s  {name}"
        )
