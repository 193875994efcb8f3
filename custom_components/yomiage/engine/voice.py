"""One speaker: style vectors, synthesizer and duration-predictor sessions (both lazy)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from .bundle import SpeakerFiles
from .errors import BundleError, UnknownVoiceError
from .runtime import SessionFactory
from .text.frontend import PhoneSequence


@dataclass(frozen=True)
class ModelInputs:
    """The scalar inputs every SBV2 graph takes, already in the graph's terms."""

    length_scale: float  # duration multiplier: 1 / speed
    sdp_ratio: float
    noise_scale: float
    noise_scale_w: float


class Voice:
    """A speaker folder of a bundle. Sessions are created on first use and shared by all threads."""

    def __init__(self, files: SpeakerFiles, sessions: SessionFactory) -> None:
        self.files = files
        self.name = files.name
        self.styles = list(files.config.styles)
        self._sessions = sessions
        self._style_vectors = _load_style_vectors(files)
        self._lock = threading.Lock()
        self._synthesizer: Any = None
        self._duration_predictor: Any = None

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
        feeds = self._feeds(sequence, bert, style_vector, inputs)
        feeds["noise_scale"] = _scalar(inputs.noise_scale)
        (audio,) = self._synthesizer_session().run(["audio"], feeds)
        return np.asarray(audio, dtype=np.float32).reshape(-1)

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

    def _feeds(
        self,
        sequence: PhoneSequence,
        bert: NDArray[np.float32],
        style_vector: NDArray[np.float32],
        inputs: ModelInputs,
    ) -> dict[str, NDArray[Any]]:
        return {**self._host_feeds(sequence, style_vector, inputs), "bert": bert[np.newaxis, :, :]}

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
