"""The engine: text in, 16-bit speech out, one sentence at a time with natural pauses.

One BERT session serves every speaker; a synthesizer file's sessions are created on first use and
shared by its speakers (graphs.py).
Model runs are serialised by one lock (each run already uses every core), so concurrent requests
take turns piece by piece and never mix audio; a listener waiting for its first audio goes
before a playing stream's decoder runs, cutting one in progress short where that is worth it
(turns.py).

Streaming is ordered for early first audio: the first sentence (of the text, or of each piece
that arrives) gets a BERT run of its own and its first 0.56 s is decoded before the rest of it;
the other sentences' BERT batches and pause passes (which only decide the pauses before
sentences 2..n) run while that audio already plays, a pause window at a time (pauses.py), so
that a long text costs memory in proportion to its length, never more. Whole-file synthesis is
the stream, collected: one path, the same samples.

A listener's message known whole, on a box that synthesizes slower than real time, can start
smoothly instead (option ``smooth_start``, smooth_start.py): the plan (every sentence's BERT
features, pauses and predicted length) first, then silence just long enough that no sentence
is late once speech has begun, each pause sent ahead of its sentence and each sentence decoded
in one run. Text that arrives in pieces never waits for a plan: its first audio stays first.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from ..audio.loudness import Leveller
from ..audio.pcm import silence, to_pcm16
from ..audio.pitch import PitchShape
from ..bundle import Bundle
from ..errors import BundleError, InvalidTextError, UnknownVoiceError, YomiageError
from ..onnx.cores import usable_cores
from ..onnx.sessions import SessionFactory, resolve_device
from ..text.frontend import Frontend, PhoneSequence
from .arriving import ArrivingText
from .bert import BertFeaturizer
from .clock import MONOTONIC, Clock
from .decode_speed import DecodeSpeed
from .device_path import CharFeatures, DevicePath, FeaturePath, HostPath
from .graphs import VoiceGraphs
from .options import SynthesisOptions
from .pauses import (
    MIN_PAUSE_S,
    boundary_pauses,
    pause_windows,
    sentence_frames,
    trailing_pause,
)
from .pieces import FIRST_PIECE_FRAMES, decode_in_pieces
from .results import AudioChunk, Synthesis
from .smooth_start import PlannedSentence, Stage, needs_smooth_start, smooth_start
from .turns import ModelLock
from .voice import ModelInputs, SentenceInput, Voice

_LOGGER = logging.getLogger(__name__)

DEFAULT_MAX_CHARS = 5000
# Two sentences: a BERT batch, the spread, the duration predictor over both and the synthesizer.
_WARM_UP_TEXT = "あ。い。"
# Long enough (~70 frames) that the decoder's fixed cost per run does not dominate its timing.
_TIMING_TEXT = "おはようございます。"
_Result = TypeVar("_Result")  # what a model run gives


@dataclass(frozen=True)
class _Request:
    """A validated request: the voice to use, everything the graphs need, and the loudness of
    what it has spoken so far (one message)."""

    voice: Voice
    style_vector: NDArray[np.float32]
    inputs: ModelInputs
    pause_scale: float
    lead_s: float  # silence before the first sentence
    smooth_start: bool
    loudness: Leveller
    pitch: PitchShape


class _Playback:
    """A streaming listener as the engine pictures it: playing starts with the first piece
    handed over and goes on in real time (``clock``); what has been handed over and not played
    yet is the player's lead."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._started: float | None = None
        self._queued_s = 0.0

    def queue(self, audio_s: float) -> None:
        if self._started is None:
            self._started = self._clock()
        self._queued_s += audio_s

    def lead_s(self) -> float | None:
        """Seconds handed over and not yet played; None before playing starts."""
        if self._started is None:
            return None
        return max(0.0, self._queued_s - (self._clock() - self._started))


@dataclass(frozen=True)
class _Paused:
    """A sentence ready for the synthesizer: its BERT features and the pause before it."""

    sequence: PhoneSequence
    features: CharFeatures
    pause_before: float


