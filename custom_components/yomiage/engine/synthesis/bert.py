"""BERT features: one padded batch for all sentences of a request, then spread over phones."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from ..errors import BundleError
from ..onnx.cuda_probe import CUDA_PROVIDER
from ..onnx.passes.registry import GraphKind
from ..onnx.sessions import SessionFactory
from .tokenizer import CharTokenizer


class BertFeaturizer:
    """DeBERTa character features (``hidden_states[-3]``), shared by every speaker."""

    def __init__(self, graph: Path, tokenizer_dir: Path, sessions: SessionFactory) -> None:
        self._graph = graph
        self._tokenizer = CharTokenizer.from_dir(tokenizer_dir)
        self._session = sessions.create(graph, GraphKind.LANGUAGE_MODEL)
        self._output_name = self._session.get_outputs()[0].name
        self.hidden_size = _feature_size(self._session, graph)
        # Where the session really runs ("cpu" when onnxruntime fell back from CUDA).
        self.device = "cuda" if CUDA_PROVIDER in self._session.get_providers() else "cpu"

    def char_features(self, texts: Sequence[str]) -> list[NDArray[np.float32]]:
        """Per text: features of [CLS] + each character + [SEP], float32 [len(text) + 2, hidden]."""
        if not texts:
            return []
        input_ids, attention_mask = self._tokenizer.encode_batch(list(texts))
        (hidden,) = self._session.run(
            [self._output_name], {"input_ids": input_ids, "attention_mask": attention_mask}
        )
        lengths = self._checked_lengths(texts, attention_mask)
        return [
            np.asarray(hidden[row, :length], dtype=np.float32) for row, length in enumerate(lengths)
        ]

    def resident_batch(
        self, texts: Sequence[str], device: str
    ) -> tuple[ort.OrtValue, NDArray[np.int64]]:
        """The padded batch output float32 [len(texts), T, hidden], left in ``device`` memory
        ("cuda" or "cpu"), and each text's token count (len(text) + 2)."""
        input_ids, attention_mask = self._tokenizer.encode_batch(list(texts))
        lengths = self._checked_lengths(texts, attention_mask)
        binding = self._session.io_binding()
        binding.bind_cpu_input("input_ids", input_ids)
        binding.bind_cpu_input("attention_mask", attention_mask)
        binding.bind_output(self._output_name, device)
        self._session.run_with_iobinding(binding)
        return binding.get_outputs()[0], lengths

    def _checked_lengths(
        self, texts: Sequence[str], attention_mask: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        lengths: NDArray[np.int64] = attention_mask.sum(axis=1)
        for text, length in zip(texts, lengths, strict=True):
            if length != len(text) + 2:
                raise BundleError(
                    str(self._graph.parent),
                    f"tokenizer gave {length - 2} tokens for {len(text)} characters",
                )
        return lengths

    def close(self) -> None:
        del self._session


def spread_over_phones(
    char_features: NDArray[np.float32], word2ph: NDArray[np.int64]
) -> NDArray[np.float32]:
    """[len(text) + 2, hidden] -> [hidden, phones]: each character's row repeated for its phones."""
    return np.ascontiguousarray(np.repeat(char_features, word2ph, axis=0).T)


def join_char_features(per_sentence: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
    """Character features of a whole text from those of its sentences (no second BERT run).

    Keeps the first sentence's [CLS] row, every sentence's character rows, and the last [SEP] row,
    so the result lines up with the whole text's ``word2ph``.
    """
    rows = [per_sentence[0][:1]]
    rows.extend(features[1:-1] for features in per_sentence)
    rows.append(per_sentence[-1][-1:])
    return np.concatenate(rows, axis=0)


def _feature_size(session: object, graph: Path) -> int:
    shape = session.get_outputs()[0].shape  # type: ignore[attr-defined]
    size = shape[-1] if shape else None
    if not isinstance(size, int) or size <= 0:
        raise BundleError(str(graph), f"output has no fixed feature size (shape {shape})")
    return size
