"""The graphs of one synthesizer file and their sessions (lazy), shared by all its speakers.

A file may hold several speakers (a multi-speaker AIVMX, an SBV2 model with several ``spk2id``
entries): they differ only in the ``sid`` and style vector fed, so they share one set of
sessions. On the CPU the synthesizer runs as two cached halves when its graph allows
(decoder_graph.py): the front (text encoder, durations, flow) once per sentence, then the
decoder over spans of its frames. Whatever exporter wrote the graphs, their contracts
(onnx/contract.py) rename and reshape the feeds: one path for all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from ..onnx.contract import GraphContract, VoiceShape, duration_contract, synthesizer_contract
from ..onnx.passes.registry import GraphKind
from ..onnx.passes.vits_decoder_span import SPAN_INPUT
from ..onnx.sessions import SessionFactory, SplitSessions
from .clock import MONOTONIC, Clock
from .decode_speed import DecodeSpeed
from .turns import RunGate, run_plainly


@dataclass(frozen=True)
class Fronted:
    """A sentence after the synthesizer's front: what its decoder reads, ``frames`` long, and
    the decoder's ``context`` (frames of overlap a decoded span needs either side)."""

    boundary: dict[str, NDArray[Any]]  # float32; the time-aligned ones [.., frames]
    frames: int
    context: int


def decode_window(span: tuple[int, int], frames: int, context: int) -> tuple[int, int]:
    """The frames a decoder run reads for ``span``: ``context`` more on each side (its receptive
    field), within the sentence's ``frames``."""
    start, stop = span
    return max(0, start - context), min(frames, stop + context)


Feeds = dict[str, NDArray[Any]]  # every input a voice graph may take, in our names