@dataclass(frozen=True)
class _Spacing:
    """What one duration-predictor run over a pause window says of its sentences."""

    pauses: list[float]  # before each sentence; 0 for the window's first
    frames: list[float] | None  # predicted latent frames of each; None without a duration pass


_Featured = tuple[PhoneSequence, CharFeatures]  # a sentence with its BERT features


@dataclass
class _Spoken:
    """What a stream of arriving text has spoken so far: whether anything, and the pause the
    last sentence predicts after itself."""

    any: bool = False
    pause_s: float = 0.0


class Engine:
    def __init__(
        self,
        bundle_root: str | Path,
        device: str = "auto",
        threads: int | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        graph_cache: Path | None = None,
        language_model: Path | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        """``graph_cache``: the folder for graphs prepared for this CPU (onnx/sessions.py; None:
        ``graph_cache.default_cache_dir()``). ``language_model``: a bundle whose BERT serves
        voices that come without one (a folder of AIVMX files; bundle.py). ``clock``: the time
        every timing decision reads (clock.py)."""
        self._clock = clock
        self.bundle = Bundle.open(bundle_root, language_model)
        self.device = resolve_device(device)
        self.max_chars = max_chars
        # Threads decided now, once: reading the box's CPU quota is file I/O, which must not
        # happen where Home Assistant asks (diagnostics run in its event loop).
        self._sessions = SessionFactory(
            device=self.device, threads=threads or usable_cores(), cache_dir=graph_cache
        )
        self._frontend = Frontend()
        bert_graph, bert_sessions = self._bert_graph()
        self._bert = BertFeaturizer(bert_graph, self.bundle.tokenizer_dir, bert_sessions)
        self._features: FeaturePath = (
            DevicePath(self._bert, self._sessions)
            if self.device == "cuda"
            else HostPath(self._bert)
        )
        first = next(iter(self.bundle.speakers.values())).config
        # One for the bundle: its voices share one architecture, and all run on this machine.
        decode_speed = DecodeSpeed(first.hop_length / first.sample_rate)
        try:
            self._graphs, self._voices = self._open_voices(decode_speed, bert_graph)
        except BundleError:  # a voice that cannot be used: nothing stays loaded
            self._features.close()
            self._bert.close()
            raise
        self._model_lock = ModelLock(clock)
        self._closed = False
        if self.device == "cuda":
            self._warm_up()

    def _open_voices(
        self, decode_speed: DecodeSpeed, bert_graph: Path
    ) -> tuple[dict[Path, VoiceGraphs], dict[str, Voice]]:
        """One set of graphs per synthesizer file (a file's speakers share its sessions), and a
        voice per speaker; BundleError where one cannot speak with this bundle."""
        graphs: dict[Path, VoiceGraphs] = {}
        for files in self.bundle.speakers.values():
            if files.synthesizer not in graphs:
                graphs[files.synthesizer] = VoiceGraphs(
                    files.synthesizer,
                    files.duration_predictor,
                    self._sessions,
                    decode_speed,
                    self._clock,
                )
        shown_bert = self.bundle.relative(bert_graph)
        voices = {
            name: Voice(files, graphs[files.synthesizer], self._bert.hidden_size, shown_bert)
            for name, files in self.bundle.speakers.items()
        }
        return graphs, voices

    # -- what the bundle offers ---------------------------------------------------------------
    @property
    def voices(self) -> dict[str, list[str]]:
        return {name: list(voice.styles) for name, voice in self._voices.items()}

    @property
    def default_voice(self) -> str:
        name, voice = next(iter(self._voices.items()))
        return f"{name}/{voice.styles[0]}"

    @property
    def sample_rate(self) -> int:
        return self.bundle.sample_rate

    @property
    def clock(self) -> Clock:
        """The time its timing decisions read: give it to the ``ArrivingText`` it is handed."""
        return self._clock

    @property
    def threads(self) -> int:
        return self._sessions.intra_op_threads

    @property
    def speed_x_real_time(self) -> float | None:
        """Seconds of speech a second of synthesis (front and decoder) makes on this box, as
        learnt from the sentences spoken; None before any. Under 1: a smooth start applies."""
        speed = next(iter(self._voices.values())).decode_speed
        cost = speed.sentence_s_per_frame()
        return None if not cost else speed.frame_s / cost

    def load_all(self) -> None:
        """Create every session and map the readings' dictionaries now: validates graphs
        (config flow) and avoids first-use latency. Then one short synthesis, so that the first
        streamed request sizes its first piece from this machine's measured decoding speed
        rather than a guess."""
        self._frontend.load_dictionaries()
        for graphs in self._graphs.values():
            with self._model_lock:
                graphs.load()
        if self.device == "cpu":  # a CUDA engine has warmed every voice up already
            self._time_decoding()

    # -- synthesis -------------------------------------------------------------------------------
    def synthesize(self, text: str, options: SynthesisOptions | None = None) -> Synthesis:
        """The whole text at once: the stream of it, collected (the same samples; no smooth
        start, nobody is listening yet)."""
        request = self._request(options)
        sequences = self._analyse(text)
        chunks = self._first_in_one_turn(self._stream(sequences, request), first_audio=True)
        return Synthesis.collect(chunks, self.sample_rate)

    def stream(self, text: str, options: SynthesisOptions | None = None) -> Iterator[AudioChunk]:
        """Audio as soon as it is ready: the first sentence's first 0.56 s as a piece of its
        own, then sentences (long ones in pieces, see ``pieces.MAX_DECODE_FRAMES``); or a smooth
        start (the module's docstring). Validates before returning."""
        request = self._request(options)
        sequences = self._analyse(text)
        return self._first_in_one_turn(self._listened(sequences, request), first_audio=True)

    def stream_arriving(
        self, text: ArrivingText, options: SynthesisOptions | None = None
    ) -> Iterator[AudioChunk]:
        """Like ``stream`` where the text came whole in one piece, else like
        ``stream_sentences`` (arriving.py tells which). Validates the options before returning."""
        request = self._request(options)
        return self._whole_or_arriving(text, request)

    def stream_sentences(
        self, sentences: Iterable[str], options: SynthesisOptions | None = None
    ) -> Iterator[AudioChunk]:
        """Like ``stream`` for text that arrives sentence by sentence (an LLM reply being written).

        Each sentence's pause comes from the duration predictor over that sentence alone.
        Pieces with nothing speakable are skipped; input with nothing speakable at all raises
        InvalidTextError.
        """
        request = self._request(options)
        return self._stream_arriving(sentences, request)

    def reading(self, text: str) -> list[str]:
        """Katakana reading, one entry per sentence."""
        return self._frontend.reading(self._checked_text(text))

    def close(self) -> None:
        """Release every ONNX session; the engine cannot be used afterwards."""
        with self._model_lock:
            self._closed = True
            for graphs in self._graphs.values():
                graphs.close()
            self._features.close()
            self._bert.close()

    # -- internals -------------------------------------------------------------------------------
    def _bert_graph(self) -> tuple[Path, SessionFactory]:
        """BERT's graph and where it runs. Dynamic INT8 does not run on the CUDA provider: a
        CUDA engine takes the FP32 graph, or else runs INT8 on the CPU and hands the GPU its
        batch output once per request."""
        if self.device == "cuda" and self.bundle.bert_fp32 is not None:
            return self.bundle.bert_fp32, self._sessions
        return self.bundle.bert_q8, replace(self._sessions, device="cpu")

    def _warm_up(self) -> None:
        """Run every set of graphs once (through one of its speakers), so that the first request
        does not pay CUDA's start-up (kernel loading, cuDNN plans, memory arenas): seconds on a
        GPU, at load instead."""
        warmed: set[Path] = set()
        for name, voice in self._voices.items():
            if voice.graphs.synthesizer not in warmed:
                warmed.add(voice.graphs.synthesizer)
                for _ in self.stream(_WARM_UP_TEXT, SynthesisOptions(voice=name)):
                    pass

    def _time_decoding(self) -> None:
        """Best effort: a graph that loads but cannot run fails the first request instead, with
        that request's error; loading stays a check of the files."""
        try:
            sequences = self._analyse(_TIMING_TEXT)
            for _ in self._stream(sequences, self._request(None)):
                pass
        except Exception as err:
            _LOGGER.warning("could not time the decoder at load: %s", err)

    def _checked_text(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise InvalidTextError("text is empty")
        if len(text) > self.max_chars:
            raise InvalidTextError(
                f"text has {len(text)} characters; the limit is {self.max_chars}"
            )
        return text

    def _analyse(self, text: str) -> list[PhoneSequence]:
        return self._frontend.sentences(self._checked_text(text))

    def _request(self, options: SynthesisOptions | None) -> _Request:
        if self._closed:
            raise YomiageError("the engine has been closed")
        options = (options or SynthesisOptions()).validated()
        voice, style = self._voice(options.voice)
        return _Request(
            voice=voice,
            style_vector=voice.style_vector(style, options.style_weight),
            inputs=ModelInputs(
                length_scale=1.0 / options.speed,
                sdp_ratio=options.sdp_ratio,
                noise_scale=options.noise,
                noise_scale_w=options.noise_w,
            ),
            pause_scale=options.pause_scale,
            lead_s=options.lead_silence / 1000,
            smooth_start=options.smooth_start,
            loudness=Leveller(
                self.sample_rate,
                options.volume,
                options.normalize,
                basis=FIRST_PIECE_FRAMES * voice.files.config.hop_length,  # a first piece's
            ),
            pitch=PitchShape(
                options.pitch,
                options.intonation,
                self.sample_rate,
                basis=FIRST_PIECE_FRAMES * voice.files.config.hop_length,
            ),
        )

    def _voice(self, name: str | None) -> tuple[Voice, str]:
        speaker, _, style = (name or self.default_voice).partition("/")
        voice = self._voices.get(speaker)
        if voice is None:
            raise UnknownVoiceError(
                f"unknown speaker {speaker!r}; speakers: {', '.join(self._voices)}"
            )
        return voice, style or voice.styles[0]

    def _whole_or_arriving(self, text: ArrivingText, request: _Request) -> Iterator[AudioChunk]:
        """A whole text over ``max_chars`` is spoken as it arrives, sentence by sentence (each
        checked), as every text is that arrives in pieces."""
        whole = text.whole()
        if whole is None or len(whole) > self.max_chars:
            yield from self._stream_arriving(text, request)
            return
        sequences = self._analyse(whole)
        yield from self._first_in_one_turn(self._listened(sequences, request), first_audio=True)

    def _listened(self, sequences: list[PhoneSequence], request: _Request) -> Generator[AudioChunk]:
        """A whole text for a listener: a smooth start where asked for and this box needs one."""
        speed = request.voice.decode_speed
        smooth = (
            request.smooth_start
            and needs_smooth_start(speed.sentence_s_per_frame(), speed.frame_s)
            and request.voice.has_duration_pass
        )
        if smooth:
            return self._smooth_start(sequences, request)
        return self._stream(sequences, request)

    def _stream(self, sequences: list[PhoneSequence], request: _Request) -> Generator[AudioChunk]:
        started = self._clock()
        playback = _Playback(self._clock)
        for sentence in self._paused(sequences, request):
            yield from self._sentence(
                sentence.sequence,
                sentence.features,
                sentence.pause_before,
                request,
                started,
                playback,
            )
            started = self._clock()

    def _smooth_start(
        self, sequences: list[PhoneSequence], request: _Request
    ) -> Generator[AudioChunk]:
        """A smooth start (smooth_start.py) over this engine's plan, its runs and its chunks."""
        playback = _Playback(self._clock)

        def silence(sentence: _Featured, seconds: float, opens: bool) -> AudioChunk:
            return self._silence_chunk(sentence[0], seconds, playback, opens)

        def speech(sentence: _Featured) -> Iterator[AudioChunk]:
            return self._sentence(
                *sentence, None, request, self._clock(), playback, early_piece=False
            )

        stage = Stage(
            sentences=len(sequences),
            lead_silence_s=request.lead_s,
            speed=request.voice.decode_speed,
            clock=self._clock,
            player_lead_s=playback.lead_s,
            silence=silence,
            speech=speech,
        )
        return smooth_start(self._plan(sequences, request), stage)

    def _plan(
        self, sequences: list[PhoneSequence], request: _Request
    ) -> Iterator[list[PlannedSentence[_Featured]]]:
        """A smooth start's plan, lazily: each pause window's sentences new to it, with their
        pauses and predicted frames, as its BERT batch and pause pass run (the first sentence's
        BERT run comes first, alone); a lone sentence, with a duration pass of its own."""
        first, spaced = self._spaced_windows(sequences, request)
        for index, (part, spacing) in enumerate(spaced):
            assert spacing.frames is not None  # the voice has a duration pass (_listened)
            pauses = [0.0, *spacing.pauses[1:]]
            planned = [
                PlannedSentence(*sentence)
                for sentence in zip(part, spacing.frames, pauses, strict=True)
            ]
            yield planned[1:] if index else planned  # a window opens with the one before's last
        if len(sequences) == 1:  # no window
            durations = self._durations(*first, request)
            assert durations is not None
            yield [PlannedSentence(first, float(durations.sum()), 0.0)]

    def _silence_chunk(
        self, sequence: PhoneSequence, seconds: float, playback: _Playback, opens: bool
    ) -> AudioChunk:
        """Silence sent ahead of the sentence's audio: its pause (``opens``), or more of it."""
        pcm = silence(seconds, self.sample_rate)
        chunk = AudioChunk(
            pcm=pcm,
            sample_rate=self.sample_rate,
            text=sequence.text,
            pause_before_s=pcm.shape[0] / self.sample_rate,
            compute_s=0.0,
            starts_sentence=opens,
            ends_sentence=False,
        )
        playback.queue(chunk.audio_s)
        return chunk

    def _chunk(
        self,
        sequence: PhoneSequence,
        samples: NDArray[np.float32],
        pause_before: float,
        compute_s: float,
        starts: bool,
        ends: bool,
    ) -> AudioChunk:
        """Audio of a sentence or a piece of it; a sentence's first piece opens with the pause."""
        pcm = to_pcm16(samples)
        if starts:
            pcm = np.concatenate((silence(pause_before, self.sample_rate), pcm))
        return AudioChunk(
            pcm=pcm,
            sample_rate=self.sample_rate,
            text=sequence.text,
            pause_before_s=pause_before if starts else 0.0,
            compute_s=compute_s,
            starts_sentence=starts,
            ends_sentence=ends,
        )

    def _stream_arriving(self, texts: Iterable[str], request: _Request) -> Iterator[AudioChunk]:
        spoken = _Spoken()
        playback = _Playback(self._clock)
        for piece in texts:
            if not piece.strip():
                continue
            started = self._clock()
            sequences = self._frontend.sentences(self._checked_text(piece), required=False)
            if not sequences:
                continue
            yield from self._first_in_one_turn(
                self._arrived(sequences, request, playback, spoken, started),
                first_audio=not spoken.any,
            )
        if not spoken.any:
            raise InvalidTextError("text has nothing speakable in it")

    def _arrived(
        self,
        sequences: list[PhoneSequence],
        request: _Request,
        playback: _Playback,
        spoken: _Spoken,
        started: float,
    ) -> Generator[AudioChunk]:
        """The sentences of one arrived piece, each after the pause the sentence before it
        predicts for itself (the first of all after the lead silence)."""
        windows = pause_windows([len(s.text) for s in sequences])
        for sequence, features in self._first_alone(sequences, windows):
            pause_before = spoken.pause_s if spoken.any else request.lead_s
            yield from self._sentence(sequence, features, pause_before, request, started, playback)
            spoken.pause_s = self._own_trailing_pause(sequence, features, request)
            spoken.any = True
            started = self._clock()

    def _first_in_one_turn(
        self, chunks: Generator[AudioChunk], first_audio: bool
    ) -> Iterator[AudioChunk]:
        """``chunks``, the first made in one turn of the model lock: the runs a listener waits
        on before hearing anything (BERT, front, first piece) follow each other, without
        another request's runs (a piece of an announcement each) in between. ``first_audio``:
        the listener hears nothing yet, so the turn goes before a playing stream's decoder
        runs, cutting one in progress short where that is worth it (turns.py)."""
        turn = self._model_lock.first_audio_turn() if first_audio else self._model_lock
        try:
            with turn:
                first = next(chunks, None)
            if first is not None:
                yield first
                yield from chunks
        finally:
            chunks.close()  # a listener that stops early ends the sentence being decoded too

    def _first_alone(
        self, sequences: list[PhoneSequence], windows: list[range]
    ) -> Iterator[_Featured]:
        """Each sentence with its BERT features, lazily: the first in a batch of its own, so that
        its audio does not wait for the other sentences' BERT (a whole announcement arrives as
        one piece), then a batch per pause window
        (the sentences it adds), each run when its first sentence is asked for: a batch never
        holds more than a window of text, however long the text. ``windows``: the sequences'
        ``pause_windows``."""
        first = sequences[0]
        (first_features,) = self._run(self._features.char_features, [first.text])
        yield first, first_features
        for window in windows:
            batch = sequences[window.start + 1 : window.stop]
            features = self._run(self._features.char_features, [s.text for s in batch])
            yield from zip(batch, features, strict=True)

    def _paused(self, sequences: list[PhoneSequence], request: _Request) -> Iterator[_Paused]:
        """Each sentence with its BERT features and the pause before it, lazily, a pause window
        at a time: a window's BERT batch and pause pass run when its first sentence is asked
        for (the first sentence comes before, after the lead silence)."""
        first, spaced = self._spaced_windows(sequences, request)
        yield _Paused(*first, request.lead_s)
        for part, spacing in spaced:
            for (sequence, features), pause in zip(part[1:], spacing.pauses[1:], strict=True):
                yield _Paused(sequence, features, pause)

    def _spaced_windows(
        self, sequences: list[PhoneSequence], request: _Request
    ) -> tuple[_Featured, Iterator[tuple[list[_Featured], _Spacing]]]:
        """The first sentence with its features (its BERT run now, alone), and lazily each
        pause window's sentences (the first being the window before's last) with what the
        window's pause pass says of them: a window's BERT batch and pass run when asked for."""
        windows = pause_windows([len(s.text) for s in sequences])
        featured = self._first_alone(sequences, windows)
        first = next(featured)

        def spaced() -> Iterator[tuple[list[_Featured], _Spacing]]:
            last = first
            for window in windows:
                part = [last, *itertools.islice(featured, len(window) - 1)]
                yield part, self._window_spacing(part, request)
                last = part[-1]

        return first, spaced()

    def _sentence(
        self,
        sequence: PhoneSequence,
        char_features: CharFeatures,
        pause_before: float | None,
        request: _Request,
        started: float,
        playback: _Playback,
        early_piece: bool = True,
    ) -> Iterator[AudioChunk]:
        """The sentence's audio piece by piece, each decoded under the model lock (another
        request may take its turn between pieces), levelled (audio/loudness.py) and its f0
        moved where asked (audio/pitch.py). Its first piece comes early (``early_piece``),
        sized by the ``playback`` clock so that the player is not left waiting mid-sentence,
        and its decoder runs give way to a listener waiting for its first audio where its
        player has the audio in hand for that (turns.py). ``pause_before`` None: the pause has
        been sent already, the sentence's chunks continue it."""
        decoded = decode_in_pieces(
            request.voice,
            self._sentence_input(sequence, char_features, request),
            FIRST_PIECE_FRAMES if early_piece else None,
            (playback.lead_s(), pause_before or 0.0),
            _StreamRuns(self._model_lock, playback, self._check_open),
            self._clock,
        )
        level = request.loudness.sentence()
        # After the leveller, whose gain is decided on the first piece as the model made it.
        shaped = request.pitch.sentence() if request.pitch.changes else None
        try:
            starts = pause_before is not None
            while (piece := self._run(next, decoded, None)) is not None:
                samples = level.apply(piece.samples, piece.last)
                if shaped is not None:
                    samples = shaped.apply(samples, piece.last)
                chunk = self._chunk(
                    sequence,
                    samples,
                    pause_before or 0.0,
                    self._clock() - started,
                    starts,
                    piece.last,
                )
                playback.queue(chunk.audio_s)
                yield chunk
                starts = False
                started = self._clock()
        finally:
            decoded.close()

    def _window_spacing(self, sentences: list[_Featured], request: _Request) -> _Spacing:
        """Pauses before a pause window's sentences (the first gets 0) and their predicted
        frames, from one duration-predictor run over the window's text; the shortest pause and
        no frames where the voice has no duration pass."""
        if not request.voice.has_duration_pass:
            return _Spacing([0.0] + [MIN_PAUSE_S] * (len(sentences) - 1), None)
        texts = [sequence.text for sequence, _ in sentences]
        whole = self._frontend.analyse("".join(texts))
        whole_features = self._features.join([features for _, features in sentences])
        if len(whole_features) != whole.word2ph.shape[0]:  # reading differs from the sentences'
            (whole_features,) = self._run(self._features.char_features, [whole.text])
        durations = self._durations(whole, whole_features, request)
        assert durations is not None
        pauses = boundary_pauses(
            texts,
            durations,
            whole.phones,
            whole.word2ph,
            self._seconds_per_frame(request),
            request.pause_scale,
        )
        return _Spacing(pauses, sentence_frames(texts, durations, whole.word2ph))

    def _own_trailing_pause(
        self, sequence: PhoneSequence, char_features: CharFeatures, request: _Request
    ) -> float:
        durations = self._durations(sequence, char_features, request)
        if durations is None:
            return MIN_PAUSE_S
        return trailing_pause(
            sequence.text,
            durations,
            sequence.phones,
            sequence.word2ph,
            self._seconds_per_frame(request),
            request.pause_scale,
        )

    def _durations(
        self, sequence: PhoneSequence, char_features: CharFeatures, request: _Request
    ) -> NDArray[np.float32] | None:
        durations: NDArray[np.float32] | None = self._run(
            request.voice.durations, self._sentence_input(sequence, char_features, request)
        )
        return durations

    def _sentence_input(
        self, sequence: PhoneSequence, char_features: CharFeatures, request: _Request
    ) -> SentenceInput:
        bert = self._features.per_phone(char_features, sequence.word2ph)
        return SentenceInput(sequence, bert, request.style_vector, request.inputs)

    def _seconds_per_frame(self, request: _Request) -> float:
        config = request.voice.files.config
        return config.hop_length / config.sample_rate

    def _run(self, function: Any, *args: Any) -> Any:
        with self._model_lock:
            self._check_open()
            return function(*args)

    def _check_open(self) -> None:
        if self._closed:
            raise YomiageError("the engine has been closed")


class _StreamRuns:
    """How a playing stream starts its decoder runs (a ``RunGate``), under the model lock it
    already holds: cuttable for a listener waiting for its first audio, where its player's lead
    covers the cut or the run is less than half done (turns.py)."""

    def __init__(
        self, lock: ModelLock, playback: _Playback, check_open: Callable[[], None]
    ) -> None:
        self._lock = lock
        self._playback = playback
        self._check_open = check_open

    def __call__(
        self, run: Callable[[ort.RunOptions | None], _Result], expected_s: float
    ) -> _Result:
        def checked(options: ort.RunOptions | None) -> _Result:
            self._check_open()  # the engine may have closed while the run gave way
            return run(options)

        lead = self._playback.lead_s()
        return self._lock.cuttable(checked, 0.0 if lead is None else lead, expected_s)
