"""The BERT part of a bundle: DeBERTa-v2 feature graph (ONNX, dynamic INT8) and tokenizer files.

``write_bert(bundle_root, preset, seed)`` writes, with random weights (no model hub needed)::

    bert/tokenizer/{vocab.txt, tokenizer_config.json, special_tokens_map.json}
    onnx/bert/q8/bert_q8.onnx        input_ids, attention_mask int64 [B, T] -> hidden_states
    onnx/bert/fp32/bert.onnx         same graph unquantised (GPU path; "full" only by default)

``hidden_states`` is float32 [B, T, H]: DeBERTa's ``hidden_states[-3]`` (the layer Style-Bert-VITS2
takes its BERT features from). "full" has the shape of ku-nlp/deberta-v2-large-japanese-char-wwm;
"tiny" is a few-kilobyte stand-in of the same class for tests.
"""

from __future__ import annotations

import json
import tempfile
import unicodedata
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from transformers import DebertaV2Config, DebertaV2Model

FEATURE_LAYER = -3
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "hidden_states"
OPSET = 17

TOKENIZER_DIR = Path("bert/tokenizer")
Q8_PATH = Path("onnx/bert/q8/bert_q8.onnx")
FP32_PATH = Path("onnx/bert/fp32/bert.onnx")

# Order and ids as in the published model: [PAD] = 0, [CLS] = 1, [SEP] = 2, [UNK] = 3, [MASK] = 4.
SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "unk_token": "[UNK]",
    "mask_token": "[MASK]",
}


@dataclass(frozen=True)
class BertShape:
    """Widths of one preset; the relative-attention settings are shared (see ``_config``)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int  # including the specials; the character list is cut or filled to this


PRESETS = {
    # ku-nlp/deberta-v2-large-japanese-char-wwm config.json (vocab_size 22012).
    "full": BertShape(hidden=1024, layers=24, heads=16, intermediate=4096, vocab_size=22012),
    # Kana + ASCII + punctuation + the JIS X 0208 kanji: every character a test text needs.
    "tiny": BertShape(hidden=32, layers=4, heads=2, intermediate=64, vocab_size=0),
}
BERT_HIDDEN: dict[str, int] = {name: shape.hidden for name, shape in PRESETS.items()}


def write_bert(bundle_root: Path, preset: str, seed: int, *, fp32: bool | None = None) -> None:
    """Write the tokenizer folder and the Q8 graph of ``preset``, and the FP32 graph if ``fp32``
    (by default for "full" only: 1.3 GB, for GPUs; the tiny bundle stays small)."""
    shape = _preset(preset)
    vocab = build_vocab(shape.vocab_size)
    write_tokenizer(bundle_root / TOKENIZER_DIR, vocab)
    keep_fp32 = preset == "full" if fp32 is None else fp32
    with tempfile.TemporaryDirectory(prefix="bert-export-") as scratch:
        traced = Path(scratch) / "traced.onnx"
        # The model lives only inside this call: its 1.2 GB (full) are free for what follows.
        export_fp32(build_model(shape, len(vocab), seed), traced)
        fp32_path = bundle_root / FP32_PATH if keep_fp32 else Path(scratch) / "bert.onnx"
        fold_constants(traced, fp32_path)
        quantize_q8(fp32_path, bundle_root / Q8_PATH)


def _preset(preset: str) -> BertShape:
    if preset not in PRESETS:
        raise ValueError(f"unknown BERT preset {preset!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[preset]


# --- vocabulary and tokenizer files ---------------------------------------------------------------


def build_vocab(size: int = 0) -> list[str]:
    """Specials, then single characters; ``size`` > 0 fills (rarer kanji) or cuts to that many."""
    tokens = list(SPECIAL_TOKENS.values())
    tokens.extend(_unique(_base_characters()))
    if size <= 0:
        return tokens
    rarer_kanji = (chr(cp) for cp in [*range(0x4E00, 0xA000), *range(0x3400, 0x4DC0)])
    tokens.extend(_unique(rarer_kanji, seen=set(tokens)))
    if len(tokens) < size:
        raise ValueError(f"cannot build a {size}-token vocabulary (only {len(tokens)} characters)")
    return tokens[:size]


def _base_characters() -> Iterator[str]:
    """Characters a Japanese character BERT sees once text is NFKC-normalised."""
    yield "▁"  # present in the published vocab (sentencepiece heritage); never produced by text
    yield from (chr(cp) for cp in range(0x3041, 0x3097))  # hiragana ぁ..ゖ
    yield from "ゝゞ"
    yield from (chr(cp) for cp in range(0x30A1, 0x30FB))  # katakana ァ..ヺ
    yield from "ー・ヽヾ"
    yield from (chr(cp) for cp in range(0x21, 0x7F))  # printable ASCII
    yield from "、。「」『』【】〈〉《》〔〕〜々〆〇※→←↑↓○●◎△▲□■☆★♪“”‘’―"
    yield from _jis_kanji()


def _jis_kanji() -> Iterator[str]:
    """Kanji of JIS X 0208 (two bytes in EUC-JP): the ~6,350 that Japanese text uses daily."""
    for cp in range(0x4E00, 0xA000):
        char = chr(cp)
        try:
            encoded = char.encode("euc_jp")
        except UnicodeEncodeError:
            continue
        if len(encoded) == 2:
            yield char


def _unique(chars: Iterable[str], seen: set[str] | None = None) -> Iterator[str]:
    """Characters in order, without repeats or any that NFKC rewrites (BERT never sees those)."""
    seen = set() if seen is None else seen
    for char in chars:
        if char not in seen and unicodedata.normalize("NFKC", char) == char:
            seen.add(char)
            yield char


def write_tokenizer(folder: Path, vocab: list[str]) -> None:
    """The three files of a BertJapaneseTokenizer (basic words, character subwords)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    config = {
        "tokenizer_class": "BertJapaneseTokenizer",
        "do_lower_case": False,
        "do_word_tokenize": True,
        "do_subword_tokenize": True,
        "word_tokenizer_type": "basic",
        "subword_tokenizer_type": "character",
        "never_split": None,
        "mecab_kwargs": None,
        "sudachi_kwargs": None,
        "jumanpp_kwargs": None,
        **SPECIAL_TOKENS,
    }
    _write_json(folder / "tokenizer_config.json", config)
    _write_json(folder / "special_tokens_map.json", SPECIAL_TOKENS)


