"""Each readings rule on its own: what it rewrites, and what it must leave alone."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from custom_components.yomiage.engine.text import readings
from custom_components.yomiage.engine.text.readings import (
    clock,
    counters,
    dates,
    english,
    english_model,
    fraction,
    numerals,
    pictographs,
    plain_numbers,
    ranges,
    units,
)


@pytest.mark.parametrize(
    ("number", "kanji"),
    [
        (0, "ゼロ"),
        (1, "一"),
        (10, "十"),
        (11, "十一"),
        (100, "百"),
        (110, "百十"),
        (1000, "千"),
        (1200, "千二百"),
        (10_000, "一万"),
        (10_001, "一万一"),
        (12_345_678, "千二百三十四万五千六百七十八"),
        (10**8, "一億"),
        (10**12 + 1, "一兆一"),
        (10**16 * 3, "三京"),
        (
            10**20,
            "一ゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロゼロ",
        ),
    ],
)
def test_integer_as_kanji(number: int, kanji: str) -> None:
    assert numerals.integer(number) == kanji


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("-3.5", "マイナス三点五"),
        ("1,234.05", "千二百三十四点ゼロ五"),
        ("007", "ゼロゼロ七"),
        ("±0.5", "プラスマイナスゼロ点五"),
    ],
)
def test_number_parse(text: str, spoken: str) -> None:
    assert numerals.parse(text) == spoken


def test_number_parse_rejects_non_numbers() -> None:
    with pytest.raises(ValueError, match=r"not a number: '1\.2\.3'"):
        numerals.parse("1.2.3")


@pytest.mark.parametrize("text", ["25:61", "24:30", "13:00 PM", "3:2", "1.5:30", "SPAM"])
def test_clock_leaves_non_times_alone(text: str) -> None:
    assert clock.read_clock_times(text) == text


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("12:00 AM", "午前零時"),
        ("12:00 PM", "午後零時"),
        ("0:00", "零時"),
        ("24:00", "二十四時"),
        ("午後7:30", "午後七時サンジュップン"),
        ("7:00:05", "七時ゼロフン五秒"),
        ("11 a.m.", "午前十一時."),  # the dot at the end of the line still ends the sentence
        ("11 a.m. です", "午前十一時 です"),
    ],
)
def test_clock_times(text: str, spoken: str) -> None:
    assert clock.read_clock_times(text) == spoken


@pytest.mark.parametrize("text", ["2026/13/01", "13/1", "5/40", "1/2", "3/4", "1.2.3", "毎週(月)"])
def test_dates_leave_non_dates_alone(text: str) -> None:
    assert dates.read_dates(text) == text


def test_common_fraction_is_a_date_when_a_weekday_follows() -> None:
    assert dates.read_dates("1/2(火)") == "一月二日(火曜日)"
    assert dates.read_dates("11/29 [Sunday]") == "十一月二十九日(日曜日)"


@pytest.mark.parametrize(
    "text", ["2026-11-29", "090-1234-5678", "COVID-19", "ver2-3", "〒123-4567", "a-1"]
)
def test_hyphens_that_are_not_ranges(text: str) -> None:
    assert ranges.mark_ranges(text) == text


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("10〜20分", "10分から20分"),  # the counter is said on both sides
        ("2-3人で", "2人から3人で"),  # only the counter, not what follows it
        ("-5〜-3°C", "-5°Cから-3°C"),  # ℃ as NFKC leaves it
        ("1,000円〜2,000円", "1,000円から2,000円"),
        ("7:00 - 9:00", "7:00から9:00"),
        ("11/29〜12/1", "11/29から12/1"),
        ("10 - 20", "10から20"),
    ],
)
def test_ranges(text: str, marked: str) -> None:
    assert ranges.mark_ranges(text) == marked


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("4K", "4K"),  # a video format, not 4 kelvin
        ("2700K", "二千七百ケルビン"),
        ("5 minutes", "5 minutes"),  # a longer word is not the unit "m"
        ("時速60km/h", "時速六十キロ"),
        ("70°F", "華氏七十度"),
        ("B2", "B2"),  # vitamin B2, not a basement
        ("5 min", "ゴフン"),
    ],
)
def test_units_edges(text: str, spoken: str) -> None:
    assert units.read_units(text) == spoken


def test_every_unit_is_rewritten() -> None:
    for unit, reading in units.UNITS.items():
        number = "2000" if unit == "K" else "3"
        out = units.read_units(f"{number}{unit}")
        expected = "サンプン" if unit == "min" else reading  # minutes go through counters.py
        assert out.endswith(expected) and not any(c.isdigit() for c in out), (unit, out)


def test_counter_falls_back_to_kanji_without_openjtalk(monkeypatch: pytest.MonkeyPatch) -> None:
    counters.spoken_count.cache_clear()
    monkeypatch.setitem(sys.modules, "pyopenjtalk", None)  # import now raises ImportError
    try:
        assert counters.spoken_count("5", "分") == "五分"
        assert counters.spoken_count("1.5", "分") == "一点五分"
    finally:
        counters.spoken_count.cache_clear()


def test_counter_does_not_touch_fractions() -> None:
    assert counters.read_counters("5分の1") == "5分の1"
    assert counters.read_counters("8分") == "ハップン"


def test_very_long_digit_runs_are_read_digit_by_digit() -> None:
    """Beyond 20 digits a number is a code; int() would refuse 5000 digits anyway."""
    assert plain_numbers.read_plain_numbers("9" * 5000) == "九" * 5000
    assert plain_numbers.read_plain_numbers("1" + "0" * 20) == "一" + "ゼロ" * 20
    assert units.read_units("9" * 5000 + "K").endswith("九ケルビン")
    assert fraction.read_fractions("1/" + "9" * 5000).startswith("九九")


def test_plain_numbers_leave_no_digit() -> None:
    text = "1 22 333 4,444 5.5 -6 +7 08 9-9-9 10.10.10 11,2,3"
    assert not any(c.isdigit() for c in plain_numbers.read_plain_numbers(text))


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("⚠️ 窓", "窓"),
        ("家族👨\u200d👩\u200d👧です", "家族 です"),
        ("1️⃣番", "1番"),
        ("○×", "○×"),  # read by OpenJTalk (マル) or mapped by the normaliser
        ("🈚料", "🈚料"),  # NFKC turns it into 無
        ("Brand™", "Brand"),
    ],
)
def test_pictographs(text: str, kept: str) -> None:
    assert pictographs.drop_pictographs(text) == kept


@pytest.mark.parametrize(
    ("word", "katakana"),
    [
        ("LED", "エルイーディー"),  # short all-capital word: an acronym
        ("IT", "アイティー"),
        ("HOME", "ホーム"),  # longer all-capital word from the lexicon
        ("SwitchBot", "スイッチボット"),  # CamelCase parts from the lexicon
        ("ESPHome", "イーエスピーホーム"),
        ("ChatGPT", "チャットジーピーティー"),
        ("mqtt", "エムキューティーティー"),  # no vowel: spelled
        ("Wi-Fi6", "ワイファイ六"),
        ("USB-C", "ユーエスビーシー"),
        ("AT&T", "エーティーアンドティー"),
        ("Zigbee3.0", "ジグビー三点ゼロ"),
    ],
)
def test_english_word_policy(word: str, katakana: str) -> None:
    assert english.word_reading(word) == katakana


def test_english_words_in_a_row_become_one_compound() -> None:
    assert english.read_english("Home Assistant が Update しました") == (
        "ホームアシスタント が アップデート しました"
    )
    assert english.read_english("Mr. Smith") == "ミスター スミス"


def test_unknown_word_uses_the_model() -> None:
    assert english.word_reading("curtain") == "カーテン"  # not in the lexicon
    assert "curtain" not in english.WORDS


def test_unknown_word_is_spelled_without_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = english_model._Model()
    monkeypatch.setattr(english_model, "_MODEL", model)
    monkeypatch.setitem(sys.modules, "e2k", None)
    english_model.guess_katakana.cache_clear()
    try:
        assert english.word_reading("curtain") == "シーユーアールティーエーアイエヌ"
        assert model.katakana("curtain") is None  # the failed import is remembered
    finally:
        english_model.guess_katakana.cache_clear()


@pytest.mark.parametrize("word", ["", "ab1", "x" * 40, "日本"])
def test_model_refuses_words_it_cannot_read(word: str) -> None:
    assert english_model.guess_katakana(word) is None


def test_a_failing_rule_is_skipped_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(text: str) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(readings, "RULES", (broken, *readings.RULES))
    with caplog.at_level(logging.ERROR):
        assert readings.rewrite("湿度65%") == "湿度六十五パーセント"
    assert "broken" in caplog.text


def test_rewrite_of_non_text_is_empty() -> None:
    assert readings.rewrite(None) == ""  # type: ignore[arg-type]


def test_rewrite_compiles_no_pattern_once_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pattern is compiled once, at import: rewriting a message compiles none (the
    module-level ``re`` functions would, through their cache) and so costs microseconds.
    (Its time is a benchmark's business: a test does not read the clock of a shared box.)"""
    message = "7:30に起きてください。気温は-3℃、湿度65%です。Wi-Fiの電波が弱いです。"
    expected = readings.rewrite(message)  # warm the caches
    for name in ("compile", "sub", "subn", "search", "match", "fullmatch", "finditer", "findall"):

        def compiling(*args: object, _name: str = name, **kwargs: object) -> None:
            raise AssertionError(f"re.{_name} called while rewriting")

        monkeypatch.setattr(re, name, compiling)
    assert readings.rewrite(message) == expected
