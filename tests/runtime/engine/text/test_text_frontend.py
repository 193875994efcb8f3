"""The Frontend the engine uses: sentences, readings, speakability, errors and thread safety."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from custom_components.yomiage.engine.errors import InvalidTextError
from custom_components.yomiage.engine.text import openjtalk
from custom_components.yomiage.engine.text.frontend import Frontend, PhoneSequence
from custom_components.yomiage.engine.text.normalize import normalize
from tests.runtime.conftest import FIXTURES

SENTENCES = [
    case["text"]
    for case in json.loads((FIXTURES / "g2p_golden.json").read_text(encoding="utf-8"))["g2p"]
]


@pytest.fixture(scope="module")
def frontend() -> Frontend:
    return Frontend()


def _texts(frontend: Frontend, text: str) -> list[str]:
    return [sentence.text for sentence in frontend.sentences(text)]


def test_sentences_are_normalised_and_speakable(frontend: Frontend) -> None:
    text = "おはようございます。\n今日は「晴れ」です！😀\n\n明日は？"
    assert _texts(frontend, text) == ["おはようございます.", "今日は'晴れ'です!", "明日は?"]


def test_sentences_agree_with_normalize_and_analyse(frontend: Frontend) -> None:
    text = "今日は、いい天気ですね。散歩に行きましょう！"
    sentences = frontend.sentences(text)
    assert "".join(sentence.text for sentence in sentences) == normalize(text)
    for sentence in sentences:
        assert _arrays(frontend.analyse(sentence.text)) == _arrays(sentence)


def test_each_sentence_is_read_by_openjtalk_once(
    frontend: Frontend, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[str] = []
    analyse = openjtalk.analyse

    def counted(text: str) -> tuple[list[openjtalk.Word], list[str]]:
        read.append(text)
        return analyse(text)

    monkeypatch.setattr(openjtalk, "analyse", counted)
    sentences = frontend.sentences("おはよう。😀今日は晴れです！明日は？")
    assert [s.text for s in sentences] == ["おはよう.", "今日は晴れです!", "明日は?"]
    assert read == ["おはよう.", "今日は晴れです!", "明日は?"]
    read.clear()
    # 々 alone has no reading: read to find that out, its piece joins the sentence before,
    # which is then read with it.
    sentences = frontend.sentences("おはよう。々。今日は晴れです！")
    assert [s.text for s in sentences] == ["おはよう.々.", "今日は晴れです!"]
    assert read == ["おはよう.", "々.", "今日は晴れです!", "おはよう.々."]


def test_reading_is_katakana_per_sentence(frontend: Frontend) -> None:
    assert frontend.reading("今日は良い天気ですね。「本当？」") == [
        "キョーワヨイテンキデスネ。",
        "ホントー？",
    ]
    assert frontend.reading("コーヒー、ください") == ["コーヒー、クダサイ"]


def test_a_web_address_is_read_as_one_word_in_its_sentence(frontend: Frontend) -> None:
    text = "詳しくは https://example.com/a?b=1 を見てください。"
    assert frontend.reading(text) == ["クワシクワユーアールエルヲミテクダサイ。"]


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("明日も晴れるでしょう。", "アシタモハレルデショー。"),
        ("行こう。", "イコー。"),
        ("ありがとうございます。", "アリガトーゴザイマス。"),
    ],
)
def test_a_lengthened_final_u_reads_as_a_long_vowel(
    frontend: Frontend, text: str, reading: str
) -> None:
    """OpenJTalk reads such an う as a word of its own whose reading is ー: in katakana, never the
    hiragana of its surface."""
    assert frontend.reading(text) == [reading]


@pytest.mark.parametrize(
    ("text", "speakable"),
    [("あ", True), ("ABC", True), ("😀", False), ("#$%&", False), ("、。！", False), ("々", False)],
)
def test_speakable_text_has_sentences(frontend: Frontend, text: str, speakable: bool) -> None:
    assert bool(frontend.sentences(text, required=False)) is speakable


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "text is empty"),
        (" \n\t　", "text is empty"),
        ("😀🎉", "nothing speakable in '😀🎉'"),
        ("#$%&", "nothing speakable in '#$%&'"),
        ("！？…", "nothing speakable in '！？…'"),
        ("々。", "nothing speakable in '々。'"),
    ],
)
def test_sentences_refuse_text_with_nothing_to_say(
    frontend: Frontend, text: str, message: str
) -> None:
    with pytest.raises(InvalidTextError) as error:
        frontend.sentences(text)
    assert str(error.value) == message


def test_errors_name_the_problem(frontend: Frontend) -> None:
    with pytest.raises(InvalidTextError, match=r"^text must be a string, not bytes$"):
        frontend.sentences(b"abc")  # type: ignore[arg-type]
    with pytest.raises(InvalidTextError, match=r"^text is empty$"):
        frontend.analyse("")
    with pytest.raises(InvalidTextError, match=r"^nothing speakable in"):
        frontend.analyse("!?.")
    with pytest.raises(InvalidTextError, match=r"^nothing speakable in"):
        frontend.analyse("々")  # OpenJTalk has no reading for it alone
    with pytest.raises(ValueError, match="wants normalised text"):
        frontend.analyse("今日は 晴れ。")
    with pytest.raises(InvalidTextError, match=r"^text is empty$"):
        frontend.reading("   ")
    with pytest.raises(InvalidTextError) as error:
        frontend.sentences("😀\n" * 100)  # the message stays one short line
    assert len(str(error.value)) <= 70 and "\n" not in str(error.value)


def test_sequences_are_read_only(frontend: Frontend) -> None:
    sequence = frontend.analyse("はい.")
    with pytest.raises(ValueError, match="read-only"):
        sequence.phones[0] = 5


def test_threads_get_the_serial_results(frontend: Frontend) -> None:
    serial = [_arrays(frontend.analyse(text)) for text in SENTENCES]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            parallel = list(pool.map(lambda text: _arrays(frontend.analyse(text)), SENTENCES))
            assert parallel == serial
        readings = list(pool.map(frontend.reading, SENTENCES))
    assert readings == [frontend.reading(text) for text in SENTENCES]


def test_separate_frontends_share_one_openjtalk_safely() -> None:
    texts = SENTENCES[:20]
    expected = [_arrays(Frontend().analyse(text)) for text in texts]
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda text: _arrays(Frontend().analyse(text)), texts * 3))
    assert got == expected * 3


def _arrays(sequence: PhoneSequence) -> tuple[str, list[int], list[int], list[int], list[int]]:
    assert all(isinstance(a, np.ndarray) for a in (sequence.phones, sequence.word2ph))
    return (
        sequence.text,
        sequence.phones.tolist(),
        sequence.tones.tolist(),
        sequence.languages.tolist(),
        sequence.word2ph.tolist(),
    )
