"""The SBV2 JP-Extra generator (``SynthesizerTrn``), inference only.

Submodule names (enc_p, dec, flow, sdp, dp, emb_g) are SBV2's, so a checkpoint's state dict maps
onto this module key for key. The posterior encoder (enc_q) and the duration predictor's posterior
flows exist only for training and are not built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .config import NetConfig
from .duration import DurationPredictor, StochasticDurationPredictor
from .flows import TransformerCouplingBlock
from .generator import Generator
from .masks import alignment_path, sequence_mask
from .text_encoder import TextEncoder

Scalar = torch.Tensor | float  # the exported graphs feed float32 [1] (or 0-d) tensors
Tensors4 = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
SBV2Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, Tensors4]


@dataclass
class EncodedText:
    hidden: torch.Tensor  # [B, hidden, T]
    prior_mean: torch.Tensor  # [B, inter, T]
    prior_log_std: torch.Tensor  # [B, inter, T]
    mask: torch.Tensor  # [B, 1, T]
    speaker: torch.Tensor  # [B, gin, 1]


@dataclass
class Decoded:
    """The audio and the tensors on its way, in SBV2's ``infer`` order (its names in brackets)."""

    audio: torch.Tensor  # [B, 1, S] (o)
    path: torch.Tensor  # the alignment [B, 1, T_frames, T_phones] (attn)
    frame_mask: torch.Tensor  # [B, 1, T_frames] (y_mask)
    z: torch.Tensor  # the flow's output [B, inter, T_frames]
    z_p: torch.Tensor  # the prior sample it inverts
    mean: torch.Tensor  # the prior expanded to frames (m_p)
    log_std: torch.Tensor  # (logs_p)

    def as_sbv2(self) -> SBV2Outputs:
        """SBV2's return structure: ``(o, attn, y_mask, (z, z_p, m_p, logs_p))``."""
        return self.audio, self.path, self.frame_mask, (self.z, self.z_p, self.mean, self.log_std)


