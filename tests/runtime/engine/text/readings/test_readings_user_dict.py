"""User dictionary: CSV parsing and errors, fingerprint, compile, apply (OpenJTalk, rewrite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyopenjtalk
import pytest

from custom_components.yomiage.engine.errors import YomiageError
from custom_components.yomiage.engine.text.readings import rewrite, user_dict
from custom_components.yomiage.engine.text.readings.user_dict import (
    UserDictionary,
    UserDictionaryError,
    UserWord,
)

SAMPLE = """\
# my words
surface,reading,accent
読上,よみあげ,0

Yomiage,ヨミアゲ,3
鬼滅,キメツ,1
鬼滅,キメツ,0
"""


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "words.csv"
    path.write_text(SAMPLE, encoding="utf-8")
    return path


@pytest.fixture
def clean_openjtalk() -> Iterator[None]:
    """Applying changes process-wide state: always go back to the plain dictionary."""
    yield
    user_dict.reset()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_from_file_reads_words(sample: Path) -> None:
    words = UserDictionary.from_file(sample).words
    assert words == (
        UserWord("読上", "ヨミアゲ", 0),  # hiragana reading stored as katakana
        UserWord("Yomiage", "ヨミアゲ", 3),
        UserWord("鬼滅", "キメツ", 0),  # the later line for the same surface wins
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("読上,ヨミアゲ\n", r"bad\.csv:1: expected 3 fields"),
        ("# c\n読上,ヨミアゲ,0,1\n", r"bad\.csv:2: expected 3 fields"),
        ("読上,yomiage,0\n", r"bad\.csv:1: reading 'yomiage' is not katakana"),
        ("読上,ヨミアゲ,flat\n", r"bad\.csv:1: accent 'flat' is not a whole number"),
        ("読上,ヨミアゲ,5\n", r"bad\.csv:1: accent 5 is outside 0\.\.4"),
        ("読上,キャッ,3\n", r"accent 3 is outside 0\.\.2"),  # small ャ is no mora, ッ is
        ("Aさん,エーサン,0\n", r"mixes Latin letters"),
        ("読 上,ヨミアゲ,0\n", r"contains a comma, quote or space"),
        (" ,ヨミアゲ,0\n", r"empty surface"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, content: str, problem: str) -> None:
    with pytest.raises(UserDictionaryError, match=problem):
        UserDictionary.from_file(_write(tmp_path, content))


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UserDictionaryError, match=r"missing\.csv: cannot read"):
        UserDictionary.from_file(tmp_path / "missing.csv")
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("café,kafe,0\n".encode("latin-1"))  # not UTF-8
    with pytest.raises(UserDictionaryError, match=r"latin1\.csv: cannot read"):
        UserDictionary.from_file(latin1)


def test_error_is_a_yomiage_error() -> None:
    assert issubclass(UserDictionaryError, YomiageError)


def test_from_entries() -> None:
    words = UserDictionary.from_entries([("読上", "ヨミアゲ", 0), ("Yomi", "よみ", "1")]).words
    assert [w.reading for w in words] == ["ヨミアゲ", "ヨミ"]
    with pytest.raises(UserDictionaryError, match="entry 2: reading"):
        UserDictionary.from_entries([("読上", "ヨミアゲ", 0), ("x", "?", 0)])


def test_fingerprint_is_stable_and_content_sensitive() -> None:
    a = UserDictionary.from_entries([("読上", "ヨミアゲ", 0), ("鬼滅", "キメツ", 0)])
    b = UserDictionary.from_entries([("鬼滅", "キメツ", 0), ("読上", "ヨミアゲ", 0)])
    c = UserDictionary.from_entries([("鬼滅", "キメツ", 1), ("読上", "ヨミアゲ", 0)])
    assert a.fingerprint == b.fingerprint  # order does not matter
    assert a.fingerprint != c.fingerprint  # the accent does
    assert len(a.fingerprint) == 16 and int(a.fingerprint, 16) >= 0
    assert UserDictionary([]).fingerprint != a.fingerprint


def test_compile_writes_a_dictionary(sample: Path, tmp_path: Path) -> None:
    dest = UserDictionary.from_file(sample).compile(tmp_path / "user.dic")
    assert dest.is_file() and dest.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["user.dic", "words.csv"]


def test_compile_errors(tmp_path: Path) -> None:
    with pytest.raises(UserDictionaryError, match="no entries"):
        UserDictionary([]).compile(tmp_path / "empty.dic")
    words = UserDictionary.from_entries([("読上", "ヨミアゲ", 0)])
    with pytest.raises(UserDictionaryError, match="does not exist"):
        words.compile(tmp_path / "nowhere" / "user.dic")


def _accent_of(text: str) -> tuple[str, int]:
    (node,) = pyopenjtalk.run_frontend(text)
    return node["pron"], node["acc"]


@pytest.mark.usefixtures("clean_openjtalk")
def test_apply_changes_readings_and_accents(sample: Path, tmp_path: Path) -> None:
    assert pyopenjtalk.g2p("読上", kana=True) != "ヨミアゲ"
    UserDictionary.from_file(sample).apply(cache_dir=tmp_path)
    assert pyopenjtalk.g2p("読上が鬼滅を読む", kana=True) == "ヨミアゲガキメツヲヨム"
    assert _accent_of("読上") == ("ヨミアゲ", 0)
    # A Latin surface is rewritten to its reading, which the dictionary gives its accent.
    assert rewrite("Yomiageです") == "ヨミアゲです"
    assert rewrite("YOMIAGE") == "ヨミアゲ"
    assert _accent_of("ヨミアゲ") == ("ヨミアゲ", 3)


@pytest.mark.usefixtures("clean_openjtalk")
def test_reset_restores_the_plain_dictionary(sample: Path, tmp_path: Path) -> None:
    plain = pyopenjtalk.g2p("読上", kana=True)
    plain_latin = rewrite("Yomiage")
    UserDictionary.from_file(sample).apply(cache_dir=tmp_path)
    user_dict.reset()
    assert pyopenjtalk.g2p("読上", kana=True) == plain
    assert rewrite("Yomiage") == plain_latin


@pytest.mark.usefixtures("clean_openjtalk")
def test_apply_reuses_the_compiled_file(sample: Path, tmp_path: Path) -> None:
    words = UserDictionary.from_file(sample)
    words.apply(cache_dir=tmp_path)
    (compiled,) = tmp_path.glob("user-*.dic")
    assert compiled.name == f"user-{words.fingerprint}.dic"
    before = compiled.stat().st_mtime_ns
    words.apply(cache_dir=tmp_path)
    assert compiled.stat().st_mtime_ns == before


@pytest.mark.usefixtures("clean_openjtalk")
def test_applying_an_empty_dictionary_resets(sample: Path, tmp_path: Path) -> None:
    UserDictionary.from_file(sample).apply(cache_dir=tmp_path)
    UserDictionary([]).apply(cache_dir=tmp_path)
    assert pyopenjtalk.g2p("読上", kana=True) != "ヨミアゲ"
