"""tools.export --form and tools.make_dialects: the committed dialect fixtures rebuild to graphs
that compute what they compute, in the form each exporter writes, from the reference model."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import aivmlib
import numpy as np
import onnx
import pytest
import torch
from conftest import REPO_ROOT, TINY_BUNDLE, TINY_SEED, session

from tools.aivm import HYPER_PARAMETERS, write_aivm
from tools.bert_export import BERT_HIDDEN
from tools.export import (
    CONVERTER_INPUTS,
    CONVERTER_ORDER,
    SCALAR_INPUTS,
    SYNTHESIZER_INPUTS,
    example_inputs,
    export_speaker,
    main,
)
from tools.make_dialects import DEFAULT_OUT, DUO_SPEAKERS, build_dialects, duo_name
from tools.model import SynthesizerTrn
from tools.presets import PRESETS
from tools.random_voice import RandomVoice, random_voice

COMMITTED = REPO_ROOT / DEFAULT_OUT["tiny"]
SPEAKER_DIR = Path("onnx/speakers/tiny-a")
HAYAKOE_SYNTHESIZER = "hayakoe" / SPEAKER_DIR / "synthesizer.onnx"
SBV2_SYNTHESIZER = "sbv2" / SPEAKER_DIR / "synthesizer.onnx"
AIVMX = Path("tiny-a.aivmx")
DUO_AIVMX = Path(f"{duo_name('tiny')}.aivmx")
# Each graph of the fixtures, and whether it is in the converter's form (else hayakoe's).
GRAPHS = {HAYAKOE_SYNTHESIZER: False, SBV2_SYNTHESIZER: True, AIVMX: True, DUO_AIVMX: True}


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dialects(tmp_path_factory.mktemp("dialects") / "out", "tiny", TINY_SEED)


@pytest.fixture(scope="module")
def duo() -> RandomVoice:
    return random_voice(
        PRESETS["tiny"], duo_name("tiny"), BERT_HIDDEN["tiny"], TINY_SEED, speakers=DUO_SPEAKERS
    )


def _inputs(sid: int = 0) -> dict[str, torch.Tensor]:
    """Ours (noise off, so that every run computes the same); [1] scalars."""
    inputs = example_inputs(BERT_HIDDEN["tiny"], 37, seed=3)
    inputs["noise_scale"] = inputs["noise_scale_w"] = torch.tensor([0.0])
    inputs["sid"] = torch.tensor([sid])
    return inputs


def _feeds(path: Path, converter: bool, sid: int = 0) -> dict[str, np.ndarray]:
    """The graph's feeds, by the names and in the order it declares them."""
    inputs = _inputs(sid)
    if converter:
        inputs.update({name: inputs[name].reshape(()) for name in SCALAR_INPUTS})
        feeds = {
            graph_name: inputs[ours].numpy()
            for graph_name, ours in zip(CONVERTER_INPUTS, CONVERTER_ORDER, strict=True)
        }
    else:
        feeds = {name: inputs[name].numpy() for name in SYNTHESIZER_INPUTS}
    assert list(feeds) == [i.name for i in session(path).get_inputs()]
    return feeds


@pytest.mark.parametrize("relative", sorted(GRAPHS, key=str), ids=str)
def test_rebuild_computes_what_the_committed_dialect_computes(
    rebuilt: Path, relative: Path
) -> None:
    feeds = _feeds(rebuilt / relative, GRAPHS[relative])
    ours = session(rebuilt / relative).run(None, feeds)
    committed = session(COMMITTED / relative).run(None, feeds)
    assert len(ours) == len(committed)
    for mine, theirs in zip(ours, committed, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-6, rtol=0)


def test_the_rebuild_writes_the_committed_files() -> None:
    written = sorted(p.relative_to(COMMITTED) for p in COMMITTED.rglob("*") if p.is_file())
    assert written == sorted(
        [
            *("hayakoe" / SPEAKER_DIR / name for name in ("duration_predictor.onnx",)),
            *(
                folder / SPEAKER_DIR / name
                for folder in ("hayakoe", "sbv2")
                for name in ("config.json", "style_vectors.npy", "synthesizer.onnx")
            ),
            AIVMX,
            DUO_AIVMX,
        ]
    )
    # Small, though Style-Bert-VITS2's layout carries its shape arithmetic (7.1 MB in all).
    assert sum(p.stat().st_size for p in COMMITTED.rglob("*") if p.is_file()) < 8_000_000