class SynthesizerTrn(nn.Module):
    def __init__(self, net: NetConfig) -> None:
        super().__init__()
        self.net = net
        self.enc_p = TextEncoder(
            net.inter_channels,
            net.hidden_channels,
            net.filter_channels,
            net.n_heads,
            net.n_layers,
            net.kernel_size,
            net.gin_channels,
            net.bert_dim,
        )
        self.dec = Generator(
            net.inter_channels,
            net.resblock,
            net.resblock_kernel_sizes,
            net.resblock_dilation_sizes,
            net.upsample_rates,
            net.upsample_initial_channel,
            net.upsample_kernel_sizes,
            net.gin_channels,
        )
        self.flow = TransformerCouplingBlock(
            net.inter_channels,
            net.hidden_channels,
            net.filter_channels,
            net.n_heads,
            net.n_layers_trans_flow,
            net.n_flow_layer,
            net.gin_channels,
        )
        self.sdp = StochasticDurationPredictor(net.hidden_channels, 3, net.gin_channels)
        self.dp = DurationPredictor(
            net.hidden_channels, net.dp_filter_channels, 3, net.gin_channels
        )
        self.emb_g = nn.Embedding(net.n_speakers, net.gin_channels)

    def encode(
        self,
        x: torch.Tensor,
        x_lengths: torch.Tensor,
        sid: torch.Tensor,
        tone: torch.Tensor,
        language: torch.Tensor,
        bert: torch.Tensor,
        style_vec: torch.Tensor,
    ) -> EncodedText:
        """Phone ids, tones, languages [B, T]; lengths, sid [B]; bert [B, D, T]; style [B, 256]."""
        speaker = self.emb_g(sid).unsqueeze(-1)
        hidden, mean, log_std, mask = self.enc_p(
            x, x_lengths, tone, language, bert, style_vec, speaker
        )
        return EncodedText(hidden, mean, log_std, mask, speaker)

    def log_durations(
        self, text: EncodedText, sdp_ratio: Scalar, noise_scale_w: Scalar
    ) -> torch.Tensor:
        """Blend of the stochastic and deterministic predictors: log frames per phone [B, 1, T]."""
        noise = torch.as_tensor(noise_scale_w, dtype=text.hidden.dtype)
        stochastic = self.sdp(text.hidden, text.mask, text.speaker, noise)
        deterministic = self.dp(text.hidden, text.mask, text.speaker)
        return stochastic * sdp_ratio + deterministic * (1 - sdp_ratio)

    def frames(
        self, text: EncodedText, length_scale: Scalar, sdp_ratio: Scalar, noise_scale_w: Scalar
    ) -> torch.Tensor:
        """Whole frames per phone [B, 1, T] (ceil'ed, 0 on padding)."""
        log_w = self.log_durations(text, sdp_ratio, noise_scale_w)
        return torch.ceil(torch.exp(log_w) * text.mask * length_scale)

    def decode(self, text: EncodedText, frames: torch.Tensor, noise_scale: Scalar) -> torch.Tensor:
        """Expand the prior along the durations, sample it, invert the flow, vocode: [B, 1, S]."""
        return self.decode_with_latents(text, frames, noise_scale).audio

    def decode_with_latents(
        self, text: EncodedText, frames: torch.Tensor, noise_scale: Scalar
    ) -> Decoded:
        """``decode`` with what it computes on the way (the tensors SBV2's ``infer`` returns)."""
        n_frames = torch.clamp_min(torch.sum(frames, [1, 2]), 1).long()
        frame_mask = sequence_mask(n_frames, n_frames.max()).unsqueeze(1).to(frames.dtype)
        path_mask = text.mask.unsqueeze(2) * frame_mask.unsqueeze(-1)
        path = alignment_path(frames, path_mask)
        aligned = path.squeeze(1)  # [B, T_frames, T_phones]
        mean = (aligned @ text.prior_mean.transpose(1, 2)).transpose(1, 2)
        log_std = (aligned @ text.prior_log_std.transpose(1, 2)).transpose(1, 2)
        z_p = mean + torch.randn_like(mean) * torch.exp(log_std) * noise_scale
        z = self.flow(z_p, frame_mask, text.speaker)
        audio = self.dec(z * frame_mask, text.speaker)
        return Decoded(audio, path, frame_mask, z, z_p, mean, log_std)

    def infer(
        self,
        x: torch.Tensor,
        x_lengths: torch.Tensor,
        sid: torch.Tensor,
        tone: torch.Tensor,
        language: torch.Tensor,
        bert: torch.Tensor,
        style_vec: torch.Tensor,
        noise_scale: Scalar = 0.667,
        length_scale: Scalar = 1.0,
        noise_scale_w: Scalar = 0.8,
        sdp_ratio: Scalar = 0.0,
        with_frames: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Audio [B, 1, S] in [-1, 1]; ``length_scale`` multiplies durations (> 1 is slower).
        ``with_frames``: (audio, frames per phone [B, T]), as hayakoe's current exporter gives."""
        text = self.encode(x, x_lengths, sid, tone, language, bert, style_vec)
        frames = self.frames(text, length_scale, sdp_ratio, noise_scale_w)
        audio = self.decode(text, frames, noise_scale)
        return (audio, frames.squeeze(1)) if with_frames else audio

    def infer_with_latents(
        self,
        x: torch.Tensor,
        x_lengths: torch.Tensor,
        sid: torch.Tensor,
        tone: torch.Tensor,
        language: torch.Tensor,
        bert: torch.Tensor,
        style_vec: torch.Tensor,
        noise_scale: Scalar = 0.667,
        length_scale: Scalar = 1.0,
        noise_scale_w: Scalar = 0.8,
        sdp_ratio: Scalar = 0.0,
    ) -> SBV2Outputs:
        """``infer``'s audio with what SBV2's ``infer`` returns beside it (``Decoded.as_sbv2``):
        Style-Bert-VITS2's converter exports all of it."""
        text = self.encode(x, x_lengths, sid, tone, language, bert, style_vec)
        frames = self.frames(text, length_scale, sdp_ratio, noise_scale_w)
        return self.decode_with_latents(text, frames, noise_scale).as_sbv2()

    # An exporter traces the module's call: its nodes then sit in the scope of the attribute
    # that holds it (``/net_g/dec/...`` for hayakoe's wrapper).
    forward = infer

    def predict_durations(
        self,
        x: torch.Tensor,
        x_lengths: torch.Tensor,
        sid: torch.Tensor,
        tone: torch.Tensor,
        language: torch.Tensor,
        bert: torch.Tensor,
        style_vec: torch.Tensor,
        length_scale: Scalar = 1.0,
        noise_scale_w: Scalar = 0.8,
        sdp_ratio: Scalar = 0.0,
    ) -> torch.Tensor:
        """Frames per phone [B, T] as ``infer`` would use them (text encoder + predictors only)."""
        text = self.encode(x, x_lengths, sid, tone, language, bert, style_vec)
        return self.frames(text, length_scale, sdp_ratio, noise_scale_w).squeeze(1)
