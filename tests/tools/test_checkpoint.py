"""Checkpoint files: SBV2's storage conventions in, the same weights out, clear errors otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tools.model import ModelFileError, SynthesizerTrn, load_model, read_state_dict, save_checkpoint
from tools.model.checkpoint import fold_weight_norm, load_weights, unfold_weight_norm
from tools.random_voice import RandomVoice


@pytest.fixture(scope="module")
def voice(tiny_voices: dict[str, RandomVoice]) -> RandomVoice:
    return tiny_voices["tiny-b"]


def test_saved_like_sbv2_and_loaded_back(voice: RandomVoice, tmp_path: Path) -> None:
    path = tmp_path / "G_0.safetensors"
    save_checkpoint(voice.model, path, iteration=1234)
    stored = read_state_dict(path)
    assert int(stored["iteration"]) == 1234
    assert "dec.ups.0.weight_g" in stored and "dec.ups.0.weight_v" in stored
    assert "dec.resblocks.4.convs2.1.weight_v" in stored and "dec.ups.0.weight" not in stored
    assert "dec.conv_post.weight" in stored  # not weight-normalised in SBV2
    assert stored["dec.ups.0.weight_g"].shape == (32, 1, 1)  # ConvTranspose: norm per input channel

    loaded = load_model(voice.config, path)
    for name, tensor in voice.model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, rtol=1e-6, atol=1e-7)


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
