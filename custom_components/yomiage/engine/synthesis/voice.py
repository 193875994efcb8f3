"""One speaker: its id and style vectors, fed to the graphs of its synthesizer file.

A voice turns a ``SentenceInput`` into the feeds of its file's graphs (graphs.py: shared by the
speakers of one file); how a sentence is cut into decoder runs, and when they run, is decided
elsewhere (pieces.py, turns.py).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from ..aivm import STYLE_VECTORS_KEY as AIVM_STYLE_VECTORS
from ..bundle import SpeakerFiles
from ..errors import BundleError, UnknownVoiceError
from ..onnx.contract import VoiceShape
from ..text.frontend import PhoneSequence
from .decode_speed import DecodeSpeed
from .graphs import Feeds, Fronted, VoiceGraphs
from .turns import RunGate, run_plainly


@dataclass(frozen=True)
class ModelInputs:
    """The scalar inputs every SBV2 graph takes, already in the graph's terms."""

    length_scale: float  # duration multiplier: 1 / speed
    sdp_ratio: float
    noise_scale: float
    noise_scale_w: float


@dataclass(frozen=True)
class SentenceInput:
    """What every graph of a voice reads for one sentence."""

    sequence: PhoneSequence
    # Features per phone: float32 [hidden, phones] on the host, or an OrtValue [1, hidden,
    # phones] already where the sessions run (device_path.py).
    bert: NDArray[np.float32] | ort.OrtValue
    style_vector: NDArray[np.float32]
    inputs: ModelInputs


class Voice:
    """A speaker of a bundle: a speaker folder, or one speaker of an AIVMX file."""

    def __init__(
        self, files: SpeakerFiles, graphs: VoiceGraphs, bert_width: int, language_model: str
    ) -> None:
        """``graphs``: its synthesizer file's (shared with the file's other speakers);
        ``bert_width``: the hidden size of the bundle's language model (``language_model``, as
        shown in errors). Style vectors that cannot be read raise BundleError here, graphs made
        for other features or another speaker table VoiceMismatchError."""
        self.files = files
        self.name = files.name
        self.styles = list(files.config.styles)
        self.graphs = graphs
        self._style_vectors = _load_style_vectors(files)
        shape = VoiceShape(bert_width, self._style_vectors.shape[1], files.config.speaker_id)
        shown_vectors = (
            f"{files.style_vectors.name}'s {AIVM_STYLE_VECTORS}"
            if files.embedded_style_vectors
            else files.style_vectors.name
        )
        graphs.check_fits(shape, language_model, shown_vectors)

    @property
    def hop(self) -> int:
        """Samples per latent frame."""
        return self.files.config.hop_length

    @property
    def decode_speed(self) -> DecodeSpeed:
        return self.graphs.decode_speed

    @property
    def has_duration_pass(self) -> bool:
        return self.graphs.has_duration_pass

    def style_vector(self, style: str, weight: float) -> NDArray[np.float32]:
        """mean + (style - mean) * weight, where row 0 holds the mean (Neutral) style."""
        row = self.files.config.styles.get(style)
        if row is None:
            raise UnknownVoiceError(
                f"speaker {self.name!r} has no style {style!r}; styles: {', '.join(self.styles)}"
            )
        mean = self._style_vectors[0]
        weighted: NDArray[np.float32] = (mean + (self._style_vectors[row] - mean) * weight).astype(
            np.float32
        )
        return weighted

    def synthesize(self, sentence: SentenceInput) -> NDArray[np.float32]:
        """The sentence's audio from one run of the whole synthesizer, float32 [samples]."""
        return self.graphs.synthesize(self._values(sentence), _on_device(sentence))

    def front(self, sentence: SentenceInput) -> Fronted | None:
        """The sentence through the synthesizer's front, for ``decode``; None where the
        synthesizer runs whole (its graph cannot be cut, or the features lie on a device)."""
        if _on_device(sentence) is not None:
            return None
        return self.graphs.front(self._values(sentence))

    def decode(
        self, fronted: Fronted, span: tuple[int, int], gate: RunGate = run_plainly
    ) -> NDArray[np.float32]:
        """Samples of the frames ``span`` of a fronted sentence (graphs.VoiceGraphs.decode)."""
        return self.graphs.decode(fronted, span, gate)

    def durations(self, sentence: SentenceInput) -> NDArray[np.float32] | None:
        """Predicted frames per phone, float32 [phones]; None when the voice has no duration
        pass (``has_duration_pass``)."""
        return self.graphs.durations(self._values(sentence), _on_device(sentence))

    def _values(self, sentence: SentenceInput) -> Feeds:
        """Every input a voice graph may take, in our names (contract.FEEDS), on the host: all
        but ``bert`` where it lies on the device."""
        sequence, inputs = sentence.sequence, sentence.inputs
        values: Feeds = {
            "x": sequence.phones[np.newaxis, :],
            "x_lengths": np.array([sequence.phones.shape[0]], dtype=np.int64),
            "sid": np.array([self.files.config.speaker_id], dtype=np.int64),
            "tone": sequence.tones[np.newaxis, :],
            "language": sequence.languages[np.newaxis, :],
            "style_vec": sentence.style_vector[np.newaxis, :],
            "noise_scale": np.array(inputs.noise_scale, dtype=np.float32),
            "length_scale": np.array(inputs.length_scale, dtype=np.float32),
            "noise_scale_w": np.array(inputs.noise_scale_w, dtype=np.float32),
            "sdp_ratio": np.array(inputs.sdp_ratio, dtype=np.float32),
        }
        if not isinstance(sentence.bert, ort.OrtValue):
            values["bert"] = sentence.bert[np.newaxis, :, :]
        return values


def _on_device(sentence: SentenceInput) -> ort.OrtValue | None:
    return sentence.bert if isinstance(sentence.bert, ort.OrtValue) else None


def _load_style_vectors(files: SpeakerFiles) -> NDArray[np.float32]:
    path = files.style_vectors
    source = io.BytesIO(files.embedded_style_vectors) if files.embedded_style_vectors else path
    try:
        vectors = np.load(source, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise BundleError(str(path), f"not a readable .npy array ({err})") from err
    styles = files.config.styles
    if vectors.ndim != 2 or vectors.shape[0] == 0:
        raise BundleError(str(path), f"expected shape [styles, dimensions], got {vectors.shape}")
    if max(styles.values()) >= vectors.shape[0] or min(styles.values()) < 0:
        raise BundleError(
            str(path),
            f"has {vectors.shape[0]} rows but config.json names rows {sorted(styles.values())}",
        )
    return np.asarray(vectors, dtype=np.float32)
