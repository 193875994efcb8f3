"""Reference SBV2 JP-Extra generator (PyTorch, inference only) that loads SBV2 checkpoints as-is."""

from .checkpoint import load_model, read_state_dict, save_checkpoint
from .config import ModelConfig, NetConfig, load_config, parse_config
from .errors import ModelFileError
from .synthesizer import SynthesizerTrn

__all__ = [
    "ModelConfig",
    "ModelFileError",
    "NetConfig",
    "SynthesizerTrn",
    "load_config",
    "load_model",
    "parse_config",
    "read_state_dict",
    "save_checkpoint",
]
