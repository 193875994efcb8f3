"""The reference model's parts against their textbook definitions, and config.json checking."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F

from tools.model import ModelFileError, NetConfig, SynthesizerTrn, load_config, parse_config
from tools.model.attention import RelativePositions, RelativeSelfAttention
from tools.model.masks import alignment_path
from tools.model.spline import MIN_BIN_HEIGHT, MIN_BIN_WIDTH, MIN_DERIVATIVE, inverse_spline
from tools.presets import PRESETS

# --- relative-position attention --------------------------------------------------------------


def naive_relative_attention(
    layer: RelativeSelfAttention, x: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Shaw et al. relative attention written out per (query, key) pair, as VITS defines it:
    offsets beyond +-window contribute nothing to the logits or the values."""
    heads, size, window = layer.n_heads, layer.head_channels, layer.window_size
    length = x.shape[2]
    q, k, v = (
        conv(x)[0].reshape(heads, size, length)
        for conv in (layer.conv_q, layer.conv_k, layer.conv_v)
    )
    out = torch.zeros(heads, size, length)
    for h in range(heads):
        for i in range(length):
            logits = torch.empty(length)
            for j in range(length):
                logit = q[h, :, i] @ k[h, :, j]
                if abs(j - i) <= window:
                    logit = logit + q[h, :, i] @ layer.emb_rel_k[0, j - i + window]
                logits[j] = logit / math.sqrt(size) if mask[i] * mask[j] else -1e4
            weights = torch.softmax(logits, 0)
            for j in range(length):
                value = v[h, :, j]
                if abs(j - i) <= window:
                    value = value + layer.emb_rel_v[0, j - i + window]
                out[h, :, i] += weights[j] * value
    return layer.conv_o(out.reshape(1, heads * size, length))


