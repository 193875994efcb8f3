"""SBV2 ``config.json``: the architecture numbers the network is built from.

Real JP-Extra checkpoints rely on constructor defaults that are not written in ``config.json``
(transformer flow with 4 couplings of 6 layers, stochastic duration predictor, speaker-conditioned
text encoder); they are the defaults here. Two keys are Yomiage extensions, read only so that the
tiny test voices can be small: ``model.bert_dim`` (SBV2 hard-codes 1024) and
``model.dp_filter_channels`` (SBV2 hard-codes 256).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ModelFileError, first_line

# SBV2's symbol table (pad + phones of ZH/JP/EN + punctuation), tone and language counts.
N_SYMBOLS = 112
N_TONES = 12
N_LANGUAGES = 3
STYLE_DIM = 256
SPEAKER_COND_LAYER = 2  # the encoder layer where the speaker embedding is added (VITS2)


@dataclass(frozen=True)
class NetConfig:
    """Widths and depths of the JP-Extra generator (SBV2 ``config.json`` ``model`` section)."""

    inter_channels: int = 192
    hidden_channels: int = 192
    filter_channels: int = 768
    n_heads: int = 2
    n_layers: int = 6
    kernel_size: int = 3
    p_dropout: float = 0.1
    resblock: str = "1"
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    upsample_rates: tuple[int, ...] = (8, 8, 2, 2, 2)
    upsample_initial_channel: int = 512
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 8, 2, 2)
    gin_channels: int = 512
    n_speakers: int = 1
    n_flow_layer: int = 4
    n_layers_trans_flow: int = 6
    bert_dim: int = 1024
    dp_filter_channels: int = 256

    @property
    def hop_length(self) -> int:
        return math.prod(self.upsample_rates)

    def problems(self) -> list[str]:
        """Why this network cannot be built (empty when it can)."""
        found = []
        if self.hidden_channels % self.n_heads:
            found.append("hidden_channels must be a multiple of n_heads")
        if min(self.n_layers, self.n_layers_trans_flow) <= SPEAKER_COND_LAYER:
            found.append(f"n_layers and n_layers_trans_flow must exceed {SPEAKER_COND_LAYER}")
        if self.inter_channels % 2:
            found.append("inter_channels must be even (the flow splits it in halves)")
        if self.resblock not in ("1", "2"):
            found.append(f"resblock must be '1' or '2', not {self.resblock!r}")
        if len(self.upsample_rates) != len(self.upsample_kernel_sizes):
            found.append("upsample_rates and upsample_kernel_sizes differ in length")
        if len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes):
            found.append("resblock_kernel_sizes and resblock_dilation_sizes differ in length")
        if self.upsample_initial_channel % 2 ** len(self.upsample_rates):
            found.append("upsample_initial_channel must halve evenly at every upsampling")
        if self.n_speakers < 1:
            found.append("n_speakers must be at least 1 (reference-encoder models unsupported)")
        return found


@dataclass(frozen=True)
class ModelConfig:
    """A parsed SBV2 ``config.json``: the network plus what the voice needs around it."""

    net: NetConfig
    sampling_rate: int
    hop_length: int
    add_blank: bool
    spk2id: dict[str, int]
    style2id: dict[str, int]
    raw: dict[str, Any]  # the whole file, written back unchanged by the exporter


_INT_KEYS = (
    "inter_channels",
    "hidden_channels",
    "filter_channels",
    "n_heads",
    "n_layers",
    "kernel_size",
    "upsample_initial_channel",
    "gin_channels",
    "n_flow_layer",
    "n_layers_trans_flow",
    "bert_dim",
    "dp_filter_channels",
)
_LIST_KEYS = ("resblock_kernel_sizes", "upsample_rates", "upsample_kernel_sizes")


def load_config(path: str | Path) -> ModelConfig:
    """Read and check an SBV2 ``config.json``; every problem raises ``ModelFileError``."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(path, "file is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelFileError(path, f"not readable JSON ({first_line(err)})") from None
    return parse_config(raw, path)


def parse_config(raw: Any, path: str | Path = "config.json") -> ModelConfig:
    """Build a ``ModelConfig`` from the decoded JSON of an SBV2 config."""
    try:
        config = _parse(raw)
    except KeyError as err:
        raise ModelFileError(path, f"not an SBV2 config (missing key {err})") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise ModelFileError(path, f"not an SBV2 config ({first_line(err)})") from None
    problems = config.net.problems()
    if config.hop_length != config.net.hop_length:
        problems.append(
            f"data.hop_length {config.hop_length} differs from the product of "
            f"model.upsample_rates ({config.net.hop_length})"
        )
    if not config.style2id:
        problems.append("data.style2id lists no styles")
    if problems:
        raise ModelFileError(path, "; ".join(problems))
    return config


def _parse(raw: dict[str, Any]) -> ModelConfig:
    data, model = raw["data"], raw["model"]
    if not model.get("use_transformer_flow", True):
        raise ValueError("only the transformer flow of JP-Extra is supported")
    fields: dict[str, Any] = {key: int(model[key]) for key in _INT_KEYS if key in model}
    fields.update({key: tuple(int(v) for v in model[key]) for key in _LIST_KEYS if key in model})
    if "resblock_dilation_sizes" in model:
        fields["resblock_dilation_sizes"] = tuple(
            tuple(int(v) for v in row) for row in model["resblock_dilation_sizes"]
        )
    if "resblock" in model:
        fields["resblock"] = str(model["resblock"])
    if "p_dropout" in model:
        fields["p_dropout"] = float(model["p_dropout"])
    fields["n_speakers"] = int(data["n_speakers"])
    return ModelConfig(
        net=NetConfig(**fields),
        sampling_rate=int(data["sampling_rate"]),
        hop_length=int(data["hop_length"]),
        add_blank=bool(data.get("add_blank", True)),
        spk2id={str(k): int(v) for k, v in data.get("spk2id", {}).items()},
        style2id={str(k): int(v) for k, v in data["style2id"].items()},
        raw=raw,
    )
