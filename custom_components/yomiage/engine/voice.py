"""One speaker: style vectors, synthesizer and duration-predictor sessions (both lazy).

On the CPU the synthesizer runs as two cached halves when its graph allows (decoder_graph.py):
the front (text encoder, durations, flow) and the decoder, which ``synthesize_pieces`` runs over
the first frames of a sentence first so that streaming can start playing early.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from . import pieces
from .bundle import SpeakerFiles
from .errors import BundleError, UnknownVoiceError
from .pieces import FIRST_PIECE_FRAMES, DecodeSpeed, decode_spans, decode_window
from .runtime import SessionFactory, SplitSessions
from .text.frontend import PhoneSequence
from .turns import RunGate, run_plainly


@dataclass(frozen=True)
class Fronted:
    """A sentence after the synthesizer's front: what its decoder reads, ``frames`` long."""

    boundary: dict[str, NDArray[Any]]  # float32; the time-aligned ones [.., frames]
    frames: int


class DecodedPiece(NamedTuple):
    samples: NDArray[np.float32]  # float32 [samples] in [-1, 1]
    last: bool  # the sentence ends with it


@dataclass(frozen=True)
class ModelInputs:
    """The scalar inputs every SBV2 graph takes, already in the graph's terms."""

    length_scale: float  # duration multiplier: 1 / speed
    sdp_ratio: float
    noise_scale: float
    noise_scale_w: float


