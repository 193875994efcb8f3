"""What a voice graph must offer, read from the graph: one contract for every exporter's dialect.

Voices come from several exporters, and their graphs differ in names, ranks and extra outputs:

- ours and hayakoe's: inputs ``x, x_lengths, sid, tone, language, bert, style_vec`` and the
  scalars ``noise_scale, length_scale, noise_scale_w, sdp_ratio`` shaped [1]; output ``audio``
  [1, 1, S], and in hayakoe's current exporter a second output ``durations`` (frames per phone);
- Style-Bert-VITS2's converter (its ONNX files, AivisHub's AIVMX): ``x_tst, x_tst_lengths`` and
  ``tones`` for the first and fourth, the scalars 0-d, output ``output`` and six more under names
  torch generated (the attention path, masks and latents its ``infer`` returns beside the audio).

The engine speaks in the first dialect's names (``FEEDS``); a contract renames and reshapes its
feeds for one graph and names the outputs speech needs: the audio, and the durations where the
graph gives them. Any other output is left unread (and the graph cuts drop it: decoder_graph.py).
A graph fails only where it cannot speak: an input missing or unknown, of the wrong rank, or of
a fixed size that contradicts the bundle (``check_fits``: BERT width, style vector width, the
speaker's id); no audio output. Read when a bundle opens (declarations only: no weight), so that
such a graph fails there, with one line naming the file and what does not fit, never at the
first request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import BundleError, VoiceMismatchError
from .wire import Interface, Shape, WireError, read_interface

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
# The axis of bert [1, width, phones] and style_vec [1, width] that must match the bundle.
WIDTH_AXIS = 1


@dataclass(frozen=True)
class VoiceShape:
    """What a bundle gives a voice's graphs: the widths of its features and the speaker's id."""

    bert_width: int  # the language model's hidden size
    style_width: int  # columns of the style vectors
    speaker_id: int


@dataclass(frozen=True)
class GraphContract:
    """How to feed one voice graph (our name -> its name and, for scalars, rank) and which of
    its outputs hold what the engine reads."""

    path: Path
    names: dict[str, str]
    scalar_ranks: dict[str, int]
    output: str  # the audio of a synthesizer, the frames per phone of a duration graph
    durations: str | None = None  # a synthesizer's own frames-per-phone output, where it has one
    widths: dict[str, int] = field(default_factory=dict)  # bert / style_vec widths it fixes
    speakers: int | None = None  # rows of its speaker table, where one is found

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

    def check_fits(self, shape: VoiceShape, language_model: str, style_vectors: str) -> None:
        """VoiceMismatchError (one line) where the graph was made for other features or
        speakers than the bundle gives it; ``language_model``, ``style_vectors``: those files,
        as shown."""
        bert, style = self.widths.get("bert"), self.widths.get("style_vec")
        if bert is not None and bert != shape.bert_width:
            raise VoiceMismatchError(
                str(self.path),
                f"input {self.names['bert']!r} takes {bert}-wide features but the language "
                f"model ({language_model}) gives {shape.bert_width}: the voice needs another one",
            )
        if style is not None and style != shape.style_width:
            raise VoiceMismatchError(
                str(self.path),
                f"input {self.names['style_vec']!r} takes {style}-wide style vectors but "
                f"{style_vectors} holds {shape.style_width}-wide ones",
            )
        if self.speakers is not None and not 0 <= shape.speaker_id < self.speakers:
            raise VoiceMismatchError(
                str(self.path),
                f"speaker id {shape.speaker_id} is not in its speaker table "
                f"(ids 0 to {self.speakers - 1})",
            )


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
    declared = interface.outputs[audio[0]]
    if declared is not None and len(declared) != AUDIO_RANK:
        raise BundleError(
            str(path),
            f"output {audio[0]!r} has rank {len(declared)}, expected [1, 1, samples]",
        )
    durations = DURATIONS_OUTPUT if DURATIONS_OUTPUT in interface.outputs else None
    return GraphContract(
        path,
        names,
        ranks,
        audio[0],
        durations,
        _widths(interface, names),
        _speaker_rows(interface, names["sid"]),
    )


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
    return GraphContract(
        path,
        names,
        ranks,
        DURATIONS_OUTPUT,
        widths=_widths(interface, names),
        speakers=_speaker_rows(interface, names["sid"]),
    )


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
        shape = interface.inputs[theirs]
        rank = None if shape is None else len(shape)
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


def _widths(interface: Interface, names: dict[str, str]) -> dict[str, int]:
    """The feature widths the graph fixes (bert's, style_vec's), in our names."""
    widths: dict[str, int] = {}
    for ours in ("bert", "style_vec"):
        shape = interface.inputs[names[ours]]
        width = None if shape is None else shape[WIDTH_AXIS]
        if width is not None:
            widths[ours] = width
    return widths


def _speaker_rows(interface: Interface, sid: str) -> int | None:
    """Rows of the speaker table the ``sid`` input indexes (SBV2's ``emb_g``: a Gather from a
    [speakers, gin] weight); None where the graph reads it otherwise."""
    for node in interface.nodes("Gather"):
        axis = node.attribute("axis")
        if len(node.inputs) == 2 and node.inputs[1] == sid and not (axis and axis.i):
            dims = interface.initializer_dims.get(node.inputs[0])
            if dims is not None and len(dims) == 2:
                return dims[0]
    return None


def _described(declared: Mapping[str, Shape | None]) -> str:
    if not declared:
        return "none"
    return ", ".join(
        f"{name!r} (rank {'?' if shape is None else len(shape)})"
        for name, shape in declared.items()
    )