@pytest.mark.parametrize("length", [1, 3, 6, 13])
def test_attention_matches_the_definition(length: int) -> None:
    torch.manual_seed(length)
    layer = RelativeSelfAttention(channels=8, n_heads=2)
    with torch.no_grad():
        for param in layer.parameters():
            param.normal_(0, 0.7)
        x = torch.randn(1, 8, length)
        valid = torch.ones(length)
        valid[length * 2 // 3 + 1 :] = 0  # padding at the end (none for the shortest)
        attn_mask = (valid[:, None] * valid[None, :])[None, None]
        positions = RelativePositions.for_length(length, layer.window_size, x)
        ours = layer(x, attn_mask, positions)
        expected = naive_relative_attention(layer, x, valid)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


# --- rational-quadratic spline ------------------------------------------------------------------


def forward_spline(
    x: torch.Tensor, widths: torch.Tensor, heights: torch.Tensor, derivs: torch.Tensor, bound: float
) -> torch.Tensor:
    """Durkan et al. (2019), eq. 4, with identity outside [-bound, bound]; one element at a time."""
    out = x.clone()
    for index in range(x.numel()):
        value = float(x.flatten()[index])
        if abs(value) > bound:
            continue
        w = MIN_BIN_WIDTH + (1 - MIN_BIN_WIDTH * 10) * torch.softmax(
            widths.reshape(-1, 10)[index], 0
        )
        h = MIN_BIN_HEIGHT + (1 - MIN_BIN_HEIGHT * 10) * torch.softmax(
            heights.reshape(-1, 10)[index], 0
        )
        inner = MIN_DERIVATIVE + F.softplus(derivs.reshape(-1, 9)[index])
        d = torch.cat([torch.ones(1, dtype=x.dtype), inner, torch.ones(1, dtype=x.dtype)])
        xs = torch.cat([torch.zeros(1, dtype=x.dtype), torch.cumsum(w, 0)]) * 2 * bound - bound
        ys = torch.cat([torch.zeros(1, dtype=x.dtype), torch.cumsum(h, 0)]) * 2 * bound - bound
        k = min(int(torch.searchsorted(xs, torch.tensor(value, dtype=x.dtype), right=True)) - 1, 9)
        width, height = xs[k + 1] - xs[k], ys[k + 1] - ys[k]
        slope = height / width
        theta = (value - xs[k]) / width
        mixed = theta * (1 - theta)
        numerator = height * (slope * theta**2 + d[k] * mixed)
        denominator = slope + (d[k + 1] + d[k] - 2 * slope) * mixed
        out.view(-1)[index] = ys[k] + numerator / denominator
    return out


@pytest.mark.parametrize(
    ("dtype", "spread", "tolerance"), [(torch.float64, 2.0, 1e-9), (torch.float32, 1.0, 1e-4)]
)
def test_inverse_spline_inverts_the_forward_spline(
    dtype: torch.dtype, spread: float, tolerance: float
) -> None:
    """Exact in float64 even for extreme bins; in float32 steep bins amplify rounding (as in SBV2),
    so the float32 case uses milder parameters."""
    generator = torch.Generator().manual_seed(3)
    n, bound = 200, 5.0
    x = (torch.rand(1, 1, n, generator=generator) * 14 - 7).to(dtype)  # some outside the interval
    widths = (torch.randn(1, 1, n, 10, generator=generator) * spread).to(dtype)
    heights = (torch.randn(1, 1, n, 10, generator=generator) * spread).to(dtype)
    derivs = torch.randn(1, 1, n, 9, generator=generator).to(dtype)
    y = forward_spline(x, widths, heights, derivs, bound)
    assert (y != x).sum() > n // 2  # the spline really transforms the inside values
    recovered = inverse_spline(y, widths, heights, derivs, tail_bound=bound)
    torch.testing.assert_close(recovered, x, atol=tolerance, rtol=tolerance)


# --- alignment ----------------------------------------------------------------------------------


def test_alignment_path_gives_each_phone_its_frames() -> None:
    durations = torch.tensor([[[2.0, 0.0, 3.0, 1.0]]])
    mask = torch.ones(1, 1, 7, 4)
    mask[..., 3] = 0  # the last phone is padding
    path = alignment_path(durations, mask)[0, 0]
    expected = torch.tensor(
        [
            [1, 0, 0, 0],
            [1, 0, 0, 0],
            [0, 0, 1, 0],
            [0, 0, 1, 0],
            [0, 0, 1, 0],
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ],
        dtype=torch.float32,
    )
    torch.testing.assert_close(path, expected)


# --- whole model --------------------------------------------------------------------------------


def tiny_net(**changes: Any) -> NetConfig:
    config = parse_config(PRESETS["tiny"].sbv2_config("x", bert_dim=8))
    return NetConfig(**{**config.net.__dict__, **changes})


@pytest.mark.parametrize("resblock", ["1", "2"])
def test_audio_has_one_hop_per_frame(resblock: str) -> None:
    torch.manual_seed(0)
    dilations = ((1, 3, 5),) * 3 if resblock == "1" else ((1, 3),) * 3
    model = SynthesizerTrn(tiny_net(resblock=resblock, resblock_dilation_sizes=dilations)).eval()
    n = 9
    args = (
        torch.zeros(1, n, dtype=torch.long),
        torch.tensor([n]),
        torch.tensor([0]),
        torch.full((1, n), 6),
        torch.ones(1, n, dtype=torch.long),
        torch.randn(1, 8, n),
        torch.randn(1, 256),
    )
    with torch.no_grad():
        frames = model.predict_durations(*args, length_scale=1.5)
        audio = model.infer(*args, noise_scale=0.0, noise_scale_w=0.0, length_scale=1.5)
    assert frames.shape == (1, n)
    assert torch.all(frames >= 1) and torch.all(frames == frames.round())
    assert audio.shape == (1, 1, int(frames.sum()) * 512)
    assert float(audio.abs().max()) <= 1.0


# --- config.json --------------------------------------------------------------------------------


def write_config(tmp_path: Path, change: Any) -> Path:
    raw = PRESETS["tiny"].sbv2_config("tiny-a", bert_dim=8)
    change(raw)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return path


def test_config_reads_the_preset_back(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, lambda raw: None))
    assert config.net.hidden_channels == 16 and config.net.bert_dim == 8
    assert config.net.n_flow_layer == 4  # SBV2's default, not written in config.json
    assert config.style2id == {"Neutral": 0, "Happy": 1, "Sad": 2}
    assert config.sampling_rate == 44100 and config.hop_length == config.net.hop_length == 512


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda raw: raw.pop("data"), "missing key 'data'"),
        (lambda raw: raw["data"].update(hop_length=256), "hop_length 256 differs"),
        (lambda raw: raw["model"].update(use_transformer_flow=False), "transformer flow"),
        (lambda raw: raw["model"].update(n_layers=2), "n_layers"),
        (lambda raw: raw["model"].update(hidden_channels=15), "multiple of n_heads"),
        (lambda raw: raw["model"].update(upsample_rates="8,8"), "not an SBV2 config"),
        (lambda raw: raw["data"].update(style2id={}), "no styles"),
    ],
)
def test_bad_config_names_file_and_problem(tmp_path: Path, change: Any, message: str) -> None:
    path = write_config(tmp_path, change)
    with pytest.raises(ModelFileError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_unreadable_config(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="file is missing"):
        load_config(tmp_path / "config.json")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="not readable JSON"):
        load_config(tmp_path / "config.json")
