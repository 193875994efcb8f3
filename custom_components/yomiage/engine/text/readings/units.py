"""Numbers with the units Home Assistant sensors report: "-3°C", "65%", "1013 hPa", "2.4GHz" ….

The text has been NFKC-normalised first, so ℃ arrives as °C, ㎡ as m2 and µ as μ. A unit must
follow its number (a space between is allowed, as Home Assistant prints "100 W") and must not run
on into a longer Latin word ("5 min" is minutes, "5 minutes" is left to the English rule).
"""

from __future__ import annotations

import re

from . import numerals
from .counters import spoken_count

UNITS: dict[str, str] = {
    # temperature (°F gets 華氏 in front, see _PREFIXED)
    "°C": "度",
    "°F": "度",
    "°": "度",
    "K": "ケルビン",  # colour temperatures only, see _is_unit ("4K" is a video format)
    # ratios and concentrations
    "%RH": "パーセント",
    "%": "パーセント",
    "ppm": "ピーピーエム",
    "ppb": "ピーピービー",
    # 毎 after グラム is read ごと by OpenJTalk; the unit is read まい
    "μg/m3": "マイクログラムマイ立方メートル",
    "mg/m3": "ミリグラムマイ立方メートル",
    # pressure
    "hPa": "ヘクトパスカル",
    "kPa": "キロパスカル",
    "Pa": "パスカル",
    "mmHg": "ミリメートル水銀柱",
    # length, area, volume
    "mm": "ミリ",
    "cm": "センチ",
    "km": "キロ",
    "m": "メートル",
    "m2": "平方メートル",
    "m3": "立方メートル",
    "L": "リットル",
    "mL": "ミリリットル",
    "ml": "ミリリットル",
    "inch": "インチ",
    "ft": "フィート",
    # speed, rates
    "m/s": "メートル毎秒",
    "km/h": "キロメートル毎時",
    "mm/h": "ミリ毎時",
    "mph": "マイル毎時",
    "rpm": "アールピーエム",
    "bpm": "ビーピーエム",
    # mass and energy
    "kg": "キロ",
    "g": "グラム",
    "mg": "ミリグラム",
    "kcal": "キロカロリー",
    # electricity
    "W": "ワット",
    "kW": "キロワット",
    "MW": "メガワット",
    "Wh": "ワットアワー",
    "kWh": "キロワットアワー",
    "MWh": "メガワットアワー",
    "V": "ボルト",
    "mV": "ミリボルト",
    "A": "アンペア",
    "mA": "ミリアンペア",
    "mAh": "ミリアンペアアワー",
    "VA": "ボルトアンペア",
    # sound and light
    "dB": "デシベル",
    "dBm": "デシベルミリワット",
    "lx": "ルクス",
    "lux": "ルクス",
    "lm": "ルーメン",
    # frequency and data
    "Hz": "ヘルツ",
    "kHz": "キロヘルツ",
    "MHz": "メガヘルツ",
    "GHz": "ギガヘルツ",
    "bps": "ビーピーエス",
    "kbps": "キロビーピーエス",
    "Mbps": "メガビーピーエス",
    "Gbps": "ギガビーピーエス",
    "KB": "キロバイト",
    "kB": "キロバイト",
    "MB": "メガバイト",
    "GB": "ギガバイト",
    "TB": "テラバイト",
    # time
    "ms": "ミリ秒",
    "s": "秒",
    "sec": "秒",
    "min": "分",  # read by the counter rule, see _COUNTER_UNITS
    "h": "時間",
    # floors of a building, as Japanese signs write them ("2F")
    "F": "階",
}

# The number is spoken after the prefix: "70°F" → 華氏七十度.
_PREFIXED = {"°F": "華氏"}
# After a speed word the unit shortens to what people say: 時速60km/h → 時速六十キロ.
_AFTER_SPEED_WORD = {"km/h": "キロ", "m/s": "メートル"}
_SPEED_WORDS = ("時速", "秒速", "風速")
# Units that are counters OpenJTalk misreads after kanji numerals (五分 → ごぶ), see counters.py.
_COUNTER_UNITS = {"min": "分"}

_UNIT_ALTERNATIVES = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
_QUANTITY = re.compile(
    rf"(?<![A-Za-z0-9.,])({numerals.NUMBER})[ \t]?({_UNIT_ALTERNATIVES})(?![A-Za-z0-9/])"
)
_BASEMENT = re.compile(r"(?<![A-Za-z0-9])B(\d{1,2})F(?![A-Za-z0-9])")
_LOWEST_KELVIN = 1000


def _speed_word_before(text: str, start: int) -> bool:
    return text[max(0, start - 2) : start] in _SPEED_WORDS


def _is_unit(match: re.Match[str]) -> bool:
    if match.group(5) != "K":
        return True
    whole = match.group(3).replace(",", "")
    return len(whole) > len(str(_LOWEST_KELVIN)) or int(whole) >= _LOWEST_KELVIN


def _quantity(match: re.Match[str]) -> str:
    unit = match.group(5)
    if not _is_unit(match):
        return match.group(0)
    if unit in _COUNTER_UNITS and not match.group(2):
        return spoken_count(match.group(1), _COUNTER_UNITS[unit])
    spoken = numerals.from_match(match, first_group=2)
    if unit in _AFTER_SPEED_WORD and _speed_word_before(match.string, match.start()):
        return spoken + _AFTER_SPEED_WORD[unit]
    return _PREFIXED.get(unit, "") + spoken + UNITS[unit]


def _basement(match: re.Match[str]) -> str:
    return f"地下{numerals.integer(int(match.group(1)))}階"


def read_units(text: str) -> str:
    """Rewrite each number followed by a known unit, and basement floors ("B1F")."""
    text = _QUANTITY.sub(_quantity, text)
    if "B" in text:
        text = _BASEMENT.sub(_basement, text)
    return text
