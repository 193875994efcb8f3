"""Speaks the check texts with every voice of a bundle and writes the audio and the readings to
standard output as one .npz (test_aarch64.py runs it on this machine and inside the emulated
arm64 rootfs, which sees only this checkout, then compares).

    python speak.py BUNDLE [--published] > out.npz

``--published``: the graphs as published (no graph cache, so no rewrite and no decoder split).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path

TEXTS = (
    "今日は12月2日、最高気温は12.5℃の予報です。",
    "リビングの照明をつけました！ほかに何かありますか？",
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--published", action="store_true")
    args = parser.parse_args()
    if args.published:
        os.environ["YOMIAGE_GRAPH_CACHE"] = "0"  # read when the engine's sessions are made

    import numpy as np
    from yomiage_engine import Engine, SynthesisOptions

    with tempfile.TemporaryDirectory() as cache:
        engine = Engine(args.bundle, device="cpu", threads=1, graph_cache=Path(cache))
        try:
            audio = {
                f"{speaker}/{style}|{index}": engine.synthesize(
                    text,
                    SynthesisOptions(voice=f"{speaker}/{style}", noise=0.0, noise_w=0.0),
                ).audio
                for speaker, styles in engine.voices.items()
                for style in styles
                for index, text in enumerate(TEXTS)
            }
            # Streamed: the first sentence decoded in pieces (an aarch64 decoder cuts each piece
            # to its span, passes/vits_decoder_span.py; an x86 one does not).
            voice = next(f"{speaker}/{styles[0]}" for speaker, styles in engine.voices.items())
            options = SynthesisOptions(voice=voice, noise=0.0, noise_w=0.0, smooth_start=False)
            chunks = [chunk.pcm for chunk in engine.stream(TEXTS[0], options)]
            audio[f"{voice}|streamed"] = np.concatenate(chunks)
            readings = [engine.reading(text) for text in TEXTS]
        finally:
            engine.close()
    packed = io.BytesIO()
    np.savez(packed, readings=np.array(json.dumps(readings)), **audio)
    sys.stdout.buffer.write(packed.getvalue())


if __name__ == "__main__":
    main()
