"""Smooth start on a box slower than real time: a message known whole opens with just enough
silence that it then plays without a wait; text arriving in pieces keeps its early first audio.

The box is modelled (box.py): each decoder run costs ``SLOWER`` times the audio it makes, on a
clock the test holds, as on a Raspberry Pi. So the engine's decisions (the lead, each pause)
and what the player hears are exact, however busy the machine running the test. The module's
tests share one engine on one box, not the session's engine (what it learns of the box must
not reach other tests); a test that changes the box puts it back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from custom_components.yomiage.engine import ArrivingText
from custom_components.yomiage.engine.synthesis.engine import Engine
from custom_components.yomiage.engine.synthesis.smooth_start import LEAD_MARGIN

from ..box import SlowBox
from ..common import QUIET, SAMPLE_RATE, THREE_SENTENCES
from ..playback import Heard, heard, listen

SLOWER = 1.3  # seconds of decoding per second of audio made
WARM_UP = "おはようございます。七時です。もうすぐ出かけましょう。"


@pytest.fixture(scope="module")
def box() -> SlowBox:
    return SlowBox(SLOWER)


@pytest.fixture(scope="module")
def slow_engine(tiny_bundle: Path, box: SlowBox) -> Iterator[Engine]:
    """An engine on a box that decodes at 1/SLOWER of real time, having spoken once there."""
    engine = box.engine(tiny_bundle)
    engine.load_all()  # learns the box as loading does
    for _ in engine.stream(WARM_UP, QUIET):
        pass
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def smooth(slow_engine: Engine, box: SlowBox) -> Heard:
    return listen(lambda: slow_engine.stream(THREE_SENTENCES, QUIET), box.clock)


@pytest.fixture(scope="module")
def plain(slow_engine: Engine, box: SlowBox) -> Heard:
    options = QUIET.with_changes(smooth_start=False)
    return listen(lambda: slow_engine.stream(THREE_SENTENCES, options), box.clock)


def test_a_whole_message_opens_with_the_least_silence_that_leaves_no_wait(
    smooth: Heard, plain: Heard
) -> None:
    first = smooth.chunks[0]
    assert not np.any(first.pcm) and first.starts_sentence and not first.ends_sentence
    assert smooth.waits_s() == 0.0, f"lateness per chunk: {smooth.lateness_s()}"
    least = smooth.least_lead_s()
    assert least > 1.0  # the box is slow enough that a lead is needed at all
    # The plan's margin over the least, and no more (its frames are the pause pass's, within
    # a few per cent of the synthesizer's).
    assert least <= smooth.lead_s <= LEAD_MARGIN * 1.03 * least, (smooth.lead_s, least)
    # Without it the same message, on the same box, stops to wait.
    assert plain.waits_s() > 0.5
    assert plain.lead_s < 0.05


def test_the_speech_is_the_same_with_and_without_a_smooth_start(
    smooth: Heard, plain: Heard
) -> None:
    """A smooth start adds silence only: the lead, and a pause lengthened where the box ran
    slower than it had learnt (a busy box may, mid-message). The speech is the same and no
    pause is shorter."""

    def speech(heard: Heard) -> NDArray[np.int16]:
        return np.concatenate(
            [c.pcm[round(c.pause_before_s * SAMPLE_RATE) :] for c in heard.chunks]
        )

    def pauses_s(heard: Heard) -> list[float]:
        """The silence before each sentence, however many chunks carried it."""
        pauses, pause = [], 0.0
        for chunk in heard.chunks:
            pause += chunk.pause_before_s
            if chunk.ends_sentence:
                pauses.append(pause)
                pause = 0.0
        return pauses

    np.testing.assert_array_equal(speech(smooth), speech(plain))
    smooth_pauses, plain_pauses = pauses_s(smooth), pauses_s(plain)
    assert len(smooth_pauses) == len(plain_pauses) == 3
    assert smooth_pauses[0] > plain_pauses[0] + 1.0  # the lead
    for lengthened, planned in zip(smooth_pauses[1:], plain_pauses[1:], strict=True):
        assert lengthened >= planned - 1 / SAMPLE_RATE
    assert [c.text for c in smooth.chunks if c.starts_sentence] == [
        c.text for c in plain.chunks if c.starts_sentence
    ]


def _arriving(*pieces: str) -> ArrivingText:
    arriving = ArrivingText()
    for piece in pieces:
        arriving.add(piece)
    arriving.finish()
    return arriving


def test_text_handed_over_whole_starts_smoothly_and_text_in_pieces_does_not(
    slow_engine: Engine, box: SlowBox, smooth: Heard
) -> None:
    """Home Assistant hands an announcement over as one piece then the end, an LLM's reply in
    many: only the first is known whole, the other keeps its early first audio."""
    whole = listen(
        lambda: slow_engine.stream_arriving(_arriving(THREE_SENTENCES), QUIET), box.clock
    )
    first, _, rest = THREE_SENTENCES.partition("。")
    pieces = listen(
        lambda: slow_engine.stream_arriving(_arriving(first + "。", rest), QUIET), box.clock
    )
    assert whole.lead_s == pytest.approx(smooth.lead_s, abs=1 / SAMPLE_RATE)
    assert whole.waits_s() == 0.0
    assert pieces.lead_s == 0.0
    # The first piece's decoding, its first-audio budget: before the smooth start's speech.
    assert pieces.first_audio_s <= 1.5 < whole.first_audio_s + whole.lead_s


def test_a_lead_silence_asked_for_counts_toward_the_smooth_start(
    slow_engine: Engine, box: SlowBox, smooth: Heard
) -> None:
    """The lead is the smooth start's or the silence asked for, whichever is longer: not both."""
    options = QUIET.with_changes(lead_silence=1000)
    padded = listen(lambda: slow_engine.stream(THREE_SENTENCES, options), box.clock)
    assert smooth.lead_s > 1.0
    assert padded.lead_s == pytest.approx(smooth.lead_s, abs=1 / SAMPLE_RATE)
    assert padded.waits_s() == 0.0


