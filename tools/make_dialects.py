"""The first speaker of a random-weight bundle, exported as the other exporters write voices.

    python -m tools.make_dialects --preset tiny [--out DIR] [--seed N]

Written (the same weights as the bundle's own export of that speaker, from the same seed):
``DIR/hayakoe/onnx/speakers/<speaker>/`` (hayakoe's current exporter),
``DIR/sbv2/onnx/speakers/<speaker>/`` (Style-Bert-VITS2's ONNX export beside its config and
style vectors) and ``DIR/<speaker>.aivmx`` (that graph with the AIVM metadata, as AivisHub
publishes voices). Besides, ``DIR/<preset>-duo.aivmx``: a random voice of two speakers
(``DUO_SPEAKERS``), the rare multi-speaker AIVMX. The engine's tests load each and compare
it with the bundle (tests/runtime/engine/test_dialects.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from .aivm import TEST_VOICE_ABOUT
from .bert_export import BERT_HIDDEN
from .export import export_speaker
from .make_bundle import DEFAULT_SEED
from .presets import PRESETS
from .random_voice import random_voice

DEFAULT_OUT = {"tiny": Path("tests/fixtures/dialects-tiny"), "full": Path(".cache/dialects-full")}
DUO_SPEAKERS = ("duo-a", "duo-b")  # spk2id order: sid 0 and 1


def duo_name(preset: str) -> str:
    """The two-speaker voice's model name (its AIVMX is ``<name>.aivmx``)."""
    return f"{preset}-duo"


def build_dialects(out: Path, preset: str, seed: int = DEFAULT_SEED) -> Path:
    """Write the dialects of ``preset``'s first speaker into ``out`` (replaced as a whole)."""
    voices = PRESETS[preset]
    speaker = voices.speakers[0]
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory(prefix="random-voices-") as scratch:
        voice = random_voice(voices, speaker, BERT_HIDDEN[preset], seed)
        model_dir = voice.write_model_folder(Path(scratch) / speaker)
        for form in ("hayakoe", "sbv2"):
            export_speaker(model_dir, out / form, name=speaker, progress=False, form=form)
        export_speaker(
            model_dir, out, name=speaker, progress=False, form="aivmx", about=TEST_VOICE_ABOUT
        )
        duo = duo_name(preset)
        voice = random_voice(voices, duo, BERT_HIDDEN[preset], seed, speakers=DUO_SPEAKERS)
        model_dir = voice.write_model_folder(Path(scratch) / duo)
        export_speaker(
            model_dir, out, name=duo, progress=False, form="aivmx", about=TEST_VOICE_ABOUT
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.make_dialects",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--out", type=Path, help="folder (default: per preset, see above)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    torch.set_flush_denormal(True)
    print(build_dialects(args.out or DEFAULT_OUT[args.preset], args.preset, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
