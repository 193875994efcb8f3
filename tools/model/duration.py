"""Duration predictors: log-durations per phone from the text encoder's hidden states.

The synthesizer blends the two: ``sdp_ratio * stochastic + (1 - sdp_ratio) * deterministic``.
"""

from __future__ import annotations

import torch
from torch import nn

from .flows import ConvFlow, ElementwiseAffine, Flip
from .layers import ChannelLayerNorm, DilatedSeparableConvs

SKIPPED_WHEN_GENERATING = 1  # index of the ConvFlow that only touches the discarded channel


class StochasticDurationPredictor(nn.Module):
    """Flow from 2-channel noise to (log-duration, auxiliary), conditioned on text and speaker.

    SBV2 builds it with filter_channels = in_channels. The posterior modules (``post_*``) are
    only used in training and are not built here.
    """

    def __init__(
        self, channels: int, kernel_size: int, gin_channels: int, n_flows: int = 4
    ) -> None:
        super().__init__()
        self.pre = nn.Conv1d(channels, channels, 1)
        self.convs = DilatedSeparableConvs(channels, kernel_size, n_layers=3)
        self.proj = nn.Conv1d(channels, channels, 1)
        self.cond = nn.Conv1d(gin_channels, channels, 1)
        self.flows = nn.ModuleList([ElementwiseAffine(2)])
        for _ in range(n_flows):
            self.flows.append(ConvFlow(2, channels, kernel_size, n_layers=3))
            self.flows.append(Flip())

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor, noise_scale: torch.Tensor
    ) -> torch.Tensor:
        """x [B, C, T], mask [B, 1, T], g [B, gin, 1] -> log-durations [B, 1, T]."""
        h = self.pre(x) + self.cond(g)
        h = self.proj(self.convs(h, mask)) * mask
        z = torch.randn_like(h[:, :2]) * noise_scale
        # The first ConvFlow only transforms channel 1, which is thrown away below.
        for index in reversed(range(len(self.flows))):
            if index != SKIPPED_WHEN_GENERATING:
                z = self.flows[index](z, mask, g=h)
        return z[:, :1]


class DurationPredictor(nn.Module):
    """Two conv + ReLU + layer-norm blocks and a 1x1 projection to one log-duration per phone."""

    def __init__(
        self, channels: int, filter_channels: int, kernel_size: int, gin_channels: int
    ) -> None:
        super().__init__()
        padding = kernel_size // 2
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size, padding=padding)
        self.norm_1 = ChannelLayerNorm(filter_channels)
        self.conv_2 = nn.Conv1d(filter_channels, filter_channels, kernel_size, padding=padding)
        self.norm_2 = ChannelLayerNorm(filter_channels)
        self.proj = nn.Conv1d(filter_channels, 1, 1)
        self.cond = nn.Conv1d(gin_channels, channels, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """x [B, C, T], mask [B, 1, T], g [B, gin, 1] -> log-durations [B, 1, T]."""
        x = x + self.cond(g)
        x = self.norm_1(torch.relu(self.conv_1(x * mask)))
        x = self.norm_2(torch.relu(self.conv_2(x * mask)))
        return self.proj(x * mask) * mask