def test_a_box_slower_than_learnt_lengthens_a_pause_instead_of_running_the_player_dry(
    slow_engine: Engine, box: SlowBox, smooth: Heard
) -> None:
    """The load changes after the plan: the box runs at 1.6x where it learnt 1.3x. The lead,
    sized on 1.3x, falls short; the pauses before the late sentences grow instead."""
    started = box.clock()
    chunks = slow_engine.stream(THREE_SENTENCES, QUIET)
    first = next(chunks)  # the lead: the plan is made
    box.factor = 1.6
    try:
        rest = heard(chunks, box.clock, started)
    finally:
        box.factor = SLOWER
    slowed = Heard([0.0, *rest.arrivals], [first, *rest.chunks])
    assert slowed.waits_s() == 0.0, f"lateness per chunk: {slowed.lateness_s()}"
    pauses = [c.audio_s for c in slowed.chunks[1:] if c.starts_sentence]
    planned = [c.audio_s for c in smooth.chunks[1:] if c.starts_sentence]
    assert len(pauses) == len(planned) == 2
    assert sum(pauses) > sum(planned) + 0.2


def test_no_smooth_start_where_the_box_keeps_up(engine: Engine) -> None:
    for _ in engine.stream(THREE_SENTENCES, QUIET):  # the box learnt, as after any message
        pass
    chunks = list(engine.stream(THREE_SENTENCES, QUIET))
    assert np.any(chunks[0].pcm), "a fast box starts with speech at once"


def test_a_long_plan_keeps_the_player_fed_with_silence_while_it_runs(
    tiny_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text of several pause windows, on a box whose pause passes take 1.1 s each: silence
    comes before the plan is done (a player would otherwise give up), twice the time the plan
    has run, and counts toward the lead."""
    box = SlowBox(SLOWER, pause_pass_s=1.1)
    engine = box.engine(tiny_bundle)
    try:
        engine.load_all()
        text = "".join(f"今日は{n}番目のお知らせです。" for n in range(40))  # ~3 windows
        passes_at: list[float] = []
        graphs = engine._voices["tiny-a"].graphs
        found = graphs._duration_pass()
        assert found is not None
        session = found[0]
        run = session.run

        def noted(*args: object) -> object:
            outputs = run(*args)
            passes_at.append(box.clock())
            return outputs

        monkeypatch.setattr(session, "run", noted)
        started = box.clock()
        spoken = heard(engine.stream(text, QUIET), box.clock, started)
    finally:
        engine.close()
    first = spoken.chunks[0]
    assert not np.any(first.pcm) and first.starts_sentence
    assert spoken.arrivals[0] == pytest.approx(passes_at[0] - started)  # after the first pass
    assert first.audio_s == pytest.approx(2 * 1.1, abs=1 / SAMPLE_RATE)
    assert len(passes_at) >= 3 and spoken.arrivals[0] < passes_at[-1] - started
    assert sum(c.starts_sentence for c in spoken.chunks[1:]) == 39  # the others, all spoken
    assert spoken.waits_s() == 0.0
