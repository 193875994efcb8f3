"""Small building blocks shared by several modules."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ChannelLayerNorm(nn.Module):
    """Layer norm over the channel axis of [B, C, T] tensors (parameters ``gamma``/``beta``)."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.channels = channels
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.layer_norm(x.transpose(1, -1), (self.channels,), self.gamma, self.beta, self.eps)
        return x.transpose(1, -1)


class DilatedSeparableConvs(nn.Module):
    """Residual stack of depth-wise dilated convolutions (dilation kernel**i) + 1x1 mixing.

    SBV2 calls it DDSConv; the parameter names follow it (convs_sep, convs_1x1, norms_1, norms_2).
    """

    def __init__(self, channels: int, kernel_size: int, n_layers: int) -> None:
        super().__init__()
        self.convs_sep = nn.ModuleList()
        self.convs_1x1 = nn.ModuleList()
        self.norms_1 = nn.ModuleList()
        self.norms_2 = nn.ModuleList()
        for i in range(n_layers):
            dilation = kernel_size**i
            self.convs_sep.append(
                nn.Conv1d(
                    channels,
                    channels,
                    kernel_size,
                    groups=channels,
                    dilation=dilation,
                    padding=(kernel_size * dilation - dilation) // 2,
                )
            )
            self.convs_1x1.append(nn.Conv1d(channels, channels, 1))
            self.norms_1.append(ChannelLayerNorm(channels))
            self.norms_2.append(ChannelLayerNorm(channels))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        if g is not None:
            x = x + g
        for sep, mix, norm_1, norm_2 in zip(
            self.convs_sep, self.convs_1x1, self.norms_1, self.norms_2, strict=True
        ):
            y = F.gelu(norm_1(sep(x * mask)))
            y = F.gelu(norm_2(mix(y)))
            x = x + y
        return x * mask
