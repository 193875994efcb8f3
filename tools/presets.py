"""Voice presets for random-weight bundles: which speakers and styles, and the SBV2 config of each.

``full`` has the production JP-Extra architecture (SBV2's ``configs/config_jp_extra.json``).
``tiny`` keeps that architecture, the 44.1 kHz rate and the 512-sample hop (the upsampling
rates are unchanged) but shrinks widths and depths so that a two-speaker bundle stays a few MB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAMPLING_RATE = 44100
HOP_LENGTH = 512
FILTER_LENGTH = 2048  # the STFT's: the posterior encoder reads FILTER_LENGTH // 2 + 1 bins
SBV2_VERSION = "2.7.0-JP-Extra"  # the config format these files follow

JP_EXTRA_MODEL: dict[str, Any] = {
    "use_spk_conditioned_encoder": True,
    "use_noise_scaled_mas": True,
    "use_mel_posterior_encoder": False,
    "use_duration_discriminator": False,
    "use_wavlm_discriminator": True,
    "inter_channels": 192,
    "hidden_channels": 192,
    "filter_channels": 768,
    "n_heads": 2,
    "n_layers": 6,
    "kernel_size": 3,
    "p_dropout": 0.1,
    "resblock": "1",
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "upsample_rates": [8, 8, 2, 2, 2],
    "upsample_initial_channel": 512,
    "upsample_kernel_sizes": [16, 16, 8, 2, 2],
    "n_layers_q": 3,
    "use_spectral_norm": False,
    "gin_channels": 512,
}

TINY_MODEL: dict[str, Any] = {
    **JP_EXTRA_MODEL,
    "inter_channels": 16,
    "hidden_channels": 16,
    "filter_channels": 32,
    "n_layers": 3,  # the speaker embedding joins at layer 2, so 3 is the least
    "upsample_initial_channel": 32,
    "gin_channels": 16,
    # A default of SBV2's constructor (6), written out because tiny differs from it.
    "n_layers_trans_flow": 3,
    # Yomiage extension (SBV2 hard-codes 256): the deterministic duration predictor's width.
    "dp_filter_channels": 16,
}


@dataclass(frozen=True)
class VoicePreset:
    name: str
    speakers: tuple[str, ...]
    styles: tuple[str, ...]  # the first is Neutral, stored as the mean of the others
    model: dict[str, Any]

    def sbv2_config(
        self, name: str, bert_dim: int, speakers: tuple[str, ...] | None = None
    ) -> dict[str, Any]:
        """The ``config.json`` of SBV2 model folder ``name``, whose speakers are ``speakers``
        (default: one, ``name``) in ``spk2id`` order."""
        speakers = speakers or (name,)
        model = dict(self.model)
        if bert_dim != 1024:
            model["bert_dim"] = bert_dim  # Yomiage extension (SBV2 hard-codes 1024)
        return {
            "model_name": name,
            "data": {
                "use_jp_extra": True,
                "max_wav_value": 32768.0,
                "sampling_rate": SAMPLING_RATE,
                "filter_length": FILTER_LENGTH,
                "hop_length": HOP_LENGTH,
                "win_length": 2048,
                "n_mel_channels": 128,
                "mel_fmin": 0.0,
                "mel_fmax": None,
                "add_blank": True,
                "n_speakers": len(speakers),
                "cleaned_text": True,
                "spk2id": {speaker: sid for sid, speaker in enumerate(speakers)},
                # SBV2's TTSModel refuses a num_styles (default 1) other than len(style2id).
                "num_styles": len(self.styles),
                "style2id": {style: row for row, style in enumerate(self.styles)},
            },
            "model": model,
            "version": SBV2_VERSION,
        }


PRESETS = {
    "tiny": VoicePreset("tiny", ("tiny-a", "tiny-b"), ("Neutral", "Happy", "Sad"), TINY_MODEL),
    "full": VoicePreset("full", ("full-a",), ("Neutral", "Happy", "Sad"), JP_EXTRA_MODEL),
}
