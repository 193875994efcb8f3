"""BERT: all sentences of a request in one padded batch, features spread over phones."""

from __future__ import annotations

import numpy as np

from custom_components.yomiage.engine.synthesis.bert import join_char_features, spread_over_phones
from custom_components.yomiage.engine.synthesis.engine import Engine

SENTENCES = ["はい.", "今日はいい天気ですね.", "明日の朝七時に起こしてください!"]


def test_batched_features_equal_per_sentence_features(engine: Engine) -> None:
    batched = engine._bert.char_features(SENTENCES)
    for text, features in zip(SENTENCES, batched, strict=True):
        (alone,) = engine._bert.char_features([text])
        assert features.shape == alone.shape == (len(text) + 2, engine._bert.hidden_size)
        # Dynamic INT8 picks its activation scale per run, and padding changes the batch's range,
        # so batched and single runs agree to quantisation noise, not bit for bit.
        scale = np.abs(alone).max()
        assert np.abs(features - alone).max() <= 0.05 * scale
        cosine = (features * alone).sum() / np.linalg.norm(features) / np.linalg.norm(alone)
        assert cosine > 0.999


def test_features_are_spread_by_word2ph() -> None:
    chars = np.arange(12, dtype=np.float32).reshape(4, 3)  # [CLS], two characters, [SEP]
    spread = spread_over_phones(chars, np.array([3, 2, 4, 1]))
    assert spread.shape == (3, 10)
    np.testing.assert_array_equal(spread[:, 3], chars[1])
    np.testing.assert_array_equal(spread[:, 5:9], np.repeat(chars[2][:, None], 4, axis=1))


def test_whole_text_features_join_sentence_rows() -> None:
    first = np.full((4, 2), 1.0, np.float32)  # [CLS] a b [SEP]
    second = np.full((3, 2), 2.0, np.float32)  # [CLS] c [SEP]
    joined = join_char_features([first, second])
    assert joined.shape == (5, 2)  # [CLS] a b c [SEP]
    np.testing.assert_array_equal(joined[:, 0], [1, 1, 1, 2, 2])