def _write_json(path: Path, data: dict[str, object]) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


# --- model and graphs -----------------------------------------------------------------------------


def _config(shape: BertShape, vocab_size: int) -> DebertaV2Config:
    """ku-nlp/deberta-v2-large-japanese-char-wwm's settings with ``shape``'s widths."""
    return DebertaV2Config(
        vocab_size=vocab_size,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=0,
        initializer_range=0.02,
        layer_norm_eps=1e-7,
        relative_attention=True,
        max_relative_positions=-1,
        position_buckets=256,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        pad_token_id=0,
    )


def build_model(shape: BertShape, vocab_size: int, seed: int) -> DebertaV2Model:
    """DeBERTa-v2 with random weights drawn from ``seed`` (the same seed gives the same model)."""
    torch.manual_seed(seed)
    model = DebertaV2Model(_config(shape, vocab_size))
    return model.eval()


class FeatureGraph(torch.nn.Module):
    """What the graph computes: ids + mask -> ``hidden_states[FEATURE_LAYER]``."""

    def __init__(self, model: DebertaV2Model) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
        )
        return out.hidden_states[FEATURE_LAYER]


def export_fp32(model: DebertaV2Model, path: Path) -> None:
    """Trace to ONNX (TorchScript exporter, opset 17) with batch and token axes dynamic."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Two rows of different lengths, so that nothing batch- or length-specific is baked in.
    input_ids = torch.tensor([[1, 10, 11, 12, 13, 2], [1, 14, 15, 2, 0, 0]], dtype=torch.int64)
    attention_mask = (input_ids != 0).to(torch.int64)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        # DeBERTa's tracer warnings concern values that are constant for every input (head size,
        # bucket count, query length == key length in self-attention); the tests check other
        # batch sizes and lengths (log buckets included) against PyTorch.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="To copy construct from a tensor")
        torch.onnx.export(
            FeatureGraph(model),
            (input_ids, attention_mask),
            str(path),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes={name: axes for name in (*INPUT_NAMES, OUTPUT_NAME)},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    onnx.checker.check_model(str(path))


def fold_constants(source: Path, target: Path) -> None:
    """Precompute what does not depend on the input, with onnxruntime's basic (portable) passes.

    DeBERTa projects its 512 relative-position embeddings through each layer's query and key
    weights; the tracer reaches those weights through Identity nodes, which the quantiser cannot
    see through, so it kept FP32 copies of them. Folded here, the projections become constants:
    full Q8 file 556 -> 460 MB, session load 11 -> 5 s and 1.4 -> 0.8 GB peak memory; identical
    outputs (onnxruntime folded them at load time anyway).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    onnx.checker.check_model(str(target))


def quantize_q8(fp32_path: Path, q8_path: Path) -> None:
    """Dynamic INT8: MatMul weights stored as int8, activations quantised per call."""
    q8_path.parent.mkdir(parents=True, exist_ok=True)
    quantize_dynamic(
        fp32_path,
        q8_path,
        op_types_to_quantize=["MatMul"],
        weight_type=QuantType.QInt8,
    )
    onnx.checker.check_model(str(q8_path))
