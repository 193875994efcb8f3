"""Transformer encoder with relative-position self-attention (VITS style) and speaker conditioning.

Relative positions beyond +-window have zero embeddings, so the relative terms only involve the
2 * window + 1 offsets near the diagonal. They are computed as [.., T, 2w+1] products plus gathers
over index tables that depend only on the length; the tables are built once per encoder and
shared by its layers. No padding or shape arithmetic per layer keeps the traced ONNX graph small,
and every length comes from tensor shapes, so one graph serves all lengths.

Style-Bert-VITS2's lineage traces the same arithmetic in another layout, which every voice its
exporters write carries (hayakoe's exporter, its converter, AIVMX; checked against hayakoe's
exporter, docs/VOICES.md): the embeddings zero-padded to all 2T - 1 offsets, the products
moved between relative and absolute positions by padding and reshaping, and each feed-forward
convolution behind a Pad node. ``sbv2_layout`` makes the model trace that way, so that the
exporter's forms of those tools are graphs of their shape.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .config import SPEAKER_COND_LAYER
from .layers import ChannelLayerNorm

WINDOW_SIZE = 4  # relative offsets -4..4 have learnt embeddings; farther ones count as zero


@dataclass
class RelativePositions:
    """Index tables for one sequence length (query i, key j, offset r = j - i)."""

    key_offset: torch.Tensor  # [1, 1, T, T] int64: clamp(j - i, -w, w) + w
    in_window: torch.Tensor  # [1, 1, T, T] float: 1 where |j - i| <= w
    near_key: torch.Tensor  # [1, 1, T, 2w+1] int64: key j = i + r - w, clamped into the sequence
    near_valid: torch.Tensor  # [1, 1, T, 2w+1] float: 1 where that key exists

    @classmethod
    def for_length(cls, length: int, window: int, like: torch.Tensor) -> RelativePositions:
        positions = torch.arange(length, device=like.device)
        offsets = positions.unsqueeze(0) - positions.unsqueeze(1)  # [i, j] = j - i
        near = positions.unsqueeze(1) + torch.arange(-window, window + 1, device=like.device)
        return cls(
            key_offset=(offsets.clamp(-window, window) + window)[None, None],
            in_window=(offsets.abs() <= window).to(like.dtype)[None, None],
            near_key=near.clamp(0, length - 1)[None, None],
            near_valid=((near >= 0) & (near < length)).to(like.dtype)[None, None],
        )


class RelativeSelfAttention(nn.Module):
    """Multi-head self-attention over [B, C, T]; relative key/value embeddings shared by heads."""

    def __init__(self, channels: int, n_heads: int, window_size: int = WINDOW_SIZE) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_channels = channels // n_heads
        self.window_size = window_size
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        n_offsets = 2 * window_size + 1
        self.emb_rel_k = nn.Parameter(torch.zeros(1, n_offsets, self.head_channels))
        self.emb_rel_v = nn.Parameter(torch.zeros(1, n_offsets, self.head_channels))
        self.sbv2_layout = False  # see sbv2_layout()

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor, positions: RelativePositions
    ) -> torch.Tensor:
        """x [B, C, T], attn_mask [B, 1, T, T] (1 = attend) -> [B, C, T]."""
        query = self._heads(self.conv_q(x)) / math.sqrt(self.head_channels)
        key = self._heads(self.conv_k(x))
        value = self._heads(self.conv_v(x))

        content = query @ key.transpose(-2, -1)  # [B, H, T, T]
        if self.sbv2_layout:
            return self._padded(x, query, content, value, attn_mask)
        by_offset = query @ self.emb_rel_k.transpose(-2, -1)  # [B, H, T, 2w+1]
        relative = torch.gather(by_offset, 3, positions.key_offset.expand_as(content))
        scores = content + relative * positions.in_window
        weights = F.softmax(scores.masked_fill(attn_mask == 0, -1e4), dim=-1)

        near = torch.gather(weights, 3, positions.near_key.expand_as(by_offset))
        out = weights @ value + (near * positions.near_valid) @ self.emb_rel_v
        return self.conv_o(out.transpose(2, 3).reshape(x.shape[0], x.shape[1], -1))

    def _padded(
        self,
        x: torch.Tensor,
        query: torch.Tensor,
        content: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor,
    ) -> torch.Tensor:
        """``forward`` over all 2T - 1 offsets, the embeddings padded with zeros."""
        length = x.shape[2]
        keys = self._all_offsets(self.emb_rel_k, length).unsqueeze(0).transpose(-2, -1)
        relative = _to_absolute(query @ keys)
        weights = F.softmax((content + relative).masked_fill(attn_mask == 0, -1e4), dim=-1)
        by_offset = _to_relative(weights) @ self._all_offsets(self.emb_rel_v, length).unsqueeze(0)
        out = weights @ value + by_offset
        return self.conv_o(out.transpose(2, 3).reshape(x.shape[0], x.shape[1], -1))

    def _all_offsets(self, table: torch.Tensor, length: int) -> torch.Tensor:
        """[1, 2w+1, d] -> [1, 2T-1, d]: zero rows for the offsets beyond the window (a
        negative pad crops a sequence shorter than the window)."""
        extra = length - self.window_size - 1
        return F.pad(table, (0, 0, extra, extra))[:, : 2 * length - 1]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, T] -> [B, heads, T, head_channels] (-1 keeps the traced graph small)."""
        return x.reshape(x.shape[0], self.n_heads, self.head_channels, -1).transpose(2, 3)