class Voice:
    """A speaker folder of a bundle. Sessions are created on first use and shared by all threads."""

    def __init__(
        self,
        files: SpeakerFiles,
        sessions: SessionFactory,
        decode_speed: DecodeSpeed | None = None,
    ) -> None:
        """``decode_speed``: shared by the speakers of a bundle (one architecture, one machine)."""
        self.files = files
        self.name = files.name
        self.styles = list(files.config.styles)
        self._sessions = sessions
        self._style_vectors = _load_style_vectors(files)
        self._lock = threading.Lock()
        self._synthesizer: Any = None
        self._duration_predictor: Any = None
        self._split: SplitSessions | None = None
        self._split_checked = False
        config = files.config
        self._decode_speed = decode_speed or DecodeSpeed(config.hop_length / config.sample_rate)

    @property
    def has_duration_predictor(self) -> bool:
        return self.files.duration_predictor is not None

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
        self._duration_session()

    def synthesize(
        self,
        sequence: PhoneSequence,
        bert: NDArray[np.float32],
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> NDArray[np.float32]:
        """Audio samples in [-1, 1], float32 [samples]."""
        decoded = self.synthesize_pieces(sequence, bert, style_vector, inputs, first_frames=None)
        return np.concatenate([piece.samples for piece in decoded])

    def synthesize_pieces(
        self,
        sequence: PhoneSequence,
        bert: NDArray[np.float32],
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
        first_frames: int | None = FIRST_PIECE_FRAMES,
        lead: tuple[float | None, float] = (None, 0.0),
        gate: RunGate = run_plainly,
    ) -> Generator[DecodedPiece]:
        """The sentence's audio as it is decoded: an early first piece of at least
        ``first_frames`` latent frames (512 samples each; more where decoding the rest would
        outlast its playing; ``lead``: seconds of audio the player has yet to play, None before
        it starts, and the pause before the sentence; see ``DecodeSpeed``), then the rest in
        pieces of at most ``MAX_DECODE_FRAMES``. Together the same samples as one whole run.
        One piece when the graph cannot be split, or the sentence is short and ``first_frames``
        is None. ``gate`` starts the decoder runs (turns.py: a stream's may be cut short)."""
        feeds = self._synthesizer_feeds(sequence, bert, style_vector, inputs)
        split = self._split_sessions()
        if split is None:
            (audio,) = self._synthesizer_session().run(["audio"], feeds)
            yield DecodedPiece(np.asarray(audio, dtype=np.float32).reshape(-1), last=True)
            return
        yield from self._decode_in_pieces(split, feeds, first_frames, lead, gate)

    def _decode_in_pieces(
        self,
        split: SplitSessions,
        feeds: dict[str, NDArray[Any]],
        first_frames: int | None,
        lead: tuple[float | None, float],
        gate: RunGate,
    ) -> Generator[DecodedPiece]:
        """Run the front once, then the decoder over frame spans (see ``decode``)."""
        fronted = self._run_front(split, feeds)
        if first_frames is not None:
            first_frames = self._decode_speed.first_piece(
                fronted.frames, split.shape.context, first_frames, *lead
            )
        for span in decode_spans(
            fronted.frames, first_frames, split.shape.context, pieces.MAX_DECODE_FRAMES
        ):
            yield DecodedPiece(self.decode(fronted, span, gate=gate), span[1] == fronted.frames)

    def decode(
        self,
        fronted: Fronted,
        span: tuple[int, int],
        gate: RunGate = run_plainly,
    ) -> NDArray[np.float32]:
        """Samples of the frames ``span`` of a fronted sentence, decoded with ``context`` frames
        of overlap either side (the decoder's receptive field), trimmed off again: together the
        spans give the samples of one whole run. ``gate`` starts the run (turns.py)."""
        split = self._split_sessions()
        assert split is not None  # a Fronted comes from a split synthesizer
        start, stop = span
        frames, hop = fronted.frames, split.shape.hop
        low, high = decode_window(span, frames, split.shape.context)
        window = {
            name: value[..., low:high] if value.shape[-1] == frames else value
            for name, value in fronted.boundary.items()
        }
        decoder = split.decoder
        started = time.perf_counter()
        (audio,) = gate(
            lambda options: decoder.run(None, window, options),
            self._decode_speed.expected_s(high - low),
        )
        self._decode_speed.record(high - low, time.perf_counter() - started)
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        return samples[(start - low) * hop : (stop - low) * hop]

    def _run_front(self, split: SplitSessions, feeds: dict[str, NDArray[Any]]) -> Fronted:
        boundary = dict(
            zip(split.boundary, split.front.run(list(split.boundary), feeds), strict=True)
        )
        return Fronted(boundary, max(value.shape[-1] for value in boundary.values()))

    def durations(
        self,
        sequence: PhoneSequence,
        bert: NDArray[np.float32],
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> NDArray[np.float32] | None:
        """Predicted frames per phone, float32 [phones]; None when the bundle has no such graph."""
        session = self._duration_session()
        if session is None:
            return None
        (durations,) = session.run(None, self._feeds(sequence, bert, style_vector, inputs))
        return np.asarray(durations, dtype=np.float32).reshape(-1)

    def synthesize_bound(
        self,
        sequence: PhoneSequence,
        bert: ort.OrtValue,
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> NDArray[np.float32]:
        """``synthesize`` with ``bert`` float32 [1, H, P] already where the session runs."""
        feeds = self._host_feeds(sequence, style_vector, inputs)
        feeds["noise_scale"] = _scalar(inputs.noise_scale)
        audio = _run_bound(self._synthesizer_session(), feeds, bert)
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def durations_bound(
        self,
        sequence: PhoneSequence,
        bert: ort.OrtValue,
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> NDArray[np.float32] | None:
        """``durations`` with ``bert`` float32 [1, H, P] already where the session runs."""
        session = self._duration_session()
        if session is None:
            return None
        durations = _run_bound(session, self._host_feeds(sequence, style_vector, inputs), bert)
        return np.asarray(durations, dtype=np.float32).reshape(-1)

    def close(self) -> None:
        with self._lock:
            self._synthesizer = None
            self._duration_predictor = None
            self._split = None

    def _feeds(
        self,
        sequence: PhoneSequence,
        bert: NDArray[np.float32],
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> dict[str, NDArray[Any]]:
        return {**self._host_feeds(sequence, style_vector, inputs), "bert": bert[np.newaxis, :, :]}

    def _synthesizer_feeds(
        self,
        sequence: PhoneSequence,
        bert: NDArray[np.float32],
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> dict[str, NDArray[Any]]:
        """Every synthesizer input: ``_feeds`` and the noise the duration predictor lacks."""
        feeds = self._feeds(sequence, bert, style_vector, inputs)
        feeds["noise_scale"] = _scalar(inputs.noise_scale)
        return feeds

    def _host_feeds(
        self, sequence: PhoneSequence, style_vector: NDArray[np.float32], inputs: ModelInputs
    ) -> dict[str, NDArray[Any]]:
        """Every input but ``bert`` and ``noise_scale``."""
        return {
            "x": sequence.phones[np.newaxis, :],
            "x_lengths": np.array([sequence.phones.shape[0]], dtype=np.int64),
            "sid": np.array([self.files.config.speaker_id], dtype=np.int64),
            "tone": sequence.tones[np.newaxis, :],
            "language": sequence.languages[np.newaxis, :],
            "style_vec": style_vector[np.newaxis, :],
            "length_scale": _scalar(inputs.length_scale),
            "noise_scale_w": _scalar(inputs.noise_scale_w),
            "sdp_ratio": _scalar(inputs.sdp_ratio),
        }

    def _synthesizer_session(self) -> Any:
        with self._lock:
            if self._synthesizer is None:
                self._synthesizer = self._sessions.create(self.files.synthesizer)
            return self._synthesizer

    def _split_sessions(self) -> SplitSessions | None:
        with self._lock:
            if not self._split_checked:
                self._split = self._sessions.create_split(self.files.synthesizer)
                self._split_checked = True
            return self._split

    def _duration_session(self) -> Any:
        path = self.files.duration_predictor
        if path is None:
            return None
        with self._lock:
            if self._duration_predictor is None:
                self._duration_predictor = self._sessions.create(path)
            return self._duration_predictor


def _run_bound(session: Any, host_feeds: dict[str, NDArray[Any]], bert: ort.OrtValue) -> Any:
    """One run with an IO binding: ``bert`` is used where it lies (GPU memory on CUDA), the
    small host inputs are copied over, and the one output comes back to the host."""
    binding = session.io_binding()
    for name, value in host_feeds.items():
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_input("bert", bert)
    binding.bind_output(session.get_outputs()[0].name, "cpu")
    session.run_with_iobinding(binding)
    return binding.copy_outputs_to_cpu()[0]


def _scalar(value: float) -> NDArray[np.float32]:
    return np.array([value], dtype=np.float32)


def _load_style_vectors(files: SpeakerFiles) -> NDArray[np.float32]:
    path = files.style_vectors
    try:
        vectors = np.load(path, allow_pickle=False)
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
