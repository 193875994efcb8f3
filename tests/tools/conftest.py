"""Shared fixtures of the tools suite (reference model, exporter, bundle builder)."""

from __future__ import annotations

import sys
from pathlib import Path

import onnxruntime as ort
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `pytest` run without `python -m`
    sys.path.insert(0, str(REPO_ROOT))

from tools.bert_export import BERT_HIDDEN  # noqa: E402
from tools.presets import PRESETS  # noqa: E402
from tools.random_voice import RandomVoice, random_voice  # noqa: E402

TINY_BUNDLE = REPO_ROOT / "tests" / "fixtures" / "bundle-tiny"
TINY_SEED = 0  # the seed the committed fixture was built with (see its build-info.json)

torch.set_flush_denormal(True)  # random flows produce denormals, which slow torch down a lot
# Tiny models gain nothing from a second thread, and on a busy machine OpenMP's spinning threads
# make them several times slower.
torch.set_num_threads(1)


def session(path: Path) -> ort.InferenceSession:
    """A single-threaded CPU session (see above)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="session")
def tiny_voices() -> dict[str, RandomVoice]:
    """The reference models behind the committed tiny bundle, rebuilt from the seed."""
    preset = PRESETS["tiny"]
    return {
        speaker: random_voice(preset, speaker, BERT_HIDDEN["tiny"], TINY_SEED)
        for speaker in preset.speakers
    }


@pytest.fixture(scope="session")
def tiny_model_dir(
    tiny_voices: dict[str, RandomVoice], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """An SBV2 model folder (config.json, safetensors, style vectors) of speaker tiny-a."""
    return tiny_voices["tiny-a"].write_model_folder(tmp_path_factory.mktemp("models") / "tiny-a")
