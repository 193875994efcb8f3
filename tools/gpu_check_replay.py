"""OpenJTalk's answers for tools/gpu_check, recorded once and replayed where pyopenjtalk is missing.

The lent GPU machines have torch and onnxruntime but no pyopenjtalk-plus, which with its Sudachi
dictionary is over 300 MB installed: more than one call there may carry (64 MiB). gpu_check
speaks a fixed set of texts, so the few OpenJTalk calls they make are recorded here
(``python -m tools.gpu_check --record-openjtalk``, committed as gpu_check_openjtalk.json) and
answered by a stand-in ``pyopenjtalk`` module there. The rest of the text front end (normalising,
splitting, phones, tones, word2ph) runs as usual.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

RECORDING = Path(__file__).with_name("gpu_check_openjtalk.json")
REPLAYED = ("run_frontend", "make_label", "g2p")  # every pyopenjtalk function the engine calls
RECORD_COMMAND = "python -m tools.gpu_check --record-openjtalk"

Answers = dict[str, dict[str, Any]]  # function name -> call key -> answer


class ReplayError(Exception):
    """A call that was not recorded (the texts or the front end changed since)."""


def call_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A short, stable key for one call (make_label's argument is a long feature list)."""
    text = json.dumps([args, kwargs], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@contextmanager
def recording(module: ModuleType, path: Path = RECORDING) -> Iterator[Answers]:
    """Record the answers of ``module``'s REPLAYED functions while inside; write them on exit."""
    answers: Answers = {name: {} for name in REPLAYED}
    originals = {name: getattr(module, name) for name in REPLAYED}
    for name, function in originals.items():
        setattr(module, name, _recorder(function, answers[name]))
    try:
        yield answers
    finally:
        for name, function in originals.items():
            setattr(module, name, function)
    path.write_text(json.dumps(answers, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def install_replay(path: Path = RECORDING) -> ModuleType:
    """A stand-in ``pyopenjtalk`` answering from ``path``; calls not recorded raise ReplayError."""
    answers: Answers = json.loads(path.read_text(encoding="utf-8"))
    module = ModuleType("pyopenjtalk", "OpenJTalk answers replayed by tools/gpu_check_replay.py")
    for name in REPLAYED:
        setattr(module, name, _replayer(name, answers.get(name, {})))
    module.replayed_from = str(path)  # type: ignore[attr-defined]
    sys.modules["pyopenjtalk"] = module
    return module


def is_replay(module: ModuleType) -> bool:
    return hasattr(module, "replayed_from")


def _recorder(function: Callable[..., Any], into: dict[str, Any]) -> Callable[..., Any]:
    def recorded(*args: Any, **kwargs: Any) -> Any:
        answer = function(*args, **kwargs)
        into[call_key(args, kwargs)] = answer
        return answer

    return recorded


def _replayer(name: str, answers: dict[str, Any]) -> Callable[..., Any]:
    def replayed(*args: Any, **kwargs: Any) -> Any:
        key = call_key(args, kwargs)
        if key not in answers:
            shown = ", ".join(repr(arg)[:40] for arg in args)
            raise ReplayError(
                f"OpenJTalk {name}({shown}) was not recorded: run `{RECORD_COMMAND}` where "
                "pyopenjtalk is installed"
            )
        return answers[key]

    return replayed
