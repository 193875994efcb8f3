"""Cutting a Hub listing into bundle parts (no network)."""

from __future__ import annotations

import pytest

from custom_components.yomiage.engine.hub.layout import LayoutError, RemoteFile, parse_layout


def listing(*paths: str) -> list[RemoteFile]:
    return [RemoteFile(path=p, size=len(p), git_oid=f"oid-{p}", sha256=None) for p in paths]


COMPLETE = (
    "bert/tokenizer/vocab.txt",
    "bert/tokenizer/tokenizer_config.json",
    "onnx/bert/q8/bert_q8.onnx",
    "onnx/bert/fp32/bert.onnx",
    "onnx/speakers/b/config.json",
    "onnx/speakers/b/style_vectors.npy",
    "onnx/speakers/b/synthesizer.onnx",
    "onnx/speakers/a/config.json",
    "onnx/speakers/a/style_vectors.npy",
    "onnx/speakers/a/synthesizer.onnx",
    "onnx/speakers/a/duration_predictor.onnx",
    "onnx/speakers/a/extra/notes.txt",
    "onnx/speakers/README.md",
    "pytorch/speakers/a/model.safetensors",
)


def test_parts_hold_their_folders_files_only() -> None:
    layout = parse_layout(listing(*COMPLETE))

    tokenizer, bert = layout.shared
    assert [f.path for f in tokenizer.files] == [
        "bert/tokenizer/tokenizer_config.json",
        "bert/tokenizer/vocab.txt",
    ]
    assert [f.path for f in bert.files] == ["onnx/bert/q8/bert_q8.onnx"]
    assert list(layout.speakers) == ["a", "b"]
    speaker_a = layout.speakers["a"]
    assert len(speaker_a.files) == 5  # nested files travel with their speaker
    assert speaker_a.relative(speaker_a.files[-1]) == "synthesizer.onnx"
    assert speaker_a.size == sum(len(f.path) for f in speaker_a.files)


def test_parts_for_chosen_speakers() -> None:
    layout = parse_layout(listing(*COMPLETE))
    prefixes = [part.prefix for part in layout.parts_for(["b"])]
    assert prefixes == ["bert/tokenizer", "onnx/bert/q8", "onnx/speakers/b"]


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("bert/tokenizer/vocab.txt", "missing bert/tokenizer/vocab.txt"),
        ("onnx/bert/q8/bert_q8.onnx", "missing onnx/bert/q8/bert_q8.onnx"),
        ("onnx/speakers/b/style_vectors.npy", "missing onnx/speakers/b/style_vectors.npy"),
    ],
)
def test_a_missing_required_file_is_named(missing: str, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        parse_layout(listing(*(p for p in COMPLETE if p != missing)))


def test_no_speaker_folders() -> None:
    with pytest.raises(LayoutError, match="no speakers"):
        parse_layout(listing(*(p for p in COMPLETE if not p.startswith("onnx/speakers/"))))


def test_content_id_prefers_the_lfs_hash() -> None:
    lfs = RemoteFile(path="x.onnx", size=1, git_oid="git", sha256="lfs")
    plain = RemoteFile(path="x.json", size=1, git_oid="git", sha256=None)
    assert (lfs.content_id, plain.content_id) == ("lfs", "git")
