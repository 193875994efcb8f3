"""tools.export: graph contracts, PyTorch/ONNX parity, and clear errors for bad model folders."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from conftest import REPO_ROOT, TINY_BUNDLE, session

from tools.export import (
    CONVERTER_INPUTS,
    CONVERTER_ORDER,
    DURATION_INPUTS,
    SCALAR_INPUTS,
    SYNTHESIZER_INPUTS,
    example_inputs,
    export_speaker,
    main,
)
from tools.random_voice import RandomVoice

AUDIO_TOLERANCE = 1e-4
HOP = 512

# The contract of docs/ARCHITECTURE.md: name -> (ONNX element type, shape); H is BERT's width.
TEXT_CONTRACT = {
    "x": ("int64", [1, "P"]),
    "x_lengths": ("int64", [1]),
    "sid": ("int64", [1]),
    "tone": ("int64", [1, "P"]),
    "language": ("int64", [1, "P"]),
    "bert": ("float", [1, "H", "P"]),
    "style_vec": ("float", [1, 256]),
}
SCALAR = ("float", [1])


@pytest.fixture(scope="module")
def exported(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = tmp_path_factory.mktemp("bundle")
    return export_speaker(tiny_model_dir, bundle, name="tiny-a", progress=False)


def signature(values: list[onnx.ValueInfoProto], bert_dim: int) -> list[tuple[str, str, list]]:
    rows = []
    for value in values:
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor.shape.dim]
        dims = ["H" if d == bert_dim else d for d in dims]
        dims = ["P" if d == "phones" else d for d in dims]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
        rows.append((value.name, "float" if dtype == "float32" else dtype, dims))
    return rows


def expected_signature(names: tuple[str, ...]) -> list[tuple[str, str, list]]:
    return [(name, *TEXT_CONTRACT.get(name, SCALAR)) for name in names]


@pytest.mark.parametrize("where", ["exported", "fixture-a", "fixture-b"])
def test_graphs_follow_the_contract(where: str, exported: Path) -> None:
    folder = {
        "exported": exported,
        "fixture-a": TINY_BUNDLE / "onnx/speakers/tiny-a",
        "fixture-b": TINY_BUNDLE / "onnx/speakers/tiny-b",
    }[where]
    synthesizer = onnx.load(str(folder / "synthesizer.onnx"))
    durations = onnx.load(str(folder / "duration_predictor.onnx"))
    for graph in (synthesizer, durations):
        onnx.checker.check_model(graph, full_check=True)
        assert graph.opset_import[0].version == 17
    assert signature(list(synthesizer.graph.input), 32) == expected_signature(SYNTHESIZER_INPUTS)
    assert signature(list(durations.graph.input), 32) == expected_signature(DURATION_INPUTS)
    assert signature(list(synthesizer.graph.output), 32) == [("audio", "float", [1, 1, "samples"])]
    assert signature(list(durations.graph.output), 32) == [("durations", "float", [1, "P"])]


def test_every_graph_of_the_fixture_passes_the_checker() -> None:
    graphs = sorted(TINY_BUNDLE.rglob("*.onnx"))
    assert len(graphs) == 5  # BERT Q8 + two graphs per speaker
    for path in graphs:
        onnx.checker.check_model(str(path), full_check=True)


def noise_free(voice: RandomVoice, n_phones: int, length_scale: float) -> dict[str, torch.Tensor]:
    inputs = example_inputs(voice.config.net.bert_dim, n_phones, seed=n_phones)
    inputs["style_vec"] = torch.from_numpy(voice.style_vectors[1:2])
    inputs["noise_scale"] = torch.tensor([0.0])
    inputs["noise_scale_w"] = torch.tensor([0.0])
    inputs["sdp_ratio"] = torch.tensor([0.3])  # both duration predictors contribute
    inputs["length_scale"] = torch.tensor([length_scale])
    return inputs


@pytest.mark.parametrize(
    ("n_phones", "length_scale"), [(1, 1.0), (2, 1.0), (9, 0.8), (41, 1.0), (151, 1.3)]
)
def test_onnx_matches_pytorch(
    exported: Path, tiny_voices: dict[str, RandomVoice], n_phones: int, length_scale: float
) -> None:
    voice = tiny_voices["tiny-a"]
    inputs = noise_free(voice, n_phones, length_scale)
    text = {name: inputs[name] for name in SYNTHESIZER_INPUTS[:7]}
    with torch.no_grad():
        expected_audio = voice.model.infer(
            **text,
            noise_scale=inputs["noise_scale"],
            length_scale=inputs["length_scale"],
            noise_scale_w=inputs["noise_scale_w"],
            sdp_ratio=inputs["sdp_ratio"],
        ).numpy()
        expected_frames = voice.model.predict_durations(
            **text,
            length_scale=inputs["length_scale"],
            noise_scale_w=inputs["noise_scale_w"],
            sdp_ratio=inputs["sdp_ratio"],
        ).numpy()
    feeds = {name: tensor.numpy() for name, tensor in inputs.items()}
    (audio,) = session(exported / "synthesizer.onnx").run(
        ["audio"], {k: feeds[k] for k in SYNTHESIZER_INPUTS}
    )
    (frames,) = session(exported / "duration_predictor.onnx").run(
        ["durations"], {k: feeds[k] for k in DURATION_INPUTS}
    )
    np.testing.assert_array_equal(frames, expected_frames)
    assert audio.shape == expected_audio.shape == (1, 1, int(frames.sum()) * HOP)
    assert np.abs(audio - expected_audio).max() <= AUDIO_TOLERANCE
    assert audio.std() > 0.01  # audible, so the comparison means something


def test_noise_inputs_are_live(exported: Path, tiny_voices: dict[str, RandomVoice]) -> None:
    """noise_scale and noise_scale_w reach the graph's random draws (not folded to constants)."""
    feeds = {k: v.numpy() for k, v in noise_free(tiny_voices["tiny-a"], 31, 1.0).items()}
    synthesizer = session(exported / "synthesizer.onnx")
    quiet = [synthesizer.run(["audio"], feeds)[0] for _ in range(2)]
    np.testing.assert_array_equal(quiet[0], quiet[1])
    feeds["noise_scale"] = np.array([0.667], np.float32)
    noisy = synthesizer.run(["audio"], feeds)[0]
    assert noisy.shape == quiet[0].shape and not np.allclose(noisy, quiet[0])
    feeds["noise_scale_w"] = np.array([0.8], np.float32)
    feeds["sdp_ratio"] = np.array([1.0], np.float32)
    durations = session(exported / "duration_predictor.onnx")
    draws = [
        durations.run(["durations"], {k: feeds[k] for k in DURATION_INPUTS})[0] for _ in range(4)
    ]
    assert any(not np.array_equal(draws[0], other) for other in draws[1:])


