"""Text encoder: phone/tone/language embeddings + projected BERT and style -> prior statistics."""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import AttentionEncoder
from .config import N_LANGUAGES, N_SYMBOLS, N_TONES, STYLE_DIM
from .masks import sequence_mask


class TextEncoder(nn.Module):
    def __init__(
        self,
        out_channels: int,
        hidden_channels: int,
        filter_channels: int,
        n_heads: int,
        n_layers: int,
        kernel_size: int,
        gin_channels: int,
        bert_dim: int,
    ) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.scale = math.sqrt(hidden_channels)
        self.emb = nn.Embedding(N_SYMBOLS, hidden_channels)
        self.tone_emb = nn.Embedding(N_TONES, hidden_channels)
        self.language_emb = nn.Embedding(N_LANGUAGES, hidden_channels)
        self.bert_proj = nn.Conv1d(bert_dim, hidden_channels, 1)
        self.style_proj = nn.Linear(STYLE_DIM, hidden_channels)
        self.encoder = AttentionEncoder(
            hidden_channels, filter_channels, n_heads, n_layers, kernel_size, gin_channels
        )
        self.proj = nn.Conv1d(hidden_channels, out_channels * 2, 1)

    def forward(
        self,
        phones: torch.Tensor,
        lengths: torch.Tensor,
        tones: torch.Tensor,
        languages: torch.Tensor,
        bert: torch.Tensor,
        style: torch.Tensor,
        g: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids [B, T], lengths [B], bert [B, bert_dim, T], style [B, 256], g [B, gin, 1].

        Returns hidden states [B, H, T], prior mean and log-std [B, out, T], mask [B, 1, T].
        """
        x = (
            self.emb(phones)
            + self.tone_emb(tones)
            + self.language_emb(languages)
            + self.bert_proj(bert).transpose(1, 2)
            + self.style_proj(style).unsqueeze(1)
        ) * self.scale
        x = x.transpose(1, 2)
        mask = sequence_mask(lengths, x.shape[2]).unsqueeze(1).to(x.dtype)
        x = self.encoder(x * mask, mask, g)
        mean, log_std = torch.split(self.proj(x) * mask, self.out_channels, dim=1)
        return x, mean, log_std, mask
