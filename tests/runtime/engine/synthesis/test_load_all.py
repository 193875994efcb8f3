"""``Engine.load_all`` maps the readings' dictionaries, so that no request pays for it: Sudachi's,
which pyopenjtalk-plus maps the first time a sentence holds a kanji of several readings (0.3 s
of a Pi 4B's CPU). A fresh process each: the dictionary is the process's once made."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

_PROBE = """
import json, sys
from custom_components.yomiage.engine import Engine, SynthesisOptions
import pyopenjtalk.utils  # its annotations read sudachipy's class: counted after
import sudachipy.dictionary as sudachi
made = []
real = sudachi.Dictionary
def counted(*args, **kwargs):
    made.append(len(made))
    return real(*args, **kwargs)
sudachi.Dictionary = counted
engine = Engine(sys.argv[1], device="cpu", threads=1)
if sys.argv[2] == "load_all":
    engine.load_all()
before = len(made)
for _ in engine.stream("夕方は風が強くなります。", SynthesisOptions()):
    pass
print(json.dumps({"at_load": before, "in_request": len(made) - before}))
"""


def _dictionaries_made(bundle: Path, step: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(bundle), step],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    made: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return made


def test_a_kanji_of_several_readings_maps_a_dictionary_in_the_first_request(
    tiny_bundle: Path,
) -> None:
    assert _dictionaries_made(tiny_bundle, "none") == {"at_load": 0, "in_request": 1}


def test_load_all_maps_it_before_any_request(tiny_bundle: Path) -> None:
    assert _dictionaries_made(tiny_bundle, "load_all") == {"at_load": 1, "in_request": 0}
