"""The exported BERT graphs compute DeBERTa's hidden_states[-3] under the bundle contract.

Tolerances: the FP32 graph must match PyTorch to float rounding (1e-5). The Q8 graph quantises
every MatMul input per call (one scale per activation tensor, 256 levels over its range) and its
weights to int8, so each MatMul carries ~0.2 % of its operand range as error; on LayerNorm'd
features (std ~1) that measured 2e-4 RMS, 3e-3 max on the tiny model. We allow 2e-3 RMS / 1e-2 max:
ten times the measurement, and still four times below the distance between neighbouring layers
(>= 9e-3 RMS), so taking the wrong layer fails. (The full preset, 22 quantised layers deep, was
measured at 0.048 RMS / 0.22 max against PyTorch, its neighbouring layers 0.59 RMS apart.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from numpy.typing import NDArray
from yomiage_engine.synthesis.tokenizer import CharTokenizer

from tools.bert_export import (
    BERT_HIDDEN,
    FP32_PATH,
    PRESETS,
    Q8_PATH,
    TOKENIZER_DIR,
    build_model,
    build_vocab,
    write_bert,
)

SEED = 7
TINY_VOCAB = len(build_vocab(PRESETS["tiny"].vocab_size))
Q8_RMS_TOL = 2e-3
Q8_MAX_TOL = 1e-2
FP32_TOL = 1e-5

IntArray = NDArray[np.int64]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bundle")
    write_bert(root, "tiny", SEED, fp32=True)
    return root


@pytest.fixture(scope="module")
def reference() -> torch.nn.Module:
    """The same random model, rebuilt from the seed: what the graphs must reproduce."""
    return build_model(PRESETS["tiny"], TINY_VOCAB, SEED)


def session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def padded_batch(lengths: list[int], vocab_size: int, seed: int = 0) -> tuple[IntArray, IntArray]:
    """Random ids framed by [CLS] (1) ... [SEP] (2), right-padded with [PAD] (0)."""
    rng = np.random.default_rng(seed)
    input_ids = np.zeros((len(lengths), max(lengths)), dtype=np.int64)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = [1, *rng.integers(5, vocab_size, length - 2), 2]
    attention_mask = (np.arange(max(lengths)) < np.array(lengths)[:, None]).astype(np.int64)
    return input_ids, attention_mask


def torch_hidden_states(model: torch.nn.Module, ids: IntArray, mask: IntArray) -> Iterator[NDArray]:
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            output_hidden_states=True,
        )
    return (state.numpy() for state in out.hidden_states)


def rms(values: NDArray) -> float:
    return float(np.sqrt(np.mean(np.square(values))))


def test_writes_the_bundle_files(bundle: Path) -> None:
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        assert (bundle / TOKENIZER_DIR / name).is_file()
    # One self-contained file (published bundles ship one .onnx, no external data).
    assert sorted(p.name for p in (bundle / Q8_PATH).parent.iterdir()) == ["bert_q8.onnx"]
    model = onnx.load(str(bundle / Q8_PATH), load_external_data=False)
    assert not any(
        init.data_location == onnx.TensorProto.EXTERNAL for init in model.graph.initializer
    )


def test_tokenizer_matches_the_graph(bundle: Path) -> None:
    """Every id the tokenizer can give has an embedding row, and no row is unreachable."""
    tokenizer = CharTokenizer.from_dir(bundle / TOKENIZER_DIR)
    model = onnx.load(str(bundle / Q8_PATH))
    (embeddings,) = [
        i for i in model.graph.initializer if i.name.endswith("word_embeddings.weight")
    ]
    assert embeddings.dims[0] == tokenizer.vocab_size == len(tokenizer.vocab)
    assert tokenizer.encode("今日は、晴れ。ABC")[1:-1].count(tokenizer.unk_id) == 0


def test_tiny_bert_stays_small(bundle: Path) -> None:
    tokenizer = sum(p.stat().st_size for p in (bundle / TOKENIZER_DIR).iterdir())
    assert (bundle / Q8_PATH).stat().st_size + tokenizer < 1.5e6


@pytest.mark.parametrize("graph", [Q8_PATH, FP32_PATH])
def test_graph_contract(bundle: Path, graph: Path) -> None:
    onnx.checker.check_model(str(bundle / graph), full_check=True)
    sess = session(bundle / graph)
    inputs = {i.name: (i.type, i.shape) for i in sess.get_inputs()}
    assert inputs == {
        "input_ids": ("tensor(int64)", ["batch", "tokens"]),
        "attention_mask": ("tensor(int64)", ["batch", "tokens"]),
    }
    (output,) = sess.get_outputs()
    assert (output.name, output.type) == ("hidden_states", "tensor(float)")
    assert output.shape == ["batch", "tokens", BERT_HIDDEN["tiny"]]


def test_q8_graph_is_quantised(bundle: Path) -> None:
    model = onnx.load(str(bundle / Q8_PATH))
    ops = {node.op_type for node in model.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    int8_weights = [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8]
    assert len(int8_weights) >= 6  # Q, K, V, out, FFN in, FFN out of at least one layer
    # No FP32 copy of a projection weight stays behind (see bert_export.fold_constants).
    shape = PRESETS["tiny"]
    projections = ([shape.hidden, shape.hidden], [shape.hidden, shape.intermediate])
    fp32_projections = [
        i.name
        for i in model.graph.initializer
        if i.data_type == onnx.TensorProto.FLOAT and list(i.dims) in projections
    ]
    assert fp32_projections == []


def test_fp32_graph_equals_pytorch_layer_minus_3(bundle: Path, reference: torch.nn.Module) -> None:
    # 300 tokens: relative distances beyond the 128 linear buckets take the log-bucket path,
    # and the length is far from the 6 tokens the graph was traced with.
    ids, mask = padded_batch([300, 9], TINY_VOCAB)
    (out,) = session(bundle / FP32_PATH).run(None, {"input_ids": ids, "attention_mask": mask})
    expected = list(torch_hidden_states(reference, ids, mask))[-3]
    valid = mask.astype(bool)
    np.testing.assert_allclose(out[valid], expected[valid], atol=FP32_TOL, rtol=0)


def test_q8_graph_is_close_to_pytorch_layer_minus_3(
    bundle: Path, reference: torch.nn.Module
) -> None:
    ids, mask = padded_batch([12, 30, 7], TINY_VOCAB)
    (out,) = session(bundle / Q8_PATH).run(None, {"input_ids": ids, "attention_mask": mask})
    states = list(torch_hidden_states(reference, ids, mask))
    valid = mask.astype(bool)
    error = out[valid] - states[-3][valid]
    assert rms(error) < Q8_RMS_TOL
    assert np.abs(error).max() < Q8_MAX_TOL
    for other in (-4, -2, -1):  # the tolerance is tight enough to tell the layers apart
        assert rms(out[valid] - states[other][valid]) > 2 * Q8_RMS_TOL


def test_batch_axis_is_dynamic(bundle: Path) -> None:
    """Each row of a padded batch of 3 gives nearly the features it gets alone.

    Not exactly: dynamic quantisation takes one scale per activation tensor, over the whole batch.
    Measured on the tiny model: at most 2.5e-3 apart.
    """
    sess = session(bundle / Q8_PATH)
    lengths = [12, 30, 7]
    ids, mask = padded_batch(lengths, TINY_VOCAB, seed=1)
    (batched,) = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    assert batched.shape == (3, 30, BERT_HIDDEN["tiny"])
    for row, length in enumerate(lengths):
        single_ids, single_mask = ids[row : row + 1, :length], mask[row : row + 1, :length]
        (alone,) = sess.run(None, {"input_ids": single_ids, "attention_mask": single_mask})
        np.testing.assert_allclose(batched[row, :length], alone[0], atol=Q8_MAX_TOL, rtol=0)


def test_same_seed_same_file_other_seed_other_weights(bundle: Path, tmp_path: Path) -> None:
    write_bert(tmp_path / "same", "tiny", SEED)
    write_bert(tmp_path / "other", "tiny", SEED + 1)
    expected = (bundle / Q8_PATH).read_bytes()
    assert (tmp_path / "same" / Q8_PATH).read_bytes() == expected
    assert (tmp_path / "other" / Q8_PATH).read_bytes() != expected
    assert not (tmp_path / "same" / FP32_PATH).exists()  # tiny: FP32 only when asked for


def test_presets() -> None:
    assert BERT_HIDDEN["full"] == 1024
    assert BERT_HIDDEN["tiny"] < 128
    full_vocab = build_vocab(PRESETS["full"].vocab_size)
    assert len(set(full_vocab)) == len(full_vocab) == 22012
    assert full_vocab[:5] == ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    with pytest.raises(ValueError, match="unknown BERT preset 'huge'"):
        write_bert(Path("/nonexistent"), "huge", 0)
