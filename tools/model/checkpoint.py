"""Reading and writing SBV2 checkpoints: ``.safetensors`` (or ``.pth`` holding ``{"model": sd}``).

Weight-normalised layers are stored by SBV2 as ``weight_g``/``weight_v`` pairs (or, with newer
torch, ``parametrizations.weight.original0/1``). They are folded into plain ``weight`` tensors here,
so the model and the exported graphs never see weight norm. The training-only parts SBV2's files
carry (``enc_q.*``, ``sdp.post_*``) are skipped on reading and written from ``TrainingParts``.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import ModelConfig, load_config
from .errors import ModelFileError, first_line
from .synthesizer import SynthesizerTrn
from .training_parts import TrainingParts

# Training-only parts of SBV2's generator, and bookkeeping entries, that inference ignores.
IGNORED_PREFIXES = ("enc_q.", "sdp.post_")
IGNORED_KEYS = frozenset({"iteration"})
# The layers SBV2 wraps in weight norm: the decoder's upsamplers and resblock convolutions, and
# every convolution of the posterior encoder's WaveNet.
WEIGHT_NORM_LAYER = re.compile(
    r"^(dec\.(ups\.\d+|resblocks\.\d+\.convs[12]?\.\d+)"
    r"|enc_q\.enc\.(in_layers\.\d+|res_skip_layers\.\d+|cond_layer))$"
)
_PAIRS = (
    (".weight_g", ".weight_v"),
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),
)


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint file, as stored; ``ModelFileError`` when unreadable."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(path, "file is missing")
    if path.suffix in (".safetensors", ".aivm"):  # an .aivm is a safetensors file
        return _read_safetensors(path)
    if path.suffix in (".pth", ".pt"):
        return _read_torch(path)
    raise ModelFileError(path, "unknown checkpoint format (expected .safetensors, .aivm or .pth)")


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as err:
        problem = f"not a readable safetensors file ({first_line(err)})"
        raise ModelFileError(path, problem) from None


def _read_torch(path: Path) -> dict[str, torch.Tensor]:
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError) as err:
        problem = f"not a readable torch checkpoint ({first_line(err)})"
        raise ModelFileError(path, problem) from None
    state = loaded.get("model", loaded) if isinstance(loaded, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelFileError(path, "expected a state dict or {'model': state dict}")
    return state


def fold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace every (magnitude g, direction v) pair by ``weight = g * v / ||v||``."""
    folded = dict(state)
    for g_suffix, v_suffix in _PAIRS:
        for g_key in [k for k in state if k.endswith(g_suffix)]:
            layer = g_key.removesuffix(g_suffix)
            v_key = layer + v_suffix
            if v_key in state:
                del folded[g_key], folded[v_key]
                folded[layer + ".weight"] = _weight(state[g_key].float(), state[v_key].float())
    return folded


def _weight(magnitude: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    axes = [i for i, size in enumerate(magnitude.shape) if size == 1]
    return magnitude * direction / torch.linalg.vector_norm(direction, dim=axes, keepdim=True)


def unfold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SBV2's storage of decoder weights: ``weight_g`` (norm over all but dim 0), ``weight_v``."""
    unfolded: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        layer = key.removesuffix(".weight")
        if key.endswith(".weight") and WEIGHT_NORM_LAYER.match(layer):
            axes = list(range(1, tensor.dim()))
            unfolded[f"{layer}.weight_g"] = torch.linalg.vector_norm(tensor, dim=axes, keepdim=True)
            unfolded[f"{layer}.weight_v"] = tensor.clone()
        else:
            unfolded[key] = tensor
    return unfolded


def load_weights(model: SynthesizerTrn, state: dict[str, torch.Tensor], path: str | Path) -> None:
    """Load an SBV2 state dict into ``model``; any key or shape mismatch names the file."""
    state = {
        key.removeprefix("module."): tensor.float()
        for key, tensor in fold_weight_norm(state).items()
        if key not in IGNORED_KEYS and not key.removeprefix("module.").startswith(IGNORED_PREFIXES)
    }
    expected = model.state_dict()
    problems = _key_problems(expected.keys(), state.keys())
    problems += [
        f"{key} has shape {list(state[key].shape)}, the config implies {list(tensor.shape)}"
        for key, tensor in expected.items()
        if key in state and state[key].shape != tensor.shape
    ][:3]
    if problems:
        raise ModelFileError(path, "does not match config.json: " + "; ".join(problems))
    model.load_state_dict(state, strict=True)


def _key_problems(expected: object, found: object) -> list[str]:
    missing = sorted(set(expected) - set(found))  # type: ignore[call-overload]
    unexpected = sorted(set(found) - set(expected))  # type: ignore[call-overload]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing tensors (e.g. {', '.join(missing[:3])})")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensors (e.g. {', '.join(unexpected[:3])})")
    return problems


def load_model(config: ModelConfig | str | Path, checkpoint: str | Path) -> SynthesizerTrn:
    """An SBV2 JP-Extra generator in eval mode, built from config.json and a checkpoint file."""
    if not isinstance(config, ModelConfig):
        config = load_config(config)
    model = SynthesizerTrn(config.net)
    load_weights(model, read_state_dict(checkpoint), checkpoint)
    return model.eval()


def save_checkpoint(
    model: SynthesizerTrn,
    path: str | Path,
    training: TrainingParts,
    iteration: int = 0,
    for_infer: bool = True,
) -> None:
    """Write ``model`` with its ``training`` parts as SBV2's ``save_safetensors`` does:
    weight-norm pairs, an int64 [1] ``iteration``; ``for_infer`` (the model_assets file its
    training writes, and AivisHub's .aivm) leaves out ``enc_q``, as SBV2's own switch does."""
    state = model.state_dict() | {
        key: tensor
        for key, tensor in training.state_dict().items()
        if not (for_infer and key.startswith("enc_q."))
    }
    state = unfold_weight_norm({k: v.detach().contiguous() for k, v in state.items()})
    state["iteration"] = torch.tensor([iteration], dtype=torch.int64)
    save_file(state, str(path))
