"""Sequence masks and the monotonic alignment path built from integer durations."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def sequence_mask(lengths: torch.Tensor, max_length: torch.Tensor | int) -> torch.Tensor:
    """bool [B, T]: position t < lengths[b]. ``max_length`` may be a traced size (ONNX)."""
    positions = torch.arange(max_length, dtype=lengths.dtype, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def alignment_path(durations: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Hard alignment [B, 1, T_frames, T_phones] from integer-valued durations [B, 1, T_phones].

    Phone p owns the frames between the cumulative sums of the durations before and after it;
    ``mask`` [B, 1, T_frames, T_phones] removes padding on both axes.
    """
    batch, _, n_frames, n_phones = mask.shape
    ends = torch.cumsum(durations, -1).reshape(batch * n_phones)
    covered = sequence_mask(ends, n_frames).to(mask.dtype).reshape(batch, n_phones, n_frames)
    previous = F.pad(covered, (0, 0, 1, 0))[:, :-1]
    return (covered - previous).unsqueeze(1).transpose(2, 3) * mask
