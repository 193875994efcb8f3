"""tools.export --form and tools.make_dialects: the committed dialect fixtures rebuild to graphs
that compute what they compute, in the form each exporter writes, from the reference model."""

from __future__ import annotations

import json
from pathlib import Path

import aivmlib
import numpy as np
import onnx
import pytest
import torch
from conftest import REPO_ROOT, TINY_SEED, session

from tools.aivm import HYPER_PARAMETERS, write_aivm
from tools.bert_export import BERT_HIDDEN
from tools.export import FORMS, SCALAR_INPUTS, example_inputs, export_speaker, main
from tools.make_dialects import DEFAULT_OUT, build_dialects
from tools.random_voice import RandomVoice

COMMITTED = REPO_ROOT / DEFAULT_OUT["tiny"]
HAYAKOE_SYNTHESIZER = Path("hayakoe/onnx/speakers/tiny-a/synthesizer.onnx")
AIVMX = Path("tiny-a.aivmx")


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dialects(tmp_path_factory.mktemp("dialects") / "out", "tiny", TINY_SEED)


def _feeds(form: str, path: Path) -> dict[str, np.ndarray]:
    chosen = FORMS[form]
    inputs = example_inputs(BERT_HIDDEN["tiny"], 37, seed=3)
    inputs["noise_scale"] = inputs["noise_scale_w"] = torch.tensor([0.0])
    if chosen.zero_d_scalars:
        inputs.update({name: inputs[name].reshape(()) for name in SCALAR_INPUTS})
    declared = [i.name for i in session(path).get_inputs()]
    feeds = {chosen.renamed.get(name, name): inputs[name].numpy() for name in chosen.inputs}
    assert list(feeds) == declared  # the exporter's names, in its order
    return feeds


@pytest.mark.parametrize(("relative", "form"), [(HAYAKOE_SYNTHESIZER, "hayakoe"), (AIVMX, "aivmx")])
def test_rebuild_computes_what_the_committed_dialect_computes(
    rebuilt: Path, relative: Path, form: str
) -> None:
    feeds = _feeds(form, rebuilt / relative)
    ours = session(rebuilt / relative).run(None, feeds)
    committed = session(COMMITTED / relative).run(None, feeds)
    for mine, theirs in zip(ours, committed, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-6, rtol=0)


def test_each_form_is_the_reference_model(
    rebuilt: Path, tiny_voices: dict[str, RandomVoice]
) -> None:
    """Audio (and hayakoe's frames) equal to the reference model's, the forms' names and ranks."""
    model = tiny_voices["tiny-a"].model
    for relative, form in ((HAYAKOE_SYNTHESIZER, "hayakoe"), (AIVMX, "aivmx")):
        feeds = _feeds(form, rebuilt / relative)
        ours_names = {FORMS[form].renamed.get(n, n): n for n in FORMS[form].inputs}
        named = {ours_names[k]: torch.from_numpy(v) for k, v in feeds.items()}
        with torch.no_grad():
            audio, frames = model.infer(**named, with_frames=True)
        outputs = session(rebuilt / relative).run(None, feeds)
        np.testing.assert_allclose(outputs[0], audio.numpy(), atol=1e-5, rtol=0)
        if form == "hayakoe":
            np.testing.assert_array_equal(outputs[1], frames.numpy())
        graph = onnx.load(str(rebuilt / relative), load_external_data=False)
        assert [o.name for o in graph.graph.output] == (
            ["audio", "durations"] if form == "hayakoe" else ["output"]
        )
        scopes = {node.name.split("/")[1] for node in graph.graph.node if "/dec/" in node.name}
        assert scopes == {FORMS[form].wrapper}


def test_the_aivmx_metadata_is_what_aivmlib_reads(rebuilt: Path) -> None:
    with (rebuilt / AIVMX).open("rb") as file:
        metadata = aivmlib.read_aivmx_metadata(file)
    (speaker,) = metadata.manifest.speakers
    assert speaker.name == "tiny-a"
    assert [style.name for style in speaker.styles] == ["ノーマル", "Happy", "Sad"]
    assert metadata.manifest.license == "CC0-1.0"
    assert metadata.style_vectors is not None


def test_an_aivm_file_exports_as_its_model_folder(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AivisHub's .aivm (the checkpoint with the AIVM metadata in its safetensors header) is a
    model folder in one file: the same graphs, its styles under the manifest's names."""
    aivm = write_aivm(
        tiny_model_dir / f"{tiny_model_dir.name}.safetensors",
        tiny_model_dir / "config.json",
        tiny_model_dir / "style_vectors.npy",
        "tiny-a",
        tmp_path / "tiny-a.aivm",
    )
    # aivmlib's schema drops the tiny preset's three sizes SBV2 configs do not hold (bert_dim,
    # dp_filter_channels, n_layers_trans_flow; a real voice has SBV2's fixed ones): put them back.
    model = json.loads((tiny_model_dir / "config.json").read_text(encoding="utf-8"))["model"]
    _update_hyper_parameters(aivm, model)
    from_aivm = export_speaker(aivm, tmp_path / "from-aivm", progress=False)
    from_folder = export_speaker(tiny_model_dir, tmp_path / "from-folder", progress=False)
    assert from_aivm.name == "tiny-a"
    config = json.loads((from_aivm / "config.json").read_text(encoding="utf-8"))
    assert list(config["data"]["style2id"]) == ["ノーマル", "Happy", "Sad"]
    np.testing.assert_array_equal(
        np.load(from_aivm / "style_vectors.npy"), np.load(from_folder / "style_vectors.npy")
    )
    feeds = _feeds("yomiage", from_folder / "synthesizer.onnx")
    (ours,) = session(from_aivm / "synthesizer.onnx").run(None, feeds)
    (theirs,) = session(from_folder / "synthesizer.onnx").run(None, feeds)
    np.testing.assert_array_equal(ours, theirs)

    broken = tmp_path / "broken.aivm"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    assert main([str(broken), "--out", str(tmp_path / "nowhere")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "broken.aivm" in line and "not a readable AIVM file" in line


def _update_hyper_parameters(aivm: Path, model: dict[str, object]) -> None:
    """Add the ``model`` keys an .aivm's hyper-parameters lack (in its safetensors header)."""
    data = aivm.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    hyper_parameters = json.loads(header["__metadata__"][HYPER_PARAMETERS])
    hyper_parameters["model"] = {**model, **hyper_parameters["model"]}
    header["__metadata__"][HYPER_PARAMETERS] = json.dumps(hyper_parameters)
    encoded = json.dumps(header).encode()
    aivm.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data[8 + size :])