def _reference(model: SynthesizerTrn, feeds: dict[str, np.ndarray], converter: bool) -> list:
    """What the reference model computes from ``feeds``: the converter's seven outputs
    (``infer_with_latents`` flattened) or hayakoe's audio and frames."""
    names = CONVERTER_INPUTS if converter else SYNTHESIZER_INPUTS
    order = CONVERTER_ORDER if converter else SYNTHESIZER_INPUTS
    named = {ours: torch.from_numpy(feeds[name]) for name, ours in zip(names, order, strict=True)}
    with torch.no_grad():
        if not converter:
            return [t.numpy() for t in model.infer(**named, with_frames=True)]
        audio, path, frame_mask, latents = model.infer_with_latents(**named)
        assert torch.equal(audio, model.infer(**named))  # the same audio as every other form
    return [t.numpy() for t in (audio, path, frame_mask, *latents)]


@pytest.mark.parametrize("relative", sorted(GRAPHS, key=str), ids=str)
def test_each_form_is_the_reference_model(
    rebuilt: Path,
    tiny_voices: dict[str, RandomVoice],
    duo: RandomVoice,
    relative: Path,
) -> None:
    """Every output equal to the reference model's, for each speaker of the graph."""
    model = duo.model if relative == DUO_AIVMX else tiny_voices["tiny-a"].model
    for sid in range(model.net.n_speakers):
        feeds = _feeds(rebuilt / relative, GRAPHS[relative], sid)
        outputs = session(rebuilt / relative).run(None, feeds)
        expected = _reference(model, feeds, GRAPHS[relative])
        assert len(outputs) == len(expected)
        np.testing.assert_allclose(outputs[0], expected[0], atol=1e-5, rtol=0)
        for got, wanted in zip(outputs[1:], expected[1:], strict=True):
            assert got.shape == wanted.shape
            np.testing.assert_allclose(got, wanted, atol=1e-4, rtol=0)


def test_hayakoes_form() -> None:
    graph = onnx.load(str(COMMITTED / HAYAKOE_SYNTHESIZER), load_external_data=False)
    assert [o.name for o in graph.graph.output] == ["audio", "durations"]
    assert {n.name.split("/")[1] for n in graph.graph.node if "/dec/" in n.name} == {"net_g"}


def _sbv2_layers(path: Path) -> tuple[int, int, int]:
    """(relative embedding tables, those a Pad reads, feed-forward convolutions behind a Pad)
    of a graph: Style-Bert-VITS2's attention pads its tables to every offset of the sequence,
    its feed-forward layers pad before each convolution."""
    graph = onnx.load(str(path), load_external_data=False).graph
    tables = {t.name for t in graph.initializer if t.name.rsplit(".", 1)[-1].startswith("emb_rel")}
    made_by = {name: node.op_type for node in graph.node for name in node.output}
    padded = sum(1 for node in graph.node if node.op_type == "Pad" and node.input[0] in tables)
    feed_forward = [n for n in graph.node if n.op_type == "Conv" and "/ffn_layers." in n.name]
    behind_pad = sum(1 for node in feed_forward if made_by.get(node.input[0]) == "Pad")
    assert feed_forward and tables
    return len(tables), padded, behind_pad


HAYAKOE_GRAPHS = [HAYAKOE_SYNTHESIZER, HAYAKOE_SYNTHESIZER.with_name("duration_predictor.onnx")]


@pytest.mark.parametrize("relative", [*HAYAKOE_GRAPHS, SBV2_SYNTHESIZER, AIVMX], ids=str)
def test_the_lineages_forms_trace_style_bert_vits2s_layers(relative: Path) -> None:
    """hayakoe's exporter, the converter and AIVMX files trace Style-Bert-VITS2's own attention
    and feed-forward modules (hayakoe's exporter run on a full-size voice, docs/VOICES.md):
    every relative table padded; every feed-forward convolution behind a Pad, which onnxsim
    (the converter's last step) folds into the convolution."""
    tables, padded, behind_pad = _sbv2_layers(COMMITTED / relative)
    assert padded == tables
    # A layer has two tables (keys, values) and two feed-forward convolutions.
    assert behind_pad == (tables if relative in HAYAKOE_GRAPHS else 0)


def test_our_form_multiplies_the_window_only() -> None:
    for graph in TINY_BUNDLE.glob("onnx/speakers/*/*.onnx"):
        _, padded, behind_pad = _sbv2_layers(graph)
        assert padded == 0 and behind_pad == 0


