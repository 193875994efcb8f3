"""End to end: the tiny bundle, served in Hub form, fetched and opened by the engine."""

from __future__ import annotations

from pathlib import Path

from custom_components.yomiage.engine.bundle import Bundle
from custom_components.yomiage.engine.hub.download import fetch_bundle, list_offer, local_bundle

from ...fakehub import FakeHub, FakeRepo
from .test_download import hub_settings, on_disk

__all__ = ["hub_settings"]  # the autouse fixture, shared with the API tests


def test_the_tiny_bundle_round_trips_through_the_hub(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = FakeRepo.from_folder(tiny_bundle)
    repo.files["pytorch/README.md"] = b"GPU users only: not part of an ONNX bundle"
    with FakeHub({"tiny/voices": repo}) as hub:
        offer = list_offer("tiny/voices", endpoint=hub.url)
        first = offer.speakers[0]
        root = fetch_bundle(tmp_path, "tiny/voices", speakers=[first], endpoint=hub.url)

    assert local_bundle(root, [first]) == root
    # Only the layout's folders travel: the tokenizer, the Q8 BERT and the chosen speaker (not the
    # FP32 BERT, other speakers, or files at the repo root such as build-info.json).
    wanted = ("bert/tokenizer/", "onnx/bert/q8/", f"onnx/speakers/{first}/")
    expected = {
        path: data for path, data in on_disk(tiny_bundle).items() if path.startswith(wanted)
    }
    assert on_disk(root) == expected
    assert list(Bundle.open(root).speakers) == [first]
    from custom_components.yomiage.engine.synthesis.engine import (
        Engine,  # loads onnxruntime sessions
    )

    engine = Engine(root, device="cpu", threads=1)
    try:
        assert list(engine.voices) == [first]
    finally:
        engine.close()
