"""The flags ``yomiage say``, ``voices`` and ``serve`` share: the engine's and the synthesis
options'."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from yomiage_engine import OPTION_LIMITS, OPTION_SWITCHES, SynthesisOptions, default_cache_dir

if TYPE_CHECKING:
    from yomiage_engine import Engine

_DEFAULTS = SynthesisOptions()
_UNITS = {"volume": "dB", "lead_silence": "ms"}


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundle", type=Path, required=True, help="voice bundle folder")
    parser.add_argument(
        "--language-model",
        type=Path,
        default=None,
        metavar="BUNDLE",
        help="a bundle whose BERT serves voices that come without one (a folder of .aivmx "
        "files; default: a bundle folder beside --bundle)",
    )
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads (default: physical cores, within a CPU quota)",
    )
    parser.add_argument(
        "--graph-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where graphs prepared for this CPU are kept (default: {default_cache_dir()})",
    )


def engine_from(args: argparse.Namespace) -> Engine:
    """The engine the engine flags ask for (heavy: imports onnxruntime, loads BERT)."""
    from yomiage_engine import Engine

    return Engine(
        args.bundle,
        device=args.device,
        threads=args.threads,
        graph_cache=args.graph_cache,
        language_model=args.language_model,
    )


def add_synthesis_flags(parser: argparse.ArgumentParser, scope: str) -> None:
    """``--speed`` … ``--lead-silence``, ``--no-normalize`` and ``--no-smooth-start``;
    ``scope`` says whom they are for in the help ("for every request")."""
    for name, (low, high) in OPTION_LIMITS.items():
        default = getattr(_DEFAULTS, name)
        unit = _UNITS.get(name)
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=float,
            default=default,
            metavar=unit.upper() if unit else None,
            help=f"{scope}: {low:g} to {high:g}{f' {unit}' if unit else ''} (default {default:g})",
        )
    parser.add_argument(
        "--no-normalize",
        dest="normalize",
        action="store_false",
        help=f"{scope}: the model's raw loudness (default: -16 LUFS, true peak under -1 dBTP)",
    )
    parser.add_argument(
        "--no-smooth-start",
        dest="smooth_start",
        action="store_false",
        help=f"{scope}: no lead of silence before a whole message on a box slower than real"
        " time (default: just enough that it then plays without a wait)",
    )


def synthesis_options(args: argparse.Namespace, voice: str | None) -> SynthesisOptions:
    """The options the flags chose, checked."""
    values = {name: getattr(args, name) for name in (*OPTION_LIMITS, *OPTION_SWITCHES)}
    return SynthesisOptions(voice=voice, **values).validated()
