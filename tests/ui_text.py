"""Reading what Japanese texts show a user: Latin words in them are names, never English prose.

Shared by the check of the shipped translations and the browser test of the frontend.
"""

from __future__ import annotations

import re

# Names, units and identifiers that Japanese texts write in Latin letters, as Home Assistant's
# own Japanese translations do: products, formats, option and action names.
LATIN_NAMES = frozenset(
    """AivisHub Assist Home Assistant BERT CPU CUDA GPU NVIDIA Google Cast Sonos EBU R LUFS dB
    dBTP Hugging Face Hub huggingface.co ID IP TCP MB ms OS Raspberry Pi OpenJTalk SDP noise w
    Supervisor Wyoming Yomiage yomiage aivmx assist satellite.announce tts.speak
    yomiage.prepare speed voice share media models onnxruntime onnxruntime-gpu
    pyopenjtalk-plus Style-Bert-VITS2 JP-Extra OK UUID AIVMX GB""".split()  # noqa: SIM905 (a word list)
)
_NOT_PROSE = re.compile(r"`[^`]*`|\{\w+\}|https?://\S+|\S*/\S*")
# A voice's speaker name as a bundle spells it (tiny-a, jvnv-F1-jp): data, not words.
_IDENTIFIER = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+")


def english_words(text: str) -> set[str]:
    """Latin words of ``text`` that are not names: English left in a Japanese text."""
    plain = _IDENTIFIER.sub("", _NOT_PROSE.sub("", text))
    return set(re.findall(r"[A-Za-z][A-Za-z.\-]*[A-Za-z]|[A-Za-z]", plain)) - LATIN_NAMES