@pytest.fixture(scope="module")
def converter_export(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = tmp_path_factory.mktemp("sbv2")
    return export_speaker(tiny_model_dir, bundle, name="tiny-a", progress=False, form="sbv2")


def converter_feeds(inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Ours as the converter's graph takes them: its names and order, 0-d scalars."""
    return {
        name: inputs[ours].reshape(() if ours in SCALAR_INPUTS else inputs[ours].shape).numpy()
        for name, ours in zip(CONVERTER_INPUTS, CONVERTER_ORDER, strict=True)
    }


@pytest.mark.parametrize(("n_phones", "length_scale"), [(1, 1.0), (9, 0.8), (41, 1.0), (151, 1.3)])
def test_the_converters_form_matches_pytorch(
    converter_export: Path,
    tiny_voices: dict[str, RandomVoice],
    n_phones: int,
    length_scale: float,
) -> None:
    """Style-Bert-VITS2's form: its seven outputs are what the reference model's
    ``infer_with_latents`` returns, its audio what ``infer`` gives (and our own form)."""
    assert sorted(p.name for p in converter_export.iterdir()) == [
        "config.json",
        "style_vectors.npy",
        "synthesizer.onnx",
    ]
    voice = tiny_voices["tiny-a"]
    inputs = noise_free(voice, n_phones, length_scale)
    with torch.no_grad():
        audio, path, frame_mask, latents = voice.model.infer_with_latents(**inputs)
        assert torch.equal(audio, voice.model.infer(**inputs))
    expected = [t.numpy() for t in (audio, path, frame_mask, *latents)]
    outputs = session(converter_export / "synthesizer.onnx").run(None, converter_feeds(inputs))
    assert len(outputs) == 7
    assert outputs[0].shape == audio.shape and audio.std() > 0.01
    np.testing.assert_allclose(outputs[0], expected[0], atol=AUDIO_TOLERANCE, rtol=0)
    np.testing.assert_array_equal(outputs[1], expected[1])  # the alignment: 0 or 1
    np.testing.assert_array_equal(outputs[2], expected[2])
    for got, wanted in zip(outputs[3:], expected[3:], strict=True):
        np.testing.assert_allclose(got, wanted, atol=1e-4, rtol=0)


def test_the_converters_noise_inputs_are_live(
    converter_export: Path, tiny_voices: dict[str, RandomVoice]
) -> None:
    """onnxsim folded no random draw into a constant: both noise scalars still act."""
    inputs = noise_free(tiny_voices["tiny-a"], 31, 1.0)
    graph = session(converter_export / "synthesizer.onnx")
    quiet = graph.run(["output"], converter_feeds(inputs))[0]
    inputs["noise_scale"] = torch.tensor([0.667])
    noisy = [graph.run(["output"], converter_feeds(inputs))[0] for _ in range(2)]
    assert noisy[0].shape == quiet.shape and not np.allclose(noisy[0], noisy[1])
    inputs["noise_scale_w"] = torch.tensor([0.8])
    inputs["sdp_ratio"] = torch.tensor([1.0])
    lengths = {graph.run(["output"], converter_feeds(inputs))[0].shape for _ in range(6)}
    assert len(lengths) > 1  # the stochastic durations vary


def test_export_copies_config_and_style_vectors(exported: Path, tiny_model_dir: Path) -> None:
    assert (exported / "config.json").read_bytes() == (tiny_model_dir / "config.json").read_bytes()
    np.testing.assert_array_equal(
        np.load(exported / "style_vectors.npy"), np.load(tiny_model_dir / "style_vectors.npy")
    )


def test_fixture_graphs_equal_a_fresh_export(exported: Path) -> None:
    """The committed tiny-a graphs compute what exporting the seed's model computes today."""
    for name, inputs in (
        ("synthesizer.onnx", SYNTHESIZER_INPUTS),
        ("duration_predictor.onnx", DURATION_INPUTS),
    ):
        feeds = {k: v.numpy() for k, v in example_inputs(32, 57, seed=5).items() if k in inputs}
        fresh = session(exported / name).run(None, feeds)[0]
        committed = session(TINY_BUNDLE / "onnx/speakers/tiny-a" / name).run(None, feeds)[0]
        np.testing.assert_array_equal(fresh, committed)


# --- errors -------------------------------------------------------------------------------------


def copy_model(tiny_model_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "voice"))


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def break_checkpoint(folder: Path) -> Path:
    path = folder / "tiny-a.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def break_config(folder: Path) -> Path:
    """A config whose widths differ from the checkpoint's: reported on the checkpoint."""
    path = folder / "config.json"
    path.write_text(path.read_text().replace('"hidden_channels": 16', '"hidden_channels": 24'))
    return folder / "tiny-a.safetensors"


def break_style_vectors(folder: Path) -> Path:
    path = folder / "style_vectors.npy"
    np.save(path, np.zeros((3, 128), np.float32))
    return path


def too_few_styles(folder: Path) -> Path:
    path = folder / "style_vectors.npy"
    np.save(path, np.zeros((2, 256), np.float32))
    return path


def remove_config(folder: Path) -> Path:
    path = folder / "config.json"
    path.unlink()
    return path


def pickled_object_checkpoint(folder: Path) -> Path:
    (folder / "tiny-a.safetensors").unlink()
    path = folder / "G_100.pth"
    torch.save({"model": {"enc_p.emb.weight": "not a tensor"}}, path)
    return path


class Arbitrary:
    """Any class: unpickling it would run code, which weights_only loading refuses."""


def code_in_checkpoint(folder: Path) -> Path:
    (folder / "tiny-a.safetensors").unlink()
    path = folder / "G_100.pth"
    torch.save({"model": Arbitrary()}, path)
    return path


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (remove_config, "file is missing"),
        (break_checkpoint, "not a readable safetensors file"),
        (break_config, "does not match config.json"),
        (break_style_vectors, "expected float [n_styles, 256]"),
        (too_few_styles, "style2id needs 3"),
        (pickled_object_checkpoint, "expected a state dict"),
        (code_in_checkpoint, "not a readable torch checkpoint"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage, message: str
) -> None:
    folder = copy_model(tiny_model_dir, tmp_path)
    bad_file = damage(folder)
    code, err = run_cli([str(folder), "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert str(bad_file) in err and message in err
    assert not (tmp_path / "out" / "onnx" / "speakers" / "voice" / "synthesizer.onnx").exists()


def test_several_checkpoints_need_a_choice(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    folder = copy_model(tiny_model_dir, tmp_path)
    shutil.copy(folder / "tiny-a.safetensors", folder / "older.safetensors")
    code, err = run_cli([str(folder), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "--checkpoint" in err and "older.safetensors" in err
    code, err = run_cli([str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "model folder does not exist" in err


def test_cli_process_prints_no_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools.export", str(tmp_path), "--out", str(tmp_path / "out")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"error: {tmp_path}: no checkpoint (*.safetensors or *.pth) in the model folder"
    )


def test_unwritable_output_is_one_line(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "bundle"
    blocker.write_text("a file where the bundle folder should go")
    code, err = run_cli([str(tiny_model_dir), "--out", str(blocker)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {blocker}") and "Not a directory" in err
