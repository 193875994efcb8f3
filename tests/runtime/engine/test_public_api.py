"""The engine's one public import: every name it offers is the object its sub-package defines,
and importing it for errors, options or WAV framing loads neither numpy nor onnxruntime (the
integration's tts platform imports it on installs that only reach a Yomiage server)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import custom_components.yomiage.engine as api


@pytest.mark.parametrize("name", api.__all__)
def test_every_public_name_is_its_home_modules_object(name: str) -> None:
    home = importlib.import_module(api._HOMES[name], api.__name__)
    assert getattr(api, name) is getattr(home, name)


def test_the_public_names_and_their_homes_agree() -> None:
    assert sorted(api.__all__) == sorted(api._HOMES)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Voice'"):
        _ = api.Voice  # type: ignore[attr-defined]


def test_errors_and_options_import_without_numpy_or_onnxruntime() -> None:
    probe = (
        "import sys\n"
        "from yomiage_engine import SynthesisOptions, YomiageError\n"
        "from yomiage_engine.audio.wav import wav_file\n"
        "SynthesisOptions().with_values({'volume': '-3'})\n"
        "print(sorted(m for m in ('numpy', 'onnxruntime') if m in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
