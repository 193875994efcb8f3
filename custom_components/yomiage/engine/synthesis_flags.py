"""The synthesis options as command-line flags, one set for ``yomiage say`` and ``serve``."""

from __future__ import annotations

import argparse

from .options import OPTION_LIMITS, SynthesisOptions

_DEFAULTS = SynthesisOptions()
_UNITS = {"volume": "dB", "lead_silence": "ms"}


def add_synthesis_flags(parser: argparse.ArgumentParser, scope: str) -> None:
    """``--speed`` … ``--lead-silence`` and ``--no-normalize``; ``scope`` says whom they are
    for in the help ("for every request")."""
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


def synthesis_options(args: argparse.Namespace, voice: str | None) -> SynthesisOptions:
    """The options the flags chose, checked."""
    values = {name: getattr(args, name) for name in (*OPTION_LIMITS, "normalize")}
    return SynthesisOptions(voice=voice, **values).validated()
