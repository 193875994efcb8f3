"""tools.export --form and tools.make_dialects: the committed dialect fixtures rebuild to graphs
that compute what they compute, in the form each exporter writes, from the reference model."""

from __future__ import annotations

from pathlib import Path

import aivmlib
import numpy as np
import onnx
import pytest
import torch
from conftest import REPO_ROOT, TINY_SEED, session

from tools.bert_export import BERT_HIDDEN
from tools.export import FORMS, SCALAR_INPUTS, example_inputs
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
