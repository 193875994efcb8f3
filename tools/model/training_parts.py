"""The parts of SBV2's JP-Extra generator that only training runs, as parameter holders.

SBV2's checkpoints carry them (its inference safetensors the duration predictor's posterior
``sdp.post_*``; its training checkpoints the posterior encoder ``enc_q`` too), so files written
like SBV2's hold them. Inference never reads them (checkpoint.IGNORED_PREFIXES), so these modules
have no forward: they give SBV2's names and shapes (models_jp_extra.py, modules.py) and nothing
else.
"""

from __future__ import annotations

from torch import nn

from .config import NetConfig
from .flows import ConvFlow, ElementwiseAffine, Flip
from .layers import DilatedSeparableConvs

# SBV2's fixed sizes: the posterior encoder's WaveNet (kernel 5, dilation rate 1, 16 layers)
# and the stochastic duration predictor's kernel and posterior flow count.
POSTERIOR_KERNEL = 5
POSTERIOR_LAYERS = 16
SDP_KERNEL = 3
SDP_POSTERIOR_FLOWS = 4


class WaveNetWeights(nn.Module):
    """SBV2's ``WN`` (gated dilated convolutions, every layer weight-normalised in SBV2)."""

    def __init__(self, hidden: int, kernel_size: int, n_layers: int, gin_channels: int) -> None:
        super().__init__()
        self.in_layers = nn.ModuleList(
            nn.Conv1d(hidden, 2 * hidden, kernel_size) for _ in range(n_layers)
        )
        # The last layer feeds only the skip sum, hence half the channels.
        self.res_skip_layers = nn.ModuleList(
            nn.Conv1d(hidden, 2 * hidden if i < n_layers - 1 else hidden, 1)
            for i in range(n_layers)
        )
        self.cond_layer = nn.Conv1d(gin_channels, 2 * hidden * n_layers, 1)


class PosteriorEncoderWeights(nn.Module):
    """``enc_q``: linear spectrogram [spec_channels] -> the latent's mean and log-std."""

    def __init__(self, net: NetConfig, spec_channels: int) -> None:
        super().__init__()
        hidden = net.hidden_channels
        self.pre = nn.Conv1d(spec_channels, hidden, 1)
        self.enc = WaveNetWeights(hidden, POSTERIOR_KERNEL, POSTERIOR_LAYERS, net.gin_channels)
        self.proj = nn.Conv1d(hidden, 2 * net.inter_channels, 1)


class DurationPosteriorWeights(nn.Module):
    """The ``post_*`` modules of SBV2's stochastic duration predictor (its width is hidden's)."""

    def __init__(self, net: NetConfig) -> None:
        super().__init__()
        channels = net.hidden_channels
        self.post_pre = nn.Conv1d(1, channels, 1)
        self.post_proj = nn.Conv1d(channels, channels, 1)
        self.post_convs = DilatedSeparableConvs(channels, SDP_KERNEL, n_layers=3)
        self.post_flows = nn.ModuleList([ElementwiseAffine(2)])
        for _ in range(SDP_POSTERIOR_FLOWS):
            self.post_flows.append(ConvFlow(2, channels, SDP_KERNEL, n_layers=3))
            self.post_flows.append(Flip())


class TrainingParts(nn.Module):
    """Both, under the generator's attribute names: state-dict keys ``enc_q.*`` and
    ``sdp.post_*``, as in SBV2's ``SynthesizerTrn``."""

    def __init__(self, net: NetConfig, spec_channels: int) -> None:
        super().__init__()
        self.enc_q = PosteriorEncoderWeights(net, spec_channels)
        self.sdp = DurationPosteriorWeights(net)