def _to_absolute(by_offset: torch.Tensor) -> torch.Tensor:
    """[B, H, T, 2T-1] by offset j - i + T - 1 -> [B, H, T, T] by key j: each row one longer,
    the rows read as one run and cut into rows of 2T - 1, which shifts row i left by i."""
    batch, heads, length, _ = by_offset.shape
    run = F.pad(by_offset, (0, 1)).reshape(batch, heads, 2 * length * length)
    rows = F.pad(run, (0, length - 1)).reshape(batch, heads, length + 1, 2 * length - 1)
    return rows[:, :, :length, length - 1 :]


def _to_relative(weights: torch.Tensor) -> torch.Tensor:
    """[B, H, T, T] by key j -> [B, H, T, 2T-1] by offset j - i + T - 1 (zeros where no key)."""
    batch, heads, length, _ = weights.shape
    run = F.pad(weights, (0, length - 1)).reshape(batch, heads, length * (2 * length - 1))
    rows = F.pad(run, (length, 0)).reshape(batch, heads, length, 2 * length)
    return rows[:, :, :, 1:]


@contextmanager
def sbv2_layout(model: nn.Module) -> Iterator[None]:
    """Within it ``model`` traces its attention and feed-forward layers as Style-Bert-VITS2's
    modules do (the module docstring): the same arithmetic in their graph's shape."""
    layers = [m for m in model.modules() if isinstance(m, RelativeSelfAttention | FeedForward)]
    for layer in layers:
        layer.sbv2_layout = True
    try:
        yield
    finally:
        for layer in layers:
            layer.sbv2_layout = False


class FeedForward(nn.Module):
    """Two masked convolutions with ReLU, 'same' padding (left-heavy for even kernels)."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int) -> None:
        super().__init__()
        # Odd kernels pad inside the convolution: identical result, no Pad node in the graph.
        inside = kernel_size // 2 if kernel_size % 2 else 0
        self.extra_padding = (0, 0) if inside else ((kernel_size - 1) // 2, kernel_size // 2)
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size, padding=inside)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size, padding=inside)
        self.sbv2_layout = False  # see sbv2_layout(): every padding a Pad node

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self._convolve(self.conv_1, x * mask))
        return self._convolve(self.conv_2, x * mask) * mask

    def _convolve(self, conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
        if self.sbv2_layout:
            size = conv.kernel_size[0]
            padded = F.pad(x, ((size - 1) // 2, size // 2))
            return F.conv1d(padded, conv.weight, conv.bias)
        return conv(F.pad(x, self.extra_padding) if any(self.extra_padding) else x)


class AttentionEncoder(nn.Module):
    """Post-norm transformer; the speaker embedding joins before layer ``SPEAKER_COND_LAYER``."""

    def __init__(
        self,
        channels: int,
        filter_channels: int,
        n_heads: int,
        n_layers: int,
        kernel_size: int,
        gin_channels: int,
    ) -> None:
        super().__init__()
        self.attn_layers = nn.ModuleList()
        self.norm_layers_1 = nn.ModuleList()
        self.ffn_layers = nn.ModuleList()
        self.norm_layers_2 = nn.ModuleList()
        for _ in range(n_layers):
            self.attn_layers.append(RelativeSelfAttention(channels, n_heads))
            self.norm_layers_1.append(ChannelLayerNorm(channels))
            self.ffn_layers.append(FeedForward(channels, filter_channels, kernel_size))
            self.norm_layers_2.append(ChannelLayerNorm(channels))
        self.spk_emb_linear = nn.Linear(gin_channels, channels)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """x [B, C, T], mask [B, 1, T], g speaker embedding [B, gin, 1] -> [B, C, T]."""
        attn_mask = mask.unsqueeze(2) * mask.unsqueeze(-1)
        positions = RelativePositions.for_length(x.shape[2], WINDOW_SIZE, x)
        x = x * mask
        layers = zip(
            self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2, strict=True
        )
        for index, (attention, norm_1, ffn, norm_2) in enumerate(layers):
            if index == SPEAKER_COND_LAYER:
                x = (x + self.spk_emb_linear(g.transpose(1, 2)).transpose(1, 2)) * mask
            x = norm_1(x + attention(x, attn_mask, positions))
            x = norm_2(x + ffn(x, mask))
        return x * mask
