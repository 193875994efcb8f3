"""CharTokenizer on its own: files, errors, ids, padding. Parity with transformers is proven in
tests/tools/test_tokenizer_parity.py (the reference cannot be installed in this environment)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from custom_components.yomiage.engine.errors import BundleError
from custom_components.yomiage.engine.synthesis.tokenizer import CharTokenizer

# [PAD] deliberately not id 0: padding must use the vocabulary's id, not a constant.
VOCAB = ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "こ", "ん", "に", "ち", "は", "。", "A", "!"]
CONFIG = {
    "tokenizer_class": "BertJapaneseTokenizer",
    "do_lower_case": False,
    "word_tokenizer_type": "basic",
    "subword_tokenizer_type": "character",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "mask_token": "[MASK]",
}


def write_folder(folder: Path, vocab: list[str] = VOCAB, **config: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({**CONFIG, **config}), "utf-8")
    return folder


@pytest.fixture
def tokenizer(tmp_path: Path) -> CharTokenizer:
    return CharTokenizer.from_dir(write_folder(tmp_path / "tok"))


def ids_of(*tokens: str) -> list[int]:
    return [VOCAB.index(token) for token in tokens]


def test_one_id_per_character_between_cls_and_sep(tokenizer: CharTokenizer) -> None:
    assert tokenizer.encode("こんにちは。") == ids_of(
        "[CLS]", "こ", "ん", "に", "ち", "は", "。", "[SEP]"
    )
    assert tokenizer.encode("") == ids_of("[CLS]", "[SEP]")


def test_unknown_characters_become_unk(tokenizer: CharTokenizer) -> None:
    assert tokenizer.encode("こ😀ん") == ids_of("[CLS]", "こ", "[UNK]", "ん", "[SEP]")


def test_drops_whitespace_and_control_characters(tokenizer: CharTokenizer) -> None:
    spaced = "\u3000こ ん\tに\nち\u200bは\x00\ufffd"
    assert tokenizer.encode(spaced) == tokenizer.encode("こんにちは")
    assert tokenizer.characters(spaced) == list("こんにちは")


def test_nfkc_normalises_width_and_can_change_length(tokenizer: CharTokenizer) -> None:
    assert tokenizer.encode("Ａ！") == tokenizer.encode("A!")
    assert tokenizer.characters("…") == [".", ".", "."]  # one input character, three tokens


def test_special_token_text_stays_whole(tokenizer: CharTokenizer) -> None:
    assert tokenizer.encode("こ[MASK]ん") == ids_of("[CLS]", "こ", "[MASK]", "ん", "[SEP]")
    assert tokenizer.characters("[mask]") == list("[mask]")  # case matters, as in the reference


def test_special_ids(tokenizer: CharTokenizer) -> None:
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id) == (4, 0, 1, 2)
    assert tokenizer.vocab_size == len(VOCAB)


def test_encode_batch_pads_to_the_longest(tokenizer: CharTokenizer) -> None:
    texts = ["こん", "", "こんにちは。"]
    input_ids, attention_mask = tokenizer.encode_batch(texts)
    assert input_ids.shape == attention_mask.shape == (3, 8)
    assert input_ids.dtype == attention_mask.dtype == np.int64
    for row, text in enumerate(texts):
        ids = tokenizer.encode(text)
        assert input_ids[row, : len(ids)].tolist() == ids
        assert (input_ids[row, len(ids) :] == tokenizer.pad_id).all()
        assert attention_mask[row].tolist() == [1] * len(ids) + [0] * (8 - len(ids))


def test_encode_batch_of_nothing(tokenizer: CharTokenizer) -> None:
    input_ids, attention_mask = tokenizer.encode_batch([])
    assert input_ids.shape == attention_mask.shape == (0, 0)
    assert input_ids.dtype == attention_mask.dtype == np.int64


def test_special_tokens_map_overrides_the_defaults(tmp_path: Path) -> None:
    vocab = ["<pad>", "<s>", "</s>", "<unk>", "<mask>", "こ"]
    folder = write_folder(tmp_path, vocab, unk_token=None, cls_token=None, sep_token=None,
                          pad_token=None, mask_token=None)  # fmt: skip
    specials = {"pad_token": "<pad>", "cls_token": {"content": "<s>"}, "sep_token": "</s>",
                "unk_token": "<unk>", "mask_token": "<mask>"}  # fmt: skip
    (folder / "special_tokens_map.json").write_text(json.dumps(specials), "utf-8")
    tokenizer = CharTokenizer.from_dir(folder)
    assert tokenizer.encode("こx<mask>") == [1, 5, 3, 4, 2]


def test_vocab_line_endings_and_repeats_as_the_reference(tmp_path: Path) -> None:
    folder = write_folder(tmp_path)
    (folder / "vocab.txt").write_bytes("\r\n".join([*VOCAB, "こ"]).encode())
    tokenizer = CharTokenizer.from_dir(folder)
    assert tokenizer.vocab["ん"] == VOCAB.index("ん")  # CRLF read like LF
    assert tokenizer.vocab["こ"] == len(VOCAB)  # a repeated token keeps its last line


def test_immutable_and_shared_between_threads(tokenizer: CharTokenizer) -> None:
    with pytest.raises(AttributeError):
        tokenizer.vocab = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        tokenizer.vocab["x"] = 1  # type: ignore[index]
    texts = ["こんにちは。" * n for n in range(1, 40)]
    expected = [tokenizer.encode(text) for text in texts]
    results: list[list[list[int]]] = []
    threads = [
        threading.Thread(target=lambda: results.append([tokenizer.encode(t) for t in texts]))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 8


# --- errors: each names the file and the problem ------------------------------------------------


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="tokenizer folder not found") as err:
        CharTokenizer.from_dir(tmp_path / "nowhere")
    assert err.value.path == str(tmp_path / "nowhere")


@pytest.mark.parametrize("name", ["vocab.txt", "tokenizer_config.json"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    folder = write_folder(tmp_path)
    (folder / name).unlink()
    with pytest.raises(BundleError, match="file missing") as err:
        CharTokenizer.from_dir(folder)
    assert err.value.path == str(folder / name)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty vocabulary"),
        (b"\n \n", "empty vocabulary"),
        (b"[PAD]\n\xff\xfe\n", r"not UTF-8 text \(byte 6\)"),
        (b"PK\x03\x04\x00\x00binary", "binary data"),
        ("\n".join(VOCAB[:2] + VOCAB[3:]).encode(), r"special tokens missing: \[SEP\]"),
    ],
)
def test_corrupt_vocab(tmp_path: Path, content: bytes, problem: str) -> None:
    folder = write_folder(tmp_path)
    (folder / "vocab.txt").write_bytes(content)
    with pytest.raises(BundleError, match=problem) as err:
        CharTokenizer.from_dir(folder)
    assert err.value.path == str(folder / "vocab.txt")
    assert str(folder / "vocab.txt") in str(err.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not readable as JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"tokenizer_class": "BertTokenizer"}), "not a BertJapaneseTokenizer"),
        (json.dumps({"word_tokenizer_type": "mecab"}), "word_tokenizer_type is 'mecab'"),
        (json.dumps({"subword_tokenizer_type": "wordpiece"}), "subword_tokenizer_type"),
        (json.dumps({"do_lower_case": True}), "do_lower_case is True; only False"),
        (json.dumps({"unk_token": 3}), "unk_token is not a token string"),
    ],
)
def test_bad_config(tmp_path: Path, content: str, problem: str) -> None:
    folder = write_folder(tmp_path)
    (folder / "tokenizer_config.json").write_text(content, "utf-8")
    with pytest.raises(BundleError, match=problem) as err:
        CharTokenizer.from_dir(folder)
    assert err.value.path == str(folder / "tokenizer_config.json")


def test_special_token_not_in_vocab(tmp_path: Path) -> None:
    folder = write_folder(tmp_path)
    (folder / "special_tokens_map.json").write_text(json.dumps({"unk_token": "<unk>"}), "utf-8")
    with pytest.raises(BundleError, match="special tokens missing: <unk>") as err:
        CharTokenizer.from_dir(folder)
    assert err.value.path == str(folder / "vocab.txt")
