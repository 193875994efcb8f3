"""Normalising-flow layers, run only in the generating (inverse) direction.

Every ``forward`` here is the inverse of the training-time transform: from noise (or the prior
sample) towards data. Parameter names follow SBV2 so its checkpoints load unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import AttentionEncoder
from .layers import DilatedSeparableConvs
from .spline import inverse_spline


class Flip(nn.Module):
    """Reverses the channel order (its own inverse)."""

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        return torch.flip(x, [1])


class ElementwiseAffine(nn.Module):
    """Inverse of y = m + exp(logs) * x, per channel."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.m = nn.Parameter(torch.zeros(channels, 1))
        self.logs = nn.Parameter(torch.zeros(channels, 1))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        return (x - self.m) * torch.exp(-self.logs) * mask


class ConvFlow(nn.Module):
    """Coupling layer: the first half conditions a spline transform of the second half."""

    def __init__(
        self,
        channels: int,
        filter_channels: int,
        kernel_size: int,
        n_layers: int,
        num_bins: int = 10,
        tail_bound: float = 5.0,
    ) -> None:
        super().__init__()
        self.half = channels // 2
        self.filter_channels = filter_channels
        self.num_bins = num_bins
        self.tail_bound = tail_bound
        self.pre = nn.Conv1d(self.half, filter_channels, 1)
        self.convs = DilatedSeparableConvs(filter_channels, kernel_size, n_layers)
        self.proj = nn.Conv1d(filter_channels, self.half * (num_bins * 3 - 1), 1)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        x0, x1 = torch.split(x, [self.half, self.half], 1)
        h = self.proj(self.convs(self.pre(x0), mask, g=g)) * mask
        batch, channels, length = x0.shape
        h = h.reshape(batch, channels, -1, length).permute(0, 1, 3, 2)  # [B, half, T, 3K-1]
        scale = math.sqrt(self.filter_channels)
        bins = self.num_bins
        x1 = inverse_spline(
            x1,
            widths=h[..., :bins] / scale,
            heights=h[..., bins : 2 * bins] / scale,
            derivatives=h[..., 2 * bins :],
            tail_bound=self.tail_bound,
        )
        return torch.cat([x0, x1], 1) * mask


class TransformerCouplingLayer(nn.Module):
    """Mean-only affine coupling whose shift comes from a transformer over the first half."""

    def __init__(
        self,
        channels: int,
        hidden_channels: int,
        filter_channels: int,
        n_heads: int,
        n_layers: int,
        kernel_size: int,
        gin_channels: int,
    ) -> None:
        super().__init__()
        self.half = channels // 2
        self.pre = nn.Conv1d(self.half, hidden_channels, 1)
        self.enc = AttentionEncoder(
            hidden_channels, filter_channels, n_heads, n_layers, kernel_size, gin_channels
        )
        self.post = nn.Conv1d(hidden_channels, self.half, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x0, x1 = torch.split(x, [self.half, self.half], 1)
        h = self.enc(self.pre(x0) * mask, mask, g)
        shift = self.post(h) * mask
        return torch.cat([x0, (x1 - shift) * mask], 1)


class TransformerCouplingBlock(nn.Module):
    """The JP-Extra flow: couplings alternating with channel flips, applied last-to-first."""

    def __init__(
        self,
        channels: int,
        hidden_channels: int,
        filter_channels: int,
        n_heads: int,
        n_layers: int,
        n_flows: int,
        gin_channels: int,
        kernel_size: int = 5,
    ) -> None:
        super().__init__()
        self.flows = nn.ModuleList()
        for _ in range(n_flows):
            self.flows.append(
                TransformerCouplingLayer(
                    channels,
                    hidden_channels,
                    filter_channels,
                    n_heads,
                    n_layers,
                    kernel_size,
                    gin_channels,
                )
            )
            self.flows.append(Flip())

    def forward(self, z: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Prior sample z [B, C, T_frames] -> latent for the decoder."""
        for flow in reversed(self.flows):
            z = flow(z, mask, g)
        return z
