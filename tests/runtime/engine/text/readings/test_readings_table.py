"""The public readings table: OpenJTalk's reading of rewrite(raw) against a hand-written reference.

Each line of tests/fixtures/readings_table.tsv is ``family<TAB>raw<TAB>reference``. The reference
is what a person would write to be read aloud (kana where kanji would be ambiguous for OpenJTalk,
e.g. ごふん for 5 minutes). Both sides go through ``pyopenjtalk.g2p(..., kana=True)`` and are
compared with punctuation and spaces stripped, because the SBV2 normaliser maps punctuation later
anyway. The table must pass at >= 98 %; every failure is printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyopenjtalk
import pytest

from custom_components.yomiage.engine.text.readings import rewrite

TABLE = Path(__file__).resolve().parents[4] / "fixtures" / "readings_table.tsv"
REQUIRED_PASS_RATE = 0.98
# Katakana letters and the long-vowel mark; the middle dot ・ and all punctuation are dropped.
_NOT_READING = re.compile(r"[^\u30a1-\u30fa\u30fc]")
FAMILIES = {
    "clock",
    "date",
    "number",
    "range",
    "fraction",
    "unit",
    "currency",
    "counter",
    "english",
    "emoji",
    "bracket",
    "link",
    "message",
}


@dataclass(frozen=True)
class Case:
    line: int
    family: str
    raw: str
    reference: str


def load_table(path: Path = TABLE) -> list[Case]:
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        assert len(fields) == 3, f"{path}:{number}: expected family<TAB>raw<TAB>reference"
        cases.append(Case(number, *fields))
    return cases


def reading(text: str) -> str:
    return _NOT_READING.sub("", str(pyopenjtalk.g2p(text, kana=True)))


def test_table_is_large_and_covers_every_family() -> None:
    cases = load_table()
    assert len(cases) >= 150
    assert {case.family for case in cases} == FAMILIES
    assert len({case.raw for case in cases}) == len(cases), "duplicate raw inputs in the table"


def test_references_differ_from_raw_where_raw_misreads() -> None:
    """The table is not trivial: OpenJTalk alone misreads most of the raw inputs."""
    cases = load_table()
    misread = [case for case in cases if reading(case.raw) != reading(case.reference)]
    assert len(misread) >= len(cases) // 2


def test_table_pass_rate() -> None:
    cases = load_table()
    failures = []
    for case in cases:
        rewritten = rewrite(case.raw)
        got, expected = reading(rewritten), reading(case.reference)
        if got != expected:
            failures.append(
                f"{TABLE.name}:{case.line} [{case.family}] {case.raw!r} -> {rewritten!r}: "
                f"read {got}, expected {expected}"
            )
    passed = len(cases) - len(failures)
    print(f"\nreadings table: {passed}/{len(cases)} pass ({passed / len(cases):.1%})")
    for failure in failures:
        print("  FAIL", failure)
    assert passed / len(cases) >= REQUIRED_PASS_RATE, "\n".join(failures)


@pytest.mark.parametrize(
    ("raw", "openjtalk_alone"),
    [
        ("7:30", "ナナサンジュー"),
        ("10〜20分", "ジューニジュップン"),
        ("気温は-3℃", "キオンワサンド"),
    ],
)
def test_issue_examples_were_misread_without_rewrite(raw: str, openjtalk_alone: str) -> None:
    """The issue's examples: OpenJTalk alone reads them wrongly, after rewrite() it does not."""
    assert reading(raw) == openjtalk_alone
    assert reading(rewrite(raw)) != openjtalk_alone
