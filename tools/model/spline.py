"""Monotonic rational-quadratic spline with linear tails (Durkan et al., 2019), inverse direction.

Inference only runs the stochastic duration predictor's flows in reverse, so only the inverse is
needed. Written without boolean indexing or in-place writes: every element goes through the spline
with its input clamped into the interval, and elements outside keep their value (identity tails),
which traces into one static ONNX graph.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

MIN_BIN_WIDTH = 1e-3
MIN_BIN_HEIGHT = 1e-3
MIN_DERIVATIVE = 1e-3


def inverse_spline(
    y: torch.Tensor,
    widths: torch.Tensor,
    heights: torch.Tensor,
    derivatives: torch.Tensor,
    tail_bound: float,
) -> torch.Tensor:
    """x such that spline(x) = y. y [...]; widths, heights [..., K]; derivatives [..., K-1].

    The parameters are unnormalised (softmax / softplus applied here); the boundary derivatives
    are fixed to 1 so the spline joins the identity tails smoothly.
    """
    knots_x, bin_widths = _knots(widths, MIN_BIN_WIDTH, tail_bound)
    knots_y, bin_heights = _knots(heights, MIN_BIN_HEIGHT, tail_bound)
    slopes = _knot_derivatives(derivatives)

    inside = (y >= -tail_bound) & (y <= tail_bound)
    y_in = y.clamp(-tail_bound, tail_bound)
    bin_index = _bin_of(knots_y, y_in)

    def pick(values: torch.Tensor) -> torch.Tensor:
        return values.gather(-1, bin_index).squeeze(-1)

    x_low, width = pick(knots_x), pick(bin_widths)
    y_low, height = pick(knots_y), pick(bin_heights)
    slope_low, slope_high = pick(slopes), pick(slopes[..., 1:])
    secant = height / width

    # Solve a*t^2 + b*t + c = 0 for the position t in [0, 1] inside the bin.
    offset = y_in - y_low
    curvature = slope_low + slope_high - 2 * secant
    a = offset * curvature + height * (secant - slope_low)
    b = height * slope_low - offset * curvature
    c = -secant * offset
    discriminant = (b * b - 4 * a * c).clamp_min(0.0)
    t = (2 * c) / (-b - torch.sqrt(discriminant))
    return torch.where(inside, t * width + x_low, y)


def _knots(unnormalised: torch.Tensor, min_size: float, bound: float) -> tuple[torch.Tensor, ...]:
    """Knot positions [..., K+1] spanning [-bound, bound] exactly, and bin sizes [..., K]."""
    n_bins = unnormalised.shape[-1]
    sizes = min_size + (1 - min_size * n_bins) * F.softmax(unnormalised, dim=-1)
    inner = (2 * bound) * torch.cumsum(sizes, dim=-1)[..., :-1] - bound
    low = torch.full_like(inner[..., :1], -bound)
    high = torch.full_like(inner[..., :1], bound)
    knots = torch.cat([low, inner, high], dim=-1)
    return knots, knots[..., 1:] - knots[..., :-1]


def _knot_derivatives(unnormalised: torch.Tensor) -> torch.Tensor:
    """Derivatives at all K+1 knots; the two outer ones equal 1 (softplus of this constant)."""
    edge = math.log(math.expm1(1 - MIN_DERIVATIVE))
    edge_column = torch.full_like(unnormalised[..., :1], edge)
    padded = torch.cat([edge_column, unnormalised, edge_column], dim=-1)
    return MIN_DERIVATIVE + F.softplus(padded)


def _bin_of(knots: torch.Tensor, values: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Index [..., 1] of the bin holding each value; the top knot is nudged up so it counts."""
    nudge = torch.zeros_like(knots)
    nudge = torch.cat([nudge[..., :-1], nudge[..., -1:] + eps], dim=-1)
    return (torch.sum(values.unsqueeze(-1) >= knots + nudge, dim=-1) - 1).unsqueeze(-1)
