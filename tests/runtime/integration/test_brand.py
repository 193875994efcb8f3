"""Yomiage's icon and logo: the images follow Home Assistant's brand rules, and Home Assistant
2026.3+ serves them from the integration's brand/ folder (scripts/render-brand makes them from
assets/brand/*.svg)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from homeassistant.const import MAJOR_VERSION, MINOR_VERSION
from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.yomiage.const import DOMAIN

BRAND = Path(__file__).resolve().parents[3] / "custom_components" / DOMAIN / "brand"
# Home Assistant's brand rules: icons square, 256 (512 at @2x); logos' shortest side 128-256
# (256-512 at @2x), landscape.
ICONS = {"icon.png": 256, "icon@2x.png": 512}
LOGOS = {"logo.png": 1, "logo@2x.png": 2, "dark_logo.png": 1, "dark_logo@2x.png": 2}
SERVES_BRANDS = (MAJOR_VERSION, MINOR_VERSION) >= (2026, 3)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path.name}: not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_images_follow_the_brand_rules() -> None:
    assert {p.name for p in BRAND.iterdir()} == {*ICONS, *LOGOS}
    for name, side in ICONS.items():
        assert _png_size(BRAND / name) == (side, side), name
    for name, scale in LOGOS.items():
        width, height = _png_size(BRAND / name)
        assert 128 * scale <= height <= 256 * scale and width > height, name


@pytest.mark.parametrize(
    ("asked", "served"),
    [
        ("icon.png", "icon.png"),
        ("icon@2x.png", "icon@2x.png"),
        ("logo.png", "logo.png"),
        ("dark_logo@2x.png", "dark_logo@2x.png"),
        ("dark_icon.png", "icon.png"),  # the mark reads on dark too: Home Assistant falls back
    ],
)
async def test_home_assistant_serves_them(
    hass: HomeAssistant, hass_client: ClientSessionGenerator, asked: str, served: str
) -> None:
    assert await async_setup_component(hass, "http", {})
    if not SERVES_BRANDS:  # before 2026.3 the brands come from Home Assistant's CDN only
        assert not await async_setup_component(hass, "brands", {})
        return
    assert await async_setup_component(hass, "brands", {})
    client = await hass_client()
    response = await client.get(f"/api/brands/integration/{DOMAIN}/{asked}?placeholder=no")
    assert response.status == 200
    assert response.content_type == "image/png"
    assert await response.read() == (BRAND / served).read_bytes()
