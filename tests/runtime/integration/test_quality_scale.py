"""The integration's quality_scale.yaml as hassfest reads it: YAML, each rule a status (done,
exempt with its reason, or todo)."""

from __future__ import annotations

from pathlib import Path

import yaml

QUALITY_SCALE = Path(__file__).resolve().parents[3] / "custom_components/yomiage/quality_scale.yaml"
STATUSES = {"done", "exempt", "todo"}


def test_every_rule_has_a_status_and_every_exemption_a_reason() -> None:
    rules = yaml.safe_load(QUALITY_SCALE.read_text(encoding="utf-8"))["rules"]
    assert rules
    for name, rule in rules.items():
        if isinstance(rule, str):
            assert rule in STATUSES - {"exempt"}, name
        else:
            assert rule["status"] in STATUSES, name
            assert set(rule) <= {"status", "comment"}, name
            assert rule["status"] != "exempt" or rule.get("comment"), name
