"""Our reference model computes what SBV2's own JP-Extra code computes, from the same checkpoint.

``data/sbv2_golden`` holds a small random JP-Extra checkpoint stored the way SBV2 stores them (fp16,
``weight_g``/``weight_v`` pairs, posterior-encoder-free, an ``iteration`` entry) with the outputs
SBV2's code produced for fixed inputs (see make_golden.py there). The noisy setting also checks
that random numbers are drawn in SBV2's order and shapes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import session
from safetensors.torch import load_file, save_file

from tools.export import DURATION_INPUTS, SYNTHESIZER_INPUTS, export_speaker
from tools.model import SynthesizerTrn, load_config, load_model

GOLDEN = Path(__file__).parent / "data" / "sbv2_golden"
SETTINGS = {  # as in make_golden.py: noise_scale, noise_scale_w, sdp_ratio, length_scale, seed
    "quiet": (0.0, 0.0, 0.5, 1.0, 0),
    "noisy": (0.667, 0.8, 0.2, 1.1, 3),
}


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "golden.npz") as data:
        return dict(data)


def inputs(golden: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {
        k.removeprefix("input_"): torch.from_numpy(v)
        for k, v in golden.items()
        if k.startswith("input_")
    }


def run(
    model: SynthesizerTrn, golden: dict[str, np.ndarray], setting: str
) -> tuple[np.ndarray, np.ndarray]:
    noise, noise_w, ratio, length, seed = SETTINGS[setting]
    kwargs = {"noise_scale_w": noise_w, "sdp_ratio": ratio, "length_scale": length}
    with torch.no_grad():
        torch.manual_seed(seed)
        audio = model.infer(**inputs(golden), noise_scale=noise, **kwargs)
        torch.manual_seed(seed)
        durations = model.predict_durations(**inputs(golden), **kwargs)
    return audio.numpy(), durations.numpy().reshape(-1)  # SBV2 returns durations unbatched


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_same_audio_and_durations_as_sbv2(golden: dict[str, np.ndarray], setting: str) -> None:
    model = load_model(GOLDEN / "config.json", GOLDEN / "G_0.safetensors")
    audio, durations = run(model, golden, setting)
    np.testing.assert_array_equal(durations, golden[f"{setting}_durations"])
    assert audio.shape == golden[f"{setting}_audio"].shape
    np.testing.assert_allclose(audio, golden[f"{setting}_audio"], atol=1e-5, rtol=0)
    assert np.abs(audio).std() > 1e-3  # a real signal, not silence that matches trivially


def test_newer_weight_norm_names_and_pth_files_load_the_same(
    golden: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """torch's parametrized weight norm names (original0/1) and a {"model": sd} .pth file."""
    state = load_file(GOLDEN / "G_0.safetensors")
    renamed = {
        k.replace("weight_g", "parametrizations.weight.original0").replace(
            "weight_v", "parametrizations.weight.original1"
        ): v
        for k, v in state.items()
    }
    save_file(renamed, str(tmp_path / "renamed.safetensors"))
    torch.save({"model": state, "iteration": 0}, tmp_path / "G_0.pth")
    for checkpoint in ("renamed.safetensors", "G_0.pth"):
        model = load_model(GOLDEN / "config.json", tmp_path / checkpoint)
        audio, durations = run(model, golden, "quiet")
        np.testing.assert_allclose(audio, golden["quiet_audio"], atol=1e-5, rtol=0)
        np.testing.assert_array_equal(durations, golden["quiet_durations"])


def test_exported_graphs_reproduce_sbv2(golden: dict[str, np.ndarray], tmp_path: Path) -> None:
    model_dir = tmp_path / "golden-voice"
    model_dir.mkdir()
    shutil.copy(GOLDEN / "config.json", model_dir)
    shutil.copy(GOLDEN / "G_0.safetensors", model_dir)
    styles = len(load_config(GOLDEN / "config.json").style2id)
    np.save(model_dir / "style_vectors.npy", np.zeros((styles, 256), np.float32))
    folder = export_speaker(model_dir, tmp_path / "bundle", progress=False)

    noise, noise_w, ratio, length, _ = SETTINGS["quiet"]
    scalars = {
        "noise_scale": noise,
        "noise_scale_w": noise_w,
        "sdp_ratio": ratio,
        "length_scale": length,
    }
    feeds = {k: v.numpy() for k, v in inputs(golden).items()}
    feeds |= {k: np.array([v], np.float32) for k, v in scalars.items()}
    synthesizer = session(folder / "synthesizer.onnx")
    durations = session(folder / "duration_predictor.onnx")
    (audio,) = synthesizer.run(["audio"], {k: feeds[k] for k in SYNTHESIZER_INPUTS})
    (frames,) = durations.run(["durations"], {k: feeds[k] for k in DURATION_INPUTS})
    np.testing.assert_allclose(audio, golden["quiet_audio"], atol=1e-4, rtol=0)
    np.testing.assert_array_equal(frames.reshape(-1), golden["quiet_durations"])
