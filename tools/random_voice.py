"""Random-weight SBV2 voices that behave plausibly: realistic speaking rate and loudness.

Weights come from numpy's PCG64 generator (stable across numpy and torch versions), so a seed
always gives the same voice. Two calibrations follow the random draw:

* durations: the output bias of both duration predictors is shifted so that pseudo-Japanese
  sentences (tools/pseudo_text.py, shaped like the engine's inputs) are spoken at
  ``TARGET_MORAE_PER_SECOND`` with the engine's default settings (uncalibrated random voices
  speak ~2.4x too fast);
* loudness: the decoder's last convolution is scaled so that the signal before the final tanh
  has a standard deviation of ``TARGET_LOUDNESS`` (no clipping, clearly audible).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .model import ModelConfig, SynthesizerTrn, parse_config, save_checkpoint
from .model.attention import RelativeSelfAttention
from .model.config import STYLE_DIM
from .model.flows import ElementwiseAffine
from .model.layers import ChannelLayerNorm
from .model.training_parts import TrainingParts
from .presets import FILTER_LENGTH, HOP_LENGTH, SAMPLING_RATE, VoicePreset
from .pseudo_text import pseudo_sentence

TARGET_MORAE_PER_SECOND = 7.5
SECONDS_PER_FRAME = HOP_LENGTH / SAMPLING_RATE
TARGET_LOUDNESS = 0.2
CALIBRATION_MORAE = (5, 8, 10, 12, 13, 15, 18, 22, 27, 34)  # a pseudo-Japanese sentence each
DEFAULT_SDP_RATIO = 0.2  # the engine's defaults (SynthesisOptions)
DEFAULT_NOISE_W = 0.8
STYLE_SCALE = 0.5  # spread of the random style vectors
SPEC_CHANNELS = FILTER_LENGTH // 2 + 1  # the posterior encoder's input (linear spectrogram)
TRAINING_STREAM = 0  # the training parts' own random stream: the model's draws stay as they were


@dataclass(frozen=True)
class CalibrationSet:
    """Model inputs of pseudo-Japanese sentences and how many morae they hold in total."""

    inputs: list[dict[str, torch.Tensor]]
    morae: int


def morae_per_second(morae: int, frames: float) -> float:
    return morae / (frames * SECONDS_PER_FRAME)


@dataclass(frozen=True)
class RandomVoice:
    config: ModelConfig
    model: SynthesizerTrn
    style_vectors: np.ndarray  # float32 [n_styles, 256], row 0 = mean of the others
    training: TrainingParts  # random too: inference never reads them, SBV2's files hold them

    def write_model_folder(self, folder: Path) -> Path:
        """An SBV2 model folder (config.json, <name>.safetensors, style_vectors.npy), the
        checkpoint as SBV2's training writes it into its model_assets folder."""
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.config.raw, ensure_ascii=False, indent=2) + "\n"
        (folder / "config.json").write_text(text, encoding="utf-8")
        save_checkpoint(self.model, folder / f"{folder.name}.safetensors", self.training)
        np.save(folder / "style_vectors.npy", self.style_vectors)
        return folder


def random_voice(
    preset: VoicePreset,
    speaker: str,
    bert_dim: int,
    seed: int,
    speakers: tuple[str, ...] | None = None,
) -> RandomVoice:
    """Build, randomise and calibrate the voice ``speaker`` of ``preset``; ``speakers``: the
    names of a multi-speaker model's speakers (default: the one, ``speaker``)."""
    config = parse_config(preset.sbv2_config(speaker, bert_dim, speakers))
    entropy = [seed, *speaker.encode()]
    rng = np.random.default_rng(entropy)
    model = SynthesizerTrn(config.net).eval()
    randomize_(model, config.net.hidden_channels, rng)
    style_vectors = random_style_vectors(len(preset.styles), rng)
    calibration = calibration_set(config.net.bert_dim, style_vectors[0], rng)
    calibrate_durations_(model, calibration, seed)
    calibrate_loudness_(model, calibration.inputs[:2], seed)
    training = TrainingParts(config.net, SPEC_CHANNELS)
    streams = np.random.SeedSequence(entropy, spawn_key=(TRAINING_STREAM,))
    randomize_(training, config.net.hidden_channels, np.random.default_rng(streams))
    return RandomVoice(config, model, style_vectors, training)


def random_style_vectors(n_styles: int, rng: np.random.Generator) -> np.ndarray:
    styles = rng.normal(0.0, STYLE_SCALE, (max(n_styles - 1, 1), STYLE_DIM))
    rows = np.concatenate([styles.mean(axis=0, keepdims=True), styles])[:n_styles]
    return rows.astype(np.float32)


# --- weights ------------------------------------------------------------------------------------


def randomize_(model: nn.Module, hidden: int, rng: np.random.Generator) -> None:
    """Draw every parameter, scaled per layer type so activations stay of order one."""
    done: set[int] = set()
    for name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            std, mean = _init_scale(name, module, param_name, param, hidden)
            with torch.no_grad():
                param.copy_(torch.from_numpy(rng.normal(mean, std, tuple(param.shape))))
            done.add(id(param))
    missed = [n for n, p in model.named_parameters() if id(p) not in done]
    if missed:
        raise AssertionError(f"parameters without an initialiser: {missed}")


