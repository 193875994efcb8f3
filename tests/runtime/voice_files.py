"""Voices as the real tools write them (tests/fixtures/dialects-tiny, built by
``python -m tools.make_dialects --preset tiny`` from the random voice of the tiny bundle's tiny-a),
as users lay them out, and broken the ways a user's file can be: shared by the engine, CLI,
server and Home Assistant tests, so that each refuses the same files with the same line.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from custom_components.yomiage.engine.onnx import wire

from .conftest import FIXTURES

DIALECTS = FIXTURES / "dialects-tiny"
SPEAKER = "tiny-a"
SPEAKER_DIR = Path("onnx") / "speakers" / SPEAKER
# Style-Bert-VITS2's converter: the speaker folder a user makes of its output.
SBV2_SPEAKER = DIALECTS / "sbv2" / SPEAKER_DIR
AIVMX = DIALECTS / f"{SPEAKER}.aivmx"
# One AIVMX file holding two speakers (a multi-speaker model), each with every style.
DUO_AIVMX = DIALECTS / "tiny-duo.aivmx"
DUO_SPEAKERS = ("duo-a", "duo-b")  # its spk2id order: sid 0 and 1


def bundle_with(tiny_bundle: Path, root: Path, speaker_files: dict[str, Path]) -> Path:
    """A bundle of the tiny bundle's BERT and one speaker ``SPEAKER`` made of ``speaker_files``
    (file name in the speaker folder -> the file to copy there)."""
    shutil.copytree(tiny_bundle / "bert", root / "bert")
    shutil.copytree(tiny_bundle / "onnx" / "bert", root / "onnx" / "bert")
    folder = root / SPEAKER_DIR
    folder.mkdir(parents=True)
    for name, source in speaker_files.items():
        shutil.copyfile(source, folder / name)
    return root


def sbv2_bundle(tiny_bundle: Path, root: Path) -> Path:
    """Style-Bert-VITS2's converter's graph as ``synthesizer.onnx`` beside the model's config
    and style vectors (no duration graph comes with it)."""
    return bundle_with(tiny_bundle, root, {p.name: p for p in SBV2_SPEAKER.iterdir()})


def hayakoe_bundle(tiny_bundle: Path, root: Path) -> Path:
    folder = DIALECTS / "hayakoe" / SPEAKER_DIR
    return bundle_with(tiny_bundle, root, {p.name: p for p in folder.iterdir()})


def aivmx_folder(tiny_bundle: Path, root: Path, *files: Path) -> Path:
    """``root/voices`` holds AIVMX files alone (tiny-a's by default); ``root/official`` is a
    bundle beside it, whose language model they take."""
    shutil.copytree(tiny_bundle, root / "official")
    (root / "voices").mkdir()
    for source in files or (AIVMX,):
        shutil.copyfile(source, root / "voices" / source.name)
    return root / "voices"


# -- broken the ways a user's file can be ------------------------------------------------------
def redeclared(source: Path, target: Path, edit: Callable[[str], bytes | None | bool]) -> None:
    """``source`` with each input/output declaration given to ``edit`` by name: True keeps it,
    False drops it, bytes (a ValueInfoProto) replace it."""
    model_fields, graph_field = wire.model_graph(memoryview(source.read_bytes()))
    graph = wire.Chunks()
    for item in wire.fields(wire.as_message(graph_field.value)):
        if item.number not in (wire.GRAPH_INPUT, wire.GRAPH_OUTPUT):
            graph.add(item.raw)
            continue
        verdict = edit(wire.value_info_rank(item)[0])
        if verdict is True:
            graph.add(item.raw)
        elif isinstance(verdict, bytes):
            graph.add(wire.bytes_field(item.number, verdict))
    target.write_bytes(b"".join(wire.with_graph(model_fields, graph_field, graph).parts))


def _graph_edit(edit: Callable[[str], bytes | None | bool]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        graph = folder / "synthesizer.onnx"
        redeclared(SBV2_SPEAKER / "synthesizer.onnx", graph, edit)

    return apply


def _wider_bert(name: str) -> bytes | bool:
    """A voice made for a 1024-wide BERT (every published SBV2 voice) beside the tiny one."""
    if name != "bert":
        return True
    return wire.value_info("bert", wire.TENSOR_FLOAT, ["batch_size", 1024, "x_tst_max_length"])


def _narrow_style_vectors(folder: Path) -> None:
    vectors = np.load(folder / "style_vectors.npy")
    np.save(folder / "style_vectors.npy", vectors[:, :128])


def _speaker_beyond_the_table(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["data"]["spk2id"] = {SPEAKER: 4}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")


@dataclass(frozen=True)
class BrokenVoice:
    """A speaker folder in the converter's form with one defect, and the line that names it."""

    break_folder: Callable[[Path], None]
    message: str  # a regular expression the load error's one line matches

    def bundle(self, tiny_bundle: Path, root: Path) -> Path:
        made = sbv2_bundle(tiny_bundle, root)
        self.break_folder(made / SPEAKER_DIR)
        return made


BROKEN: dict[str, BrokenVoice] = {
    "bert-width": BrokenVoice(
        _graph_edit(_wider_bert),
        r"synthesizer\.onnx: input 'bert' takes 1024-wide features but the language model "
        r"\(onnx/bert/q8/bert_q8\.onnx\) gives 32",
    ),
    "style-width": BrokenVoice(
        _narrow_style_vectors,
        r"synthesizer\.onnx: input 'style_vec' takes 256-wide style vectors but "
        r"style_vectors\.npy holds 128-wide ones",
    ),
    "speaker-id": BrokenVoice(
        _speaker_beyond_the_table,
        r"synthesizer\.onnx: speaker id 4 is not in its speaker table \(ids 0 to 0\)",
    ),
    "missing-input": BrokenVoice(
        _graph_edit(lambda name: name != "sid"), r"synthesizer\.onnx: missing input 'sid'$"
    ),
    "no-audio-output": BrokenVoice(
        _graph_edit(lambda name: name != "output"), r"synthesizer\.onnx: no audio output"
    ),
}