class VoiceGraphs:
    """A synthesizer file and its duration graph (if any): contracts read now, sessions created
    on first use and shared by every thread and every speaker of the file."""

    def __init__(
        self,
        synthesizer: Path,
        duration_predictor: Path | None,
        sessions: SessionFactory,
        decode_speed: DecodeSpeed,
        clock: Clock = MONOTONIC,
    ) -> None:
        """Reads the graphs' contracts: a graph no dialect fits raises BundleError here.
        ``clock`` times the decoder's runs for ``decode_speed``."""
        self.synthesizer = synthesizer
        self.decode_speed = decode_speed
        self._clock = clock
        self._sessions = sessions
        self._contract = synthesizer_contract(synthesizer)
        self._duration_file_contract = (
            duration_contract(duration_predictor) if duration_predictor else None
        )
        self._lock = threading.Lock()
        self._whole: Any = None
        self._durations: tuple[Any, GraphContract] | None = None
        self._durations_checked = False
        self._split: SplitSessions | None = None
        self._split_checked = False

    def check_fits(self, shape: VoiceShape, language_model: str, style_vectors: str) -> None:
        """VoiceMismatchError where a graph was made for other features or speakers
        (contract.py)."""
        self._contract.check_fits(shape, language_model, style_vectors)
        if self._duration_file_contract is not None:
            self._duration_file_contract.check_fits(shape, language_model, style_vectors)

    @property
    def has_duration_pass(self) -> bool:
        """Whether pauses come from the voice's durations: its duration graph, else the part of
        its synthesizer that computes them (the first call may prepare that part)."""
        return self._duration_pass() is not None

    def load(self) -> None:
        """Create the sessions now (used to validate a bundle and to warm up)."""
        if self._split_sessions() is None:
            self._whole_session()
        self._duration_pass()

    def synthesize(self, values: Feeds, bert: ort.OrtValue | None) -> NDArray[np.float32]:
        """The sentence's audio from one run of the whole synthesizer, float32 [samples] in
        [-1, 1]; ``bert``: the features where they lie on the device (else in ``values``)."""
        return _run(self._whole_session(), self._contract, values, bert)

    def front(self, values: Feeds) -> Fronted | None:
        """The sentence through the synthesizer's front, for ``decode``; None where the
        synthesizer runs whole (its graph cannot be cut, or not on this device)."""
        split = self._split_sessions()
        if split is None:
            return None
        outputs = split.front.run(list(split.boundary), self._contract.feeds(values))
        boundary = dict(zip(split.boundary, outputs, strict=True))
        frames = max(value.shape[-1] for value in boundary.values())
        return Fronted(boundary, frames, split.shape.context)

    def decode(
        self, fronted: Fronted, span: tuple[int, int], gate: RunGate = run_plainly
    ) -> NDArray[np.float32]:
        """Samples of the frames ``span`` of a fronted sentence, decoded from a window with
        ``context`` frames of overlap either side (the decoder's receptive field): together the
        spans give the samples of one whole run. A decoder prepared to take the span
        (passes/vits_decoder_span.py) gives its samples only; another gives the window's,
        trimmed here. ``gate`` starts the run (turns.py)."""
        split = self._split_sessions()
        assert split is not None  # a Fronted comes from a split synthesizer
        start, stop = span
        frames, hop = fronted.frames, split.shape.hop
        low, high = decode_window(span, frames, fronted.context)
        feeds = {
            name: value[..., low:high] if value.shape[-1] == frames else value
            for name, value in fronted.boundary.items()
        }
        if split.takes_span:
            feeds[SPAN_INPUT] = np.array([start - low, stop - low], dtype=np.int64)
        decoder, timed = split.decoder, []

        def run(options: ort.RunOptions | None) -> Any:
            # Timed inside the gate: not the wait for a turn, not a run cut short.
            started = self._clock()
            outputs = decoder.run(None, feeds, options)
            timed.append(self._clock() - started)
            return outputs

        (audio,) = gate(run, self.decode_speed.expected_s(high - low))
        self.decode_speed.record(high - low, timed[-1])
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        return samples if split.takes_span else samples[(start - low) * hop : (stop - low) * hop]

    def durations(self, values: Feeds, bert: ort.OrtValue | None) -> NDArray[np.float32] | None:
        """Predicted frames per phone, float32 [phones]; None without a duration pass."""
        found = self._duration_pass()
        if found is None:
            return None
        session, contract = found
        return _run(session, contract, values, bert)

    def close(self) -> None:
        with self._lock:
            self._whole = None
            self._durations = None
            self._split = None

    def _whole_session(self) -> Any:
        with self._lock:
            if self._whole is None:
                self._whole = self._sessions.create(self.synthesizer, GraphKind.SYNTHESIZER)
            return self._whole

    def _split_sessions(self) -> SplitSessions | None:
        with self._lock:
            if not self._split_checked:
                self._split = self._sessions.create_split(self.synthesizer, self._contract.output)
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
            return self._sessions.create(path, GraphKind.DURATIONS), self._duration_file_contract
        session = self._sessions.create_durations(self.synthesizer, self._contract.durations)
        if session is None:
            return None
        inputs = {item.name for item in session.get_inputs()}
        return session, self._contract.cut(inputs, session.get_outputs()[0].name)


def _run(
    session: Any, contract: GraphContract, values: Feeds, bert: ort.OrtValue | None
) -> NDArray[np.float32]:
    """One run of ``session`` reading the contract's output; with an IO binding where the
    features lie on the device (``bert``): used where they are, the small host inputs copied
    over, the output brought back to the host."""
    if bert is None:
        (output,) = session.run([contract.output], contract.feeds(values))
    else:
        binding = session.io_binding()
        for name, value in contract.feeds(values).items():
            binding.bind_cpu_input(name, value)
        binding.bind_ortvalue_input(contract.names["bert"], bert)
        binding.bind_output(contract.output, "cpu")
        session.run_with_iobinding(binding)
        output = binding.copy_outputs_to_cpu()[0]
    return np.asarray(output, dtype=np.float32).reshape(-1)