@pytest.mark.parametrize("relative", [SBV2_SYNTHESIZER, AIVMX, DUO_AIVMX], ids=str)
def test_the_converters_form(relative: Path) -> None:
    """What Style-Bert-VITS2's convert_onnx.py writes: SynthesizerTrn traced as it is (top-level
    scopes), infer's seven results of which only the first is named, its input names and order
    with 0-d scalars, one Ceil (the durations) and no If, opset 17 (torch < 2.4's default)."""
    graph = onnx.load(str(COMMITTED / relative), load_external_data=False)
    assert [(o.domain, o.version) for o in graph.opset_import] == [("", 17)]
    outputs = [o.name for o in graph.graph.output]
    assert len(outputs) == 7 and outputs[0] == "output"
    assert all(name.startswith("onnx::") for name in outputs[1:])  # torch's generated names
    ranks = [len(o.type.tensor_type.shape.dim) for o in graph.graph.output]
    assert ranks == [3, 4, 3, 3, 3, 3, 3]  # audio, attn, y_mask, z, z_p, m_p, logs_p
    declared = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in graph.graph.input
    }
    assert list(declared) == list(CONVERTER_INPUTS)
    assert all(declared[name] == [] for name in CONVERTER_INPUTS[-4:])
    assert declared["bert"] == ["batch_size", BERT_HIDDEN["tiny"], "x_tst_max_length"]
    assert declared["style_vec"] == ["batch_size", 256]
    ops = Counter(node.op_type for node in graph.graph.node)
    assert (ops["Ceil"], ops["If"]) == (1, 0)
    scopes = {node.name.split("/")[1] for node in graph.graph.node if node.name.count("/") > 1}
    assert {"dec", "flow", "sdp", "enc_p", "dp"} <= scopes
    assert {node.name.split("/")[1] for node in graph.graph.node if "/dec/" in node.name} == {"dec"}


def test_the_aivmx_holds_the_sbv2_export() -> None:
    """An AIVMX is the converter's ONNX export with metadata: the same graph, node for node."""
    aivmx = onnx.load(str(COMMITTED / AIVMX), load_external_data=False)
    sbv2 = onnx.load(str(COMMITTED / SBV2_SYNTHESIZER), load_external_data=False)
    assert aivmx.graph == sbv2.graph
    assert not sbv2.metadata_props
    config = json.loads((COMMITTED / SBV2_SYNTHESIZER).with_name("config.json").read_text())
    assert config["data"]["spk2id"] == {"tiny-a": 0}


def test_the_aivmx_metadata_is_what_aivmlib_reads(rebuilt: Path) -> None:
    with (rebuilt / AIVMX).open("rb") as file:
        metadata = aivmlib.read_aivmx_metadata(file)
    (speaker,) = metadata.manifest.speakers
    assert speaker.name == "tiny-a"
    assert [style.name for style in speaker.styles] == ["ノーマル", "Happy", "Sad"]
    assert metadata.manifest.license == "CC0-1.0"
    assert metadata.style_vectors is not None


def test_the_two_speaker_aivmx_is_what_aivmlib_makes_of_it(duo: RandomVoice) -> None:
    """One speaker per spk2id entry (local_id its sid), each with every style (local_id its row
    of the style vectors); the hyper-parameters keep n_speakers and count the styles."""
    with (COMMITTED / DUO_AIVMX).open("rb") as file:
        metadata = aivmlib.read_aivmx_metadata(file)
    speakers = metadata.manifest.speakers
    assert [(s.name, s.local_id) for s in speakers] == [("duo-a", 0), ("duo-b", 1)]
    for speaker in speakers:
        assert [(s.name, s.local_id) for s in speaker.styles] == [
            ("ノーマル", 0),
            ("Happy", 1),
            ("Sad", 2),
        ]
    data = metadata.hyper_parameters.data
    assert (data.n_speakers, data.spk2id, data.num_styles) == (2, {"duo-a": 0, "duo-b": 1}, 3)
    assert metadata.style_vectors is not None
    np.testing.assert_array_equal(np.load(io.BytesIO(metadata.style_vectors)), duo.style_vectors)
    feeds = [_feeds(COMMITTED / DUO_AIVMX, True, sid) for sid in (0, 1)]
    first, second = (session(COMMITTED / DUO_AIVMX).run(["output"], f)[0] for f in feeds)
    # Two voices, not one twice (their durations differ too, so the lengths may).
    assert first.shape != second.shape or not np.allclose(first, second)


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
    feeds = _feeds(from_folder / "synthesizer.onnx", converter=False)
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
