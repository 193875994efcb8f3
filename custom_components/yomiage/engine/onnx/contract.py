"""What a voice graph must offer, read from the graph: one contract for every exporter's dialect.

Voices come from several exporters, and their graphs differ only in names and ranks:

- ours and hayakoe's: inputs ``x, x_lengths, sid, tone, language, bert, style_vec`` and the
  scalars ``noise_scale, length_scale, noise_scale_w, sdp_ratio`` shaped [1]; output ``audio``
  [1, 1, S], and in hayakoe's current exporter a second output ``durations`` (phone timings,
  left unread: the engine cuts what it needs out of the graph);
- Style-Bert-VITS2's converter (its ONNX files, AivisHub's AIVMX): ``x_tst, x_tst_lengths`` and
  ``tones`` for the first and fourth, the scalars 0-d, output ``output``.

The engine speaks in the first dialect's names (``FEEDS``); a contract renames and reshapes its
feeds for one graph and names the output to read. It is read when a bundle opens (inputs and
outputs only: no node, no weight), so that a graph no dialect fits fails there, with one line
naming the file and what does not fit, never at the first request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import BundleError
from .wire import Interface, WireError, read_interface

# Our names -> the rank each must have; the scalars may be [1] or 0-d.
SEQUENCE_RANKS = {
    "x": 2,
    "x_lengths": 1,
    "sid": 1,
    "tone": 2,
    "language": 2,
    "bert": 3,
    "style_vec": 2,
}
SCALARS = ("noise_scale", "length_scale", "noise_scale_w", "sdp_ratio")
FEEDS = (*SEQUENCE_RANKS, *SCALARS)
# Other dialects' names for ours.
ALIASES = {"x_tst": "x", "x_tst_lengths": "x_lengths", "tones": "tone"}
AUDIO_OUTPUTS = ("audio", "output")
AUDIO_RANK = 3  # [1, 1, samples]
DURATIONS_OUTPUT = "durations"
# The duration predictor's graph takes everything but the synthesizer's sampling noise.
DURATION_FEEDS = tuple(name for name in FEEDS if name != "noise_scale")


@dataclass(frozen=True)
class GraphContract:
    """How to feed one voice graph (our name -> its name and, for scalars, rank) and which of
    its outputs holds what the engine reads."""

    path: Path
    names: dict[str, str]
    scalar_ranks: dict[str, int]
    output: str  # the audio of a synthesizer, the frames per phone of a duration graph

    def feeds(self, values: Mapping[str, NDArray[Any]]) -> dict[str, NDArray[Any]]:
        """``values`` (our names; scalars of any shape) as this graph takes them; values it has
        no input for are left out, and so are its inputs ``values`` lacks (bound otherwise)."""
        fed: dict[str, NDArray[Any]] = {}
        for ours, theirs in self.names.items():
            if ours not in values:
                continue
            value = values[ours]
            if ours in self.scalar_ranks:
                value = np.asarray(value, dtype=np.float32).reshape((1,) * self.scalar_ranks[ours])
            fed[theirs] = value
        return fed

    def cut(self, inputs: set[str], output: str) -> GraphContract:
        """The contract of a part cut out of this graph: it kept the graph inputs ``inputs``
        and gives ``output``."""
        names = {ours: theirs for ours, theirs in self.names.items() if theirs in inputs}
        ranks = {ours: rank for ours, rank in self.scalar_ranks.items() if ours in names}
        return GraphContract(self.path, names, ranks, output)


def synthesizer_contract(path: Path) -> GraphContract:
    """The contract of a synthesizer graph (any dialect); BundleError naming what does not fit."""
    interface = _interface(path)
    names, ranks = _inputs(path, interface, FEEDS)
    audio = [name for name in AUDIO_OUTPUTS if name in interface.outputs]
    if len(audio) != 1:
        raise BundleError(
            str(path),
            "no audio output: expected one output named "
            f"{' or '.join(map(repr, AUDIO_OUTPUTS))} [1, 1, samples], found "
            f"{_described(interface.outputs)}",
        )
    if interface.outputs[audio[0]] not in (AUDIO_RANK, None):
        raise BundleError(
            str(path),
            f"output {audio[0]!r} has rank {interface.outputs[audio[0]]}, expected [1, 1, samples]",
        )
    unknown = set(interface.outputs) - {audio[0], DURATIONS_OUTPUT}
    if unknown:
        raise BundleError(
            str(path),
            f"unknown output {', '.join(map(repr, sorted(unknown)))}: a synthesizer gives "
            f"{audio[0]!r} and optionally {DURATIONS_OUTPUT!r}",
        )
    return GraphContract(path, names, ranks, audio[0])


def duration_contract(path: Path) -> GraphContract:
    """The contract of a duration-predictor graph: the synthesizer's inputs but the noise
    scale, one output of frames per phone."""
    interface = _interface(path)
    names, ranks = _inputs(path, interface, DURATION_FEEDS)
    if list(interface.outputs) != [DURATIONS_OUTPUT]:
        raise BundleError(
            str(path),
            f"expected one output {DURATIONS_OUTPUT!r} [1, phones], found "
            f"{_described(interface.outputs)}",
        )
    return GraphContract(path, names, ranks, DURATIONS_OUTPUT)


def _interface(path: Path) -> Interface:
    try:
        return read_interface(path)
    except (OSError, WireError) as err:
        raise BundleError(str(path), f"not a loadable ONNX graph ({err})") from err


def _inputs(
    path: Path, interface: Interface, wanted: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, int]]:
    """Our name -> the graph's for every input in ``wanted``, and the scalars' ranks."""
    names: dict[str, str] = {}
    for theirs in interface.inputs:
        ours = ALIASES.get(theirs, theirs)
        if ours not in FEEDS:
            raise BundleError(str(path), f"unknown input {theirs!r}: not a SBV2 voice graph")
        names[ours] = theirs
    missing = [name for name in wanted if name not in names]
    if missing:
        raise BundleError(str(path), f"missing input {', '.join(map(repr, missing))}")
    ranks: dict[str, int] = {}
    for ours, theirs in names.items():
        rank = interface.inputs[theirs]
        if ours in SCALARS:
            if rank not in (0, 1, None):
                raise BundleError(
                    str(path), f"input {theirs!r} has rank {rank}: a scalar is [1] or 0-d"
                )
            ranks[ours] = 1 if rank is None else rank
        elif rank not in (SEQUENCE_RANKS[ours], None):
            raise BundleError(
                str(path), f"input {theirs!r} has rank {rank}, expected {SEQUENCE_RANKS[ours]}"
            )
    return names, ranks


def _described(declared: dict[str, int | None]) -> str:
    if not declared:
        return "none"
    return ", ".join(f"{name!r} (rank {rank})" for name, rank in declared.items())
