"""Build a complete random-weight bundle (BERT + speakers) for tests and benchmarks.

    python -m tools.make_bundle --preset tiny|full [--out DIR] [--seed N]

Every speaker goes the way a real voice does: reference model -> SBV2 model folder (config.json,
safetensors with weight-norm pairs, style_vectors.npy) -> ``tools.export``. The same preset and
seed give the same weights, hence graphs that compute the same outputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from .bert_export import BERT_HIDDEN, write_bert
from .export import export_speaker
from .presets import PRESETS
from .random_voice import random_voice

DEFAULT_OUT = {"tiny": Path("tests/fixtures/bundle-tiny"), "full": Path(".cache/bundle-full")}
DEFAULT_SEED = 0
BUILD_INFO = "build-info.json"
# The code that decides what a bundle contains: a cached bundle built by other code is rebuilt.
FINGERPRINTED = (
    "model",
    "export.py",
    "random_voice.py",
    "presets.py",
    "bert_export.py",
    "make_bundle.py",
)
BUNDLE_ENTRIES = frozenset({"bert", "onnx", BUILD_INFO})


class OutputFolderError(Exception):
    """The output folder holds something other than a bundle; nothing is overwritten."""


def build_bundle(out: Path, preset: str, seed: int = DEFAULT_SEED, progress: bool = True) -> Path:
    """Write the whole bundle of ``preset`` into ``out`` (replacing an earlier bundle there)."""
    voices = PRESETS[preset]
    _clear_bundle(out)
    write_bert(out, preset, seed)
    with tempfile.TemporaryDirectory(prefix="random-voices-") as scratch:
        for speaker in voices.speakers:
            voice = random_voice(voices, speaker, BERT_HIDDEN[preset], seed)
            model_dir = voice.write_model_folder(Path(scratch) / speaker)
            export_speaker(model_dir, out, name=speaker, progress=progress)
    (out / BUILD_INFO).write_text(json.dumps(_build_info(preset, seed), indent=2) + "\n")
    return out


def ensure_bundle(preset: str, out: Path | None = None, seed: int = DEFAULT_SEED) -> Path:
    """The bundle at ``out`` (default: the preset's cache folder), built only if missing/stale."""
    out = out or DEFAULT_OUT[preset]
    info = out / BUILD_INFO
    if info.is_file() and json.loads(info.read_text()) == _build_info(preset, seed):
        return out
    return build_bundle(out, preset, seed)


def _build_info(preset: str, seed: int) -> dict[str, object]:
    return {
        "preset": preset,
        "seed": seed,
        "command": f"python -m tools.make_bundle --preset {preset} --seed {seed}",
        "torch": torch.__version__.split("+")[0],
        "sources": sources_fingerprint(),
    }


def sources_fingerprint() -> str:
    """A short hash of the builder's source files (tools/model, export, random voices, BERT)."""
    tools_dir = Path(__file__).parent
    files = sorted(
        path
        for entry in FINGERPRINTED
        for path in (
            (tools_dir / entry).rglob("*.py")
            if (tools_dir / entry).is_dir()
            else [tools_dir / entry]
        )
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(tools_dir).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _clear_bundle(out: Path) -> None:
    if not out.exists():
        out.mkdir(parents=True)
        return
    foreign = sorted(p.name for p in out.iterdir() if p.name not in BUNDLE_ENTRIES)
    if foreign:
        raise OutputFolderError(
            f"{out}: holds {', '.join(foreign[:3])}, not only a bundle; refusing to overwrite"
        )
    for entry in BUNDLE_ENTRIES:
        path = out / entry
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.make_bundle",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument(
        "--out",
        type=Path,
        help="bundle folder (default: tiny -> "
        f"{DEFAULT_OUT['tiny']}, full -> {DEFAULT_OUT['full']})",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    torch.set_flush_denormal(True)
    try:
        out = build_bundle(args.out or DEFAULT_OUT[args.preset], args.preset, args.seed)
    except OutputFolderError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
