"""HiFi-GAN generator (the decoder): latent frames -> waveform, with multi-receptive-field blocks.

Built without weight norm: checkpoints' weight_g/weight_v pairs are folded into plain weights when
they are loaded (see checkpoint.py), so the exported graph holds ordinary convolutions.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

LRELU_SLOPE = 0.1


def _same_padding(kernel_size: int, dilation: int) -> int:
    return (kernel_size * dilation - dilation) // 2


def _dilated_convs(channels: int, kernel_size: int, dilations: tuple[int, ...]) -> nn.ModuleList:
    return nn.ModuleList(
        nn.Conv1d(
            channels,
            channels,
            kernel_size,
            dilation=dilation,
            padding=_same_padding(kernel_size, dilation),
        )
        for dilation in dilations
    )


class ResBlock1(nn.Module):
    """Residual pairs: a dilated convolution followed by an undilated one."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = _dilated_convs(channels, kernel_size, dilations)
        self.convs2 = _dilated_convs(channels, kernel_size, (1,) * len(dilations))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for dilated, plain in zip(self.convs1, self.convs2, strict=True):
            y = dilated(F.leaky_relu(x, LRELU_SLOPE))
            x = x + plain(F.leaky_relu(y, LRELU_SLOPE))
        return x


class ResBlock2(nn.Module):
    """Residual dilated convolutions, one per dilation."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs = _dilated_convs(channels, kernel_size, dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, LRELU_SLOPE))
        return x


class Generator(nn.Module):
    def __init__(
        self,
        in_channels: int,
        resblock: str,
        resblock_kernel_sizes: tuple[int, ...],
        resblock_dilation_sizes: tuple[tuple[int, ...], ...],
        upsample_rates: tuple[int, ...],
        upsample_initial_channel: int,
        upsample_kernel_sizes: tuple[int, ...],
        gin_channels: int,
    ) -> None:
        super().__init__()
        self.n_kernels = len(resblock_kernel_sizes)
        block = ResBlock1 if resblock == "1" else ResBlock2
        self.conv_pre = nn.Conv1d(in_channels, upsample_initial_channel, 7, padding=3)
        self.cond = nn.Conv1d(gin_channels, upsample_initial_channel, 1)
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        channels = upsample_initial_channel
        for rate, kernel in zip(upsample_rates, upsample_kernel_sizes, strict=True):
            self.ups.append(
                nn.ConvTranspose1d(
                    channels, channels // 2, kernel, rate, padding=(kernel - rate) // 2
                )
            )
            channels //= 2
            for size, dilations in zip(resblock_kernel_sizes, resblock_dilation_sizes, strict=True):
                self.resblocks.append(block(channels, size, dilations))
        self.conv_post = nn.Conv1d(channels, 1, 7, padding=3, bias=False)

    def forward(self, z: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """z [B, C, T_frames], g [B, gin, 1] -> audio in [-1, 1], [B, 1, T_frames * hop]."""
        x = self.conv_pre(z) + self.cond(g)
        for stage, upsample in enumerate(self.ups):
            x = upsample(F.leaky_relu(x, LRELU_SLOPE))
            blocks = self.resblocks[stage * self.n_kernels : (stage + 1) * self.n_kernels]
            mixed = blocks[0](x)
            for block in blocks[1:]:
                mixed = mixed + block(x)
            x = mixed / self.n_kernels
        # SBV2 uses leaky_relu's default slope (0.01) here, unlike everywhere else.
        return torch.tanh(self.conv_post(F.leaky_relu(x)))
