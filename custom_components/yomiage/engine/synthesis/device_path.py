"""Where BERT features travel between BERT and the synthesizer: two interchangeable paths.

``HostPath`` (CPU): BERT's batch comes back as numpy, is cut per sentence and spread over phones
with ``np.repeat``. ``DevicePath`` (CUDA): BERT's batch stays in device memory (IO binding); a
sentence is only a list of row numbers into it until a tiny graph gathers its rows over its phones
where the batch lies, and the synthesizer and duration predictor read that result in place. On
CUDA the features never cross PCIe; only phone ids go in and audio comes out.

Both paths take the same inputs and give the same audio: the device path is also run on the CPU
provider in the tests, bit for bit against the host path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from ..onnx.cuda_probe import CUDA_PROVIDER
from ..onnx.device_graphs import SPREAD_INPUTS, SPREAD_OUTPUT, spread_graph
from ..onnx.sessions import SessionFactory
from .bert import BertFeaturizer, join_char_features, spread_over_phones


@dataclass(frozen=True)
class DeviceFeatures:
    """One text's BERT features as rows of a batch that stays where BERT left it.

    ``rows`` int64 [tokens]: for each token ([CLS], characters, [SEP]), its row in the batch
    flattened to [sentences * T, hidden].
    """

    batch: ort.OrtValue  # float32 [sentences, T, hidden]
    rows: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.rows.shape[0])


CharFeatures = NDArray[np.float32] | DeviceFeatures  # float32 [len(text) + 2, hidden] on the host


class FeaturePath(Protocol):
    """What the engine does with BERT features, wherever they live."""

    def char_features(self, texts: Sequence[str]) -> list[CharFeatures]:
        """Features of each text ([CLS] + characters + [SEP]), from one BERT batch."""
        ...

    def join(self, per_sentence: Sequence[CharFeatures]) -> CharFeatures:
        """The features of the sentences' concatenated text (see ``join_char_features``)."""
        ...

    def per_phone(
        self, features: CharFeatures, word2ph: NDArray[np.int64]
    ) -> NDArray[np.float32] | ort.OrtValue:
        """The features a voice reads (``SentenceInput.bert``): each token's row repeated for
        its phones, where the path keeps them."""
        ...

    def close(self) -> None:
        """Release what the path holds beyond the BERT and voice sessions."""
        ...


class HostPath:
    """Features as numpy arrays in host memory (the CPU engine)."""

    def __init__(self, bert: BertFeaturizer) -> None:
        self._bert = bert

    def char_features(self, texts: Sequence[str]) -> list[CharFeatures]:
        return list(self._bert.char_features(texts))

    def join(self, per_sentence: Sequence[CharFeatures]) -> CharFeatures:
        return join_char_features([_on_host(features) for features in per_sentence])

    def per_phone(
        self, features: CharFeatures, word2ph: NDArray[np.int64]
    ) -> NDArray[np.float32] | ort.OrtValue:
        return spread_over_phones(_on_host(features), word2ph)

    def close(self) -> None:
        """Nothing to release: the features are numpy arrays."""


class DevicePath:
    """Features left in the memory of the device the sessions run on (the CUDA engine).

    The memory is the device the sessions really got: "cuda", or "cpu" when onnxruntime fell
    back (a CPU-only build), so the same code runs, and is tested, on any machine.
    """

    def __init__(self, bert: BertFeaturizer, sessions: SessionFactory) -> None:
        self._bert = bert
        self._spread = ort.InferenceSession(
            spread_graph(), sessions.options(), providers=sessions.providers
        )
        self.memory = "cuda" if CUDA_PROVIDER in self._spread.get_providers() else "cpu"

    def char_features(self, texts: Sequence[str]) -> list[CharFeatures]:
        if not texts:
            return []
        batch, lengths = self._bert.resident_batch(texts, self._bert.device)
        if self._bert.device != self.memory:  # INT8 BERT on the host: one upload per request
            batch = ort.OrtValue.ortvalue_from_numpy(batch.numpy(), self.memory, 0)
        tokens = int(batch.shape()[1])
        return [
            DeviceFeatures(batch, np.arange(length, dtype=np.int64) + row * tokens)
            for row, length in enumerate(lengths)
        ]

    def join(self, per_sentence: Sequence[CharFeatures]) -> CharFeatures:
        parts = [_on_device(features) for features in per_sentence]
        if any(part.batch is not parts[0].batch for part in parts):
            return self._join_batches(parts)
        rows = [parts[0].rows[:1], *(part.rows[1:-1] for part in parts), parts[-1].rows[-1:]]
        return DeviceFeatures(parts[0].batch, np.concatenate(rows))

    def _join_batches(self, parts: list[DeviceFeatures]) -> DeviceFeatures:
        """Features of several BERT batches joined through the host (the first sentence has a
        batch of its own when streaming): one copy each way, once per request."""
        joined = join_char_features([_read_back(part) for part in parts])
        batch = ort.OrtValue.ortvalue_from_numpy(joined[np.newaxis], self.memory, 0)
        return DeviceFeatures(batch, np.arange(joined.shape[0], dtype=np.int64))

    def close(self) -> None:
        del self._spread

    def per_phone(
        self, features: CharFeatures, word2ph: NDArray[np.int64]
    ) -> NDArray[np.float32] | ort.OrtValue:
        """float32 [1, hidden, phones] in device memory, each token's row repeated per phone."""
        features = _on_device(features)
        if word2ph.shape[0] != len(features):
            raise ValueError(f"word2ph has {word2ph.shape[0]} entries for {len(features)} tokens")
        hidden, index = SPREAD_INPUTS
        binding = self._spread.io_binding()
        binding.bind_ortvalue_input(hidden, features.batch)
        binding.bind_cpu_input(index, np.repeat(features.rows, word2ph))
        binding.bind_output(SPREAD_OUTPUT, self.memory)
        self._spread.run_with_iobinding(binding)
        return binding.get_outputs()[0]


def _on_host(features: CharFeatures) -> NDArray[np.float32]:
    if isinstance(features, DeviceFeatures):
        raise TypeError("device-resident features given to the host path")
    return features


def _read_back(features: DeviceFeatures) -> NDArray[np.float32]:
    """The rows of one text, float32 [tokens, hidden] in host memory."""
    batch = np.asarray(features.batch.numpy(), dtype=np.float32)
    rows: NDArray[np.float32] = batch.reshape(-1, batch.shape[-1])[features.rows]
    return rows


def _on_device(features: CharFeatures) -> DeviceFeatures:
    if not isinstance(features, DeviceFeatures):
        raise TypeError("host features given to the device path")
    return features
