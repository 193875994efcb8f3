"""Checkpoint files: SBV2's storage conventions in, the same weights out, clear errors otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from tools.model import ModelFileError, SynthesizerTrn, load_model, read_state_dict, save_checkpoint
from tools.model.checkpoint import fold_weight_norm, load_weights, unfold_weight_norm
from tools.random_voice import SPEC_CHANNELS, RandomVoice


@pytest.fixture(scope="module")
def voice(tiny_voices: dict[str, RandomVoice]) -> RandomVoice:
    return tiny_voices["tiny-b"]


def assert_same_model(loaded: SynthesizerTrn, voice: RandomVoice) -> None:
    assert loaded.state_dict().keys() == voice.model.state_dict().keys()
    for name, tensor in voice.model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, rtol=1e-6, atol=1e-7)


def test_saved_like_sbv2_and_loaded_back(voice: RandomVoice, tmp_path: Path) -> None:
    """The model_assets file SBV2's training writes (save_safetensors, for_infer): weight-norm
    pairs, the SDP's posterior flows, an int64 [1] iteration, no posterior encoder."""
    path = tmp_path / "G_0.safetensors"
    save_checkpoint(voice.model, path, voice.training, iteration=1234)
    stored = read_state_dict(path)
    assert stored["iteration"].dtype == torch.int64 and stored["iteration"].tolist() == [1234]
    assert "dec.ups.0.weight_g" in stored and "dec.ups.0.weight_v" in stored
    assert "dec.resblocks.4.convs2.1.weight_v" in stored and "dec.ups.0.weight" not in stored
    assert "dec.conv_post.weight" in stored  # not weight-normalised in SBV2
    assert stored["dec.ups.0.weight_g"].shape == (32, 1, 1)  # ConvTranspose: norm per input channel
    assert not [key for key in stored if key.startswith("enc_q.")]
    assert "sdp.post_flows.7.proj.weight" in stored
    assert_same_model(load_model(voice.config, path), voice)


def test_a_training_checkpoint_holds_sbv2s_training_parts(
    voice: RandomVoice, tmp_path: Path
) -> None:
    """Without for_infer the posterior encoder is written too, in SBV2's shapes (WN of 16
    layers, kernel 5, weight-normalised), and the file loads as the same model."""
    path = tmp_path / "G_100.safetensors"
    save_checkpoint(voice.model, path, voice.training, for_infer=False)
    stored = read_state_dict(path)
    hidden, inter, gin = 16, 16, 16  # the tiny preset's widths
    shapes = {key: tuple(tensor.shape) for key, tensor in stored.items()}
    assert shapes["enc_q.pre.weight"] == (hidden, SPEC_CHANNELS, 1) == (16, 1025, 1)
    assert shapes["enc_q.enc.in_layers.0.weight_v"] == (2 * hidden, hidden, 5)
    assert shapes["enc_q.enc.in_layers.15.weight_g"] == (2 * hidden, 1, 1)
    assert shapes["enc_q.enc.res_skip_layers.0.weight_v"] == (2 * hidden, hidden, 1)
    assert shapes["enc_q.enc.res_skip_layers.15.weight_v"] == (hidden, hidden, 1)  # the last
    assert shapes["enc_q.enc.cond_layer.weight_v"] == (2 * hidden * 16, gin, 1)
    assert shapes["enc_q.proj.weight"] == (2 * inter, hidden, 1)
    assert "enc_q.enc.in_layers.16.weight_v" not in shapes
    assert not [k for k in shapes if k.startswith("enc_q.enc.") and k.endswith(".weight")]
    # The posterior flows are built as the generating ones; only their input differs (1 channel).
    own = {k: v for k, v in shapes.items() if k.startswith("sdp.") and ".post_" not in k}
    posterior = {k.replace("post_", ""): v for k, v in shapes.items() if k.startswith("sdp.post_")}
    assert posterior.pop("sdp.pre.weight") == (hidden, 1, 1)
    assert posterior == {k: v for k, v in own.items() if k in posterior}
    assert set(own) - set(posterior) == {"sdp.pre.weight", "sdp.cond.weight", "sdp.cond.bias"}
    assert_same_model(load_model(voice.config, path), voice)


def test_the_model_folder_is_what_sbv2s_loader_accepts(voice: RandomVoice, tmp_path: Path) -> None:
    """SBV2's TTSModel needs num_styles == len(style2id) == rows of the style vectors, and its
    generator is built with n_speakers rows of speakers (the spk2id ids)."""
    folder = voice.write_model_folder(tmp_path / "tiny-b")
    data = json.loads((folder / "config.json").read_text(encoding="utf-8"))["data"]
    assert data["num_styles"] == len(data["style2id"]) == len(np.load(folder / "style_vectors.npy"))
    assert data["n_speakers"] == len(data["spk2id"]) and data["spk2id"] == {"tiny-b": 0}
    assert_same_model(load_model(folder / "config.json", folder / "tiny-b.safetensors"), voice)


def test_fold_inverts_unfold(voice: RandomVoice) -> None:
    state = voice.model.state_dict()
    folded = fold_weight_norm(unfold_weight_norm(state))
    assert folded.keys() == state.keys()
    for name, tensor in state.items():
        torch.testing.assert_close(folded[name], tensor, rtol=1e-6, atol=1e-7)


def test_training_only_tensors_and_ddp_prefix_are_accepted(voice: RandomVoice) -> None:
    state = {f"module.{k}": v for k, v in voice.model.state_dict().items()}
    state["module.enc_q.pre.weight"] = torch.zeros(16, 1025, 1)  # posterior encoder
    state["module.sdp.post_pre.weight"] = torch.zeros(16, 1, 1)  # the SDP's posterior flows
    model = SynthesizerTrn(voice.config.net)
    load_weights(model, state, "G_ddp.pth")
    assert torch.equal(model.dp.proj.bias, voice.model.dp.proj.bias)


def test_unknown_or_missing_tensors_are_reported(voice: RandomVoice) -> None:
    state = dict(voice.model.state_dict())
    del state["flow.flows.2.post.weight"]
    state["dec.extra.weight"] = torch.zeros(1)
    with pytest.raises(ModelFileError) as caught:
        load_weights(SynthesizerTrn(voice.config.net), state, "G_0.safetensors")
    message = str(caught.value)
    assert message.startswith("G_0.safetensors: does not match config.json")
    assert "1 missing tensors (e.g. flow.flows.2.post.weight)" in message
    assert "1 unexpected tensors (e.g. dec.extra.weight)" in message


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("model.bin", b"\x00" * 16, "unknown checkpoint format"),
        ("G_0.safetensors", b"\xff" * 64, "not a readable safetensors file"),
        ("G_0.pth", b"not a zip file", "not a readable torch checkpoint"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=message) as caught:
        read_state_dict(path)
    assert str(caught.value).startswith(str(path))
    with pytest.raises(ModelFileError, match="file is missing"):
        read_state_dict(tmp_path / "absent.safetensors")


def test_half_precision_checkpoints_load_as_float32(voice: RandomVoice, tmp_path: Path) -> None:
    path = tmp_path / "half.safetensors"
    save_file({k: v.half().contiguous() for k, v in voice.model.state_dict().items()}, str(path))
    model = load_model(voice.config, path)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    torch.testing.assert_close(model.dp.proj.bias, voice.model.dp.proj.bias, rtol=1e-3, atol=1e-3)
