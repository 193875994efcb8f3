"""Regenerate the SBV2 conformance data in this folder (a developer step, not run by the tests).

The published PyTorch JP-Extra model (hayakoe 1.3.1's copy of Style-Bert-VITS2's code, AGPL) is
imported only as an oracle: it builds a small random model, and its outputs for fixed inputs are
stored. Nothing of it is copied into the project; ``test_sbv2_conformance.py`` checks that our
reference model, loading the stored checkpoint, computes the same.

    .venv-tools/bin/python tests/tools/data/sbv2_golden/make_golden.py /tmp/peer/hk/hayakoe

Stored: ``config.json`` (SBV2 format; ``bert_dim``/``dp_filter_channels`` are our extensions for
the two widths SBV2 hard-codes, shrunk here to keep the files small), ``G_0.safetensors`` (fp16,
weight-norm layers as ``weight_g``/``weight_v`` like SBV2's training checkpoints) and
``golden.npz`` (inputs and, per setting, audio and durations).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

HERE = Path(__file__).parent
MODEL = {
    "inter_channels": 8,
    "hidden_channels": 8,
    "filter_channels": 16,
    "n_heads": 2,
    "n_layers": 3,
    "kernel_size": 3,
    "p_dropout": 0.1,
    "resblock": "1",
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "upsample_rates": [8, 8, 2, 2, 2],
    "upsample_initial_channel": 32,
    "upsample_kernel_sizes": [16, 16, 8, 2, 2],
    "gin_channels": 8,
    "n_layers_trans_flow": 3,
    "bert_dim": 24,
    "dp_filter_channels": 12,
}
N_SPEAKERS = 2
SETTINGS = {  # name: (noise_scale, noise_scale_w, sdp_ratio, length_scale, torch seed)
    "quiet": (0.0, 0.0, 0.5, 1.0, 0),
    "noisy": (0.667, 0.8, 0.2, 1.1, 3),
}


def import_oracle(package_dir: Path) -> types.ModuleType:
    """hayakoe.models.models_jp_extra without running the package's __init__ (it needs the API)."""
    for name in ("hayakoe", "hayakoe.models", "hayakoe.nlp"):
        module = types.ModuleType(name)
        module.__path__ = [str(package_dir.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = module
    sys.modules["hayakoe.models.monotonic_alignment"] = types.ModuleType("unused_in_inference")

    def load(name: str) -> types.ModuleType:
        path = package_dir / (name.removeprefix("hayakoe.").replace(".", "/") + ".py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    load("hayakoe.nlp.symbols")
    for name in ("commons", "transforms", "attentions", "modules"):
        setattr(sys.modules["hayakoe.models"], name, load(f"hayakoe.models.{name}"))
    models = sys.modules["hayakoe.models"]
    models.monotonic_alignment = sys.modules["hayakoe.models.monotonic_alignment"]
    return load("hayakoe.models.models_jp_extra")


def build_oracle(oracle: types.ModuleType) -> torch.nn.Module:
    original_dp = oracle.DurationPredictor
    oracle.DurationPredictor = lambda c, _f, k, p, gin_channels: original_dp(
        c, MODEL["dp_filter_channels"], k, p, gin_channels=gin_channels
    )
    arch = {k: v for k, v in MODEL.items() if k not in ("bert_dim", "dp_filter_channels")}
    torch.manual_seed(0)
    model = oracle.SynthesizerTrn(112, 1025, 32, n_speakers=N_SPEAKERS, **arch)
    model.enc_p.bert_proj = torch.nn.Conv1d(MODEL["bert_dim"], MODEL["hidden_channels"], 1)
    with torch.no_grad():  # every parameter non-trivial (SBV2 zero-inits some for training)
        for name, param in model.named_parameters():
            fan_in = param[0].numel() if param.dim() > 1 else 1
            param.normal_(0.0, 0.6 / fan_in**0.5 if param.dim() > 1 else 0.05)
            if name.endswith("gamma"):
                param.add_(1.0)
        model.dp.proj.bias.fill_(1.0)
        model.dec.conv_post.weight.mul_(4.0)
    return model.eval().half().float()  # fp16-representable weights: the file is stored in fp16


def sbv2_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Inference keys (no enc_q) with weight norm stored as weight_g/weight_v, in fp16."""
    state = {}
    for key, tensor in model.state_dict().items():
        if key.startswith("enc_q."):
            continue
        name = key.replace("parametrizations.weight.original0", "weight_g")
        name = name.replace("parametrizations.weight.original1", "weight_v")
        state[name] = tensor.half().contiguous()
    state["iteration"] = torch.tensor([0])
    return state


def inputs(n_phones: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(n_phones)
    phones = torch.randint(1, 112, (1, n_phones), generator=generator)
    phones[:, ::2] = 0
    return {
        "x": phones,
        "x_lengths": torch.tensor([n_phones]),
        "sid": torch.tensor([1]),
        "tone": torch.randint(6, 8, (1, n_phones), generator=generator),
        "language": torch.ones(1, n_phones, dtype=torch.long),
        "bert": torch.randn(1, MODEL["bert_dim"], n_phones, generator=generator),
        "style_vec": torch.randn(1, 256, generator=generator),
    }


def main() -> None:
    torch.set_flush_denormal(True)
    oracle = import_oracle(Path(sys.argv[1]))
    model = build_oracle(oracle)
    config = {
        "model_name": "sbv2-golden",
        "data": {
            "sampling_rate": 44100,
            "hop_length": 512,
            "add_blank": True,
            "n_speakers": N_SPEAKERS,
            "spk2id": {"a": 0, "b": 1},
            "style2id": {"Neutral": 0},
        },
        "model": MODEL,
        "version": "2.7.0-JP-Extra",
    }
    (HERE / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(sbv2_state_dict(model), str(HERE / "G_0.safetensors"))
    golden = {}
    feeds = inputs(13)
    golden.update({f"input_{k}": v.numpy() for k, v in feeds.items()})
    for name, (noise, noise_w, ratio, length, seed) in SETTINGS.items():
        kwargs = dict(noise_scale_w=noise_w, sdp_ratio=ratio, length_scale=length)
        with torch.no_grad():
            torch.manual_seed(seed)
            audio = model.infer(**feeds, noise_scale=noise, **kwargs)[0]
            torch.manual_seed(seed)
            durations = model.predict_durations(**feeds, **kwargs)
        golden[f"{name}_audio"] = audio.numpy()
        golden[f"{name}_durations"] = durations.numpy()
        print(name, audio.shape, float(audio.std()), durations.numpy().tolist())
    np.savez_compressed(HERE / "golden.npz", **golden)


if __name__ == "__main__":
    main()
