"""Home Assistant may ask for several messages at once: one engine serves them all."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from custom_components.yomiage.engine.engine import Engine

from .common import QUIET

TEXTS = ["おはようございます。", "玄関の鍵が開いています。閉めてください。"]


def test_eight_threads_four_requests_each_on_two_speakers(engine: Engine) -> None:
    speakers = list(engine.voices)
    jobs = [(TEXTS[i % 2], QUIET.with_changes(voice=speakers[(i // 2) % 2])) for i in range(8 * 4)]
    expected = {
        (text, options.voice): engine.synthesize(text, options).audio for text, options in jobs[:4]
    }
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: engine.synthesize(*job).audio, jobs))
    assert len(results) == 32
    for (text, options), audio in zip(jobs, results, strict=True):
        np.testing.assert_array_equal(audio, expected[(text, options.voice)])