def _init_scale(
    name: str, module: nn.Module, param_name: str, param: torch.Tensor, hidden: int
) -> tuple[float, float]:
    """(std, mean) of the normal distribution for one parameter."""
    if param_name == "bias":
        return 0.02, 0.0
    if isinstance(module, ChannelLayerNorm):
        return 0.1, 1.0 if param_name == "gamma" else 0.0
    if isinstance(module, ElementwiseAffine):
        return 0.1, 0.0
    if isinstance(module, RelativeSelfAttention):  # emb_rel_k / emb_rel_v
        return param.shape[-1] ** -0.5, 0.0
    if isinstance(module, nn.Embedding):
        return (1.0 if name == "emb_g" else hidden**-0.5), 0.0
    gain = _gain(name)
    if isinstance(module, nn.ConvTranspose1d):
        in_channels, _, kernel = param.shape
        return gain / math.sqrt(in_channels * kernel / module.stride[0]), 0.0
    return gain / math.sqrt(param[0].numel()), 0.0  # Conv1d, Linear: 1 / sqrt(fan-in)


def _gain(name: str) -> float:
    if name in ("enc_p.bert_proj", "enc_p.style_proj"):
        return 0.1  # like the embeddings they are added to, before the sqrt(hidden) scaling
    if name.startswith("flow.") and name.endswith(".post"):
        return 0.1  # flows shift the prior sample gently, as trained ones do
    if name.startswith("dec.resblocks."):
        return 0.5  # residual stacks: keep the growth per stage moderate
    return 1.0


# --- calibration --------------------------------------------------------------------------------


def calibration_set(bert_dim: int, style: np.ndarray, rng: np.random.Generator) -> CalibrationSet:
    """Pseudo-Japanese sentences (see pseudo_text) as model inputs."""
    sentences = [pseudo_sentence(rng, n) for n in CALIBRATION_MORAE]
    return CalibrationSet(
        inputs=[sentence.model_inputs(bert_dim, style, rng) for sentence in sentences],
        morae=sum(sentence.morae for sentence in sentences),
    )


def _log_durations(
    model: SynthesizerTrn,
    batch: list[dict[str, torch.Tensor]],
    sdp_ratio: float,
    noise_scale_w: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """Log durations of every phone slot in the batch, concatenated (noise drawn from ``seed``)."""
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(seed)
        values = [
            model.log_durations(model.encode(**inputs), sdp_ratio, noise_scale_w).flatten()
            for inputs in batch
        ]
    return torch.cat(values).double().numpy()


def total_frames(log_durations: np.ndarray, shift: float = 0.0) -> float:
    """Whole frames of all phones after shifting the log durations (as the graphs ceil them)."""
    return float(np.ceil(np.exp(log_durations + shift)).sum())


def duration_shift(
    log_durations: np.ndarray, morae: int, target: float = TARGET_MORAE_PER_SECOND
) -> float:
    """The shift of log durations at which ``morae`` are spoken at ``target`` morae per second."""
    frames_needed = morae / target / SECONDS_PER_FRAME
    low, high = -30.0, 30.0  # total_frames grows monotonically with the shift
    for _ in range(60):
        middle = (low + high) / 2
        if total_frames(log_durations, middle) < frames_needed:
            low = middle
        else:
            high = middle
    return high


def calibrate_durations_(model: SynthesizerTrn, calibration: CalibrationSet, seed: int) -> None:
    """Shift the predictors' log-duration outputs onto the target speaking rate.

    Each predictor is first calibrated alone (noise off); then both move by the same amount so
    that the engine's default blend hits the target too. Averaging two predictors in log space
    gives shorter durations than either alone (Jensen), so this second step is not a no-op.
    """
    batch, morae = calibration.inputs, calibration.morae
    _shift_dp_(model, duration_shift(_log_durations(model, batch, sdp_ratio=0.0), morae))
    _shift_sdp_(model, duration_shift(_log_durations(model, batch, sdp_ratio=1.0), morae))
    blended = _log_durations(model, batch, DEFAULT_SDP_RATIO, DEFAULT_NOISE_W, seed)
    both = duration_shift(blended, morae)
    _shift_dp_(model, both)
    _shift_sdp_(model, both)


def _shift_dp_(model: SynthesizerTrn, shift: float) -> None:
    with torch.no_grad():
        model.dp.proj.bias += shift


def _shift_sdp_(model: SynthesizerTrn, shift: float) -> None:
    # The stochastic predictor's last generating step is (z - m) * exp(-logs) on channel 0 (its
    # ElementwiseAffine), so lowering m[0] by shift * exp(logs[0]) adds ``shift``.
    affine = model.sdp.flows[0]
    with torch.no_grad():
        affine.m[0] -= shift * torch.exp(affine.logs[0])


def calibrate_loudness_(
    model: SynthesizerTrn, batch: list[dict[str, torch.Tensor]], seed: int
) -> None:
    """Scale the decoder's output convolution so the pre-tanh signal has TARGET_LOUDNESS std."""
    captured: list[torch.Tensor] = []
    hook = model.dec.conv_post.register_forward_hook(lambda _m, _i, out: captured.append(out))
    try:
        with torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(seed)
            for inputs in batch:
                model.infer(
                    **inputs,
                    noise_scale=0.667,
                    noise_scale_w=DEFAULT_NOISE_W,
                    sdp_ratio=DEFAULT_SDP_RATIO,
                )
    finally:
        hook.remove()
    std = float(torch.cat([c.flatten() for c in captured]).std())
    with torch.no_grad():
        model.dec.conv_post.weight *= TARGET_LOUDNESS / std
