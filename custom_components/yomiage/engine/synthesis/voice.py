"""One speaker: style vectors, synthesizer and duration-predictor sessions (both lazy).

A voice runs graphs on one ``SentenceInput``; how a sentence is cut into decoder runs, and when
they run, is decided elsewhere (pieces.py, turns.py). On the CPU the synthesizer runs as two
cached halves when its graph allows (decoder_graph.py): the front (text encoder, durations,
flow) once per sentence, then the decoder over spans of its frames. Whatever exporter wrote the
graphs, their contracts (onnx/contract.py) rename and reshape the feeds: one path for all.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from ..bundle import SpeakerFiles
from ..errors import BundleError, UnknownVoiceError
from ..onnx.contract import GraphContract, duration_contract, synthesizer_contract
from ..onnx.sessions import SessionFactory, SplitSessions
from ..text.frontend import PhoneSequence
from .pieces import DecodeSpeed, decode_window
from .turns import RunGate, run_plainly


@dataclass(frozen=True)
class Fronted:
    """A sentence after the synthesizer's front: what its decoder reads, ``frames`` long, and
    the decoder's ``context`` (frames of overlap a decoded span needs either side)."""

    boundary: dict[str, NDArray[Any]]  # float32; the time-aligned ones [.., frames]
    frames: int
    context: int


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
    """A speaker folder of a bundle. Sessions are created on first use and shared by all threads."""

    def __init__(
        self,
        files: SpeakerFiles,
        sessions: SessionFactory,
        decode_speed: DecodeSpeed | None = None,
    ) -> None:
        """``decode_speed``: shared by the speakers of a bundle (one architecture, one machine).
        Reads the graphs' contracts now: a graph no dialect fits raises BundleError here."""
        self.files = files
        self.name = files.name
        self.styles = list(files.config.styles)
        self._sessions = sessions
        self._style_vectors = _load_style_vectors(files)
        self._contract = synthesizer_contract(files.synthesizer)
        self._duration_file_contract = (
            duration_contract(files.duration_predictor) if files.duration_predictor else None
        )
        self._lock = threading.Lock()
        self._synthesizer: Any = None
        self._durations: tuple[Any, GraphContract] | None = None
        self._durations_checked = False
        self._split: SplitSessions | None = None
        self._split_checked = False
        config = files.config
        self.decode_speed = decode_speed or DecodeSpeed(config.hop_length / config.sample_rate)

    @property
    def hop(self) -> int:
        """Samples per latent frame."""
        return self.files.config.hop_length

    @property
    def has_duration_pass(self) -> bool:
        """Whether pauses come from the voice's durations: its duration graph, else the part of
        its synthesizer that computes them (the first call may prepare that part)."""
        return self._duration_pass() is not None

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

    def load(self) -> None:
        """Create both sessions now (used to validate a bundle and to warm up)."""
        if self._split_sessions() is None:
            self._synthesizer_session()
        self._duration_pass()

    def synthesize(self, sentence: SentenceInput) -> NDArray[np.float32]:
        """The sentence's audio from one run of the whole synthesizer, float32 [samples] in
        [-1, 1]."""
        return self._run(self._synthesizer_session(), self._contract, sentence)

    def front(self, sentence: SentenceInput) -> Fronted | None:
        """The sentence through the synthesizer's front, for ``decode``; None where the
        synthesizer runs whole (its graph cannot be cut, or not on this device)."""
        split = self._split_sessions()
        if split is None or isinstance(sentence.bert, ort.OrtValue):
            return None
        feeds = self._contract.feeds(self._values(sentence))
        outputs = split.front.run(list(split.boundary), feeds)
        boundary = dict(zip(split.boundary, outputs, strict=True))
        frames = max(value.shape[-1] for value in boundary.values())
        return Fronted(boundary, frames, split.shape.context)

    def decode(
        self, fronted: Fronted, span: tuple[int, int], gate: RunGate = run_plainly
    ) -> NDArray[np.float32]:
        """Samples of the frames ``span`` of a fronted sentence, decoded with ``context`` frames
        of overlap either side (the decoder's receptive field), trimmed off again: together the
        spans give the samples of one whole run. ``gate`` starts the run (turns.py)."""
        split = self._split_sessions()
        assert split is not None  # a Fronted comes from a split synthesizer
        start, stop = span
        frames, hop = fronted.frames, split.shape.hop
        low, high = decode_window(span, frames, fronted.context)
        window = {
            name: value[..., low:high] if value.shape[-1] == frames else value
            for name, value in fronted.boundary.items()
        }
        decoder = split.decoder
        started = time.perf_counter()
        (audio,) = gate(
            lambda options: decoder.run(None, window, options),
            self.decode_speed.expected_s(high - low),
        )
        self.decode_speed.record(high - low, time.perf_counter() - started)
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        return samples[(start - low) * hop : (stop - low) * hop]

    def durations(self, sentence: SentenceInput) -> NDArray[np.float32] | None:
        """Predicted frames per phone, float32 [phones]; None when the voice has no duration
        pass (``has_duration_pass``)."""
        found = self._duration_pass()
        if found is None:
            return None
        session, contract = found
        return self._run(session, contract, sentence)

    def close(self) -> None:
        with self._lock:
            self._synthesizer = None
            self._durations = None
            self._split = None

    def _run(
        self, session: Any, contract: GraphContract, sentence: SentenceInput
    ) -> NDArray[np.float32]:
        """One run of ``session`` over the sentence, reading the contract's output, with an IO
        binding where the features lie on the device."""
        values = self._values(sentence)
        if isinstance(sentence.bert, ort.OrtValue):
            output = _run_bound(session, contract, values, sentence.bert)
        else:
            (output,) = session.run([contract.output], contract.feeds(values))
        return np.asarray(output, dtype=np.float32).reshape(-1)

    def _synthesizer_session(self) -> Any:
        with self._lock:
            if self._synthesizer is None:
                self._synthesizer = self._sessions.create(self.files.synthesizer)
            return self._synthesizer

    def _split_sessions(self) -> SplitSessions | None:
        with self._lock:
            if not self._split_checked:
                self._split = self._sessions.create_split(
                    self.files.synthesizer, self._contract.output
                )
                self._split_checked = True
            return self._split

    def _duration_pass(self) -> tuple[Any, GraphContract] | None:
        """The duration graph's session, else the synthesizer's durations cut out of it
        (decoder_graph.cut_durations), with the contract to feed it; None where neither is."""
        with self._lock:
            if not self._durations_checked:
                self._durations = self._open_duration_pass()
                self._durations_checked = True
            return self._durations

    def _open_duration_pass(self) -> tuple[Any, GraphContract] | None:
        if self._duration_file_contract is not None:
            path = self._duration_file_contract.path
            return self._sessions.create(path), self._duration_file_contract
        session = self._sessions.create_durations(self.files.synthesizer)
        if session is None:
            return None
        inputs = {item.name for item in session.get_inputs()}
        return session, self._contract.cut(inputs, session.get_outputs()[0].name)

    def _values(self, sentence: SentenceInput) -> dict[str, NDArray[Any]]:
        """Every input a voice graph may take, in our names (contract.FEEDS), on the host: all
        but ``bert`` where it lies on the device."""
        sequence, inputs = sentence.sequence, sentence.inputs
        values: dict[str, NDArray[Any]] = {
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


def _run_bound(
    session: Any, contract: GraphContract, values: dict[str, NDArray[Any]], bert: ort.OrtValue
) -> Any:
    """One run with an IO binding: ``bert`` is used where it lies (GPU memory on CUDA), the
    small host inputs are copied over, and the contract's output comes back to the host."""
    binding = session.io_binding()
    for name, value in contract.feeds(values).items():
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_input(contract.names["bert"], bert)
    binding.bind_output(contract.output, "cpu")
    session.run_with_iobinding(binding)
    return binding.copy_outputs_to_cpu()[0]


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
