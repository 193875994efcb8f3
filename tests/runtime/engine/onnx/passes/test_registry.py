"""The registry of load-time passes (engine/onnx/passes/registry.py)."""

from __future__ import annotations

from custom_components.yomiage.engine.onnx.machine import Dependency, Machine
from custom_components.yomiage.engine.onnx.passes.registry import (
    PASSES,
    GraphKind,
    Pass,
    passes_for,
)
from custom_components.yomiage.engine.onnx.wire import Chunks


def test_a_pass_gets_what_it_depends_on_and_nothing_else() -> None:
    handed: list[dict[str, int]] = []

    def rewrite(model: memoryview, **depends: int) -> Chunks | None:
        handed.append(depends)
        return None

    step = Pass("probe", rewrite, 3, frozenset({GraphKind.DECODER}), (Dependency.THREADS,))
    assert step.run(memoryview(b""), Machine(threads=4)) is None
    assert handed == [{"threads": 4}]
    assert step.key(Machine(threads=4)) == "probe 3 threads 4"
    plain = Pass("plain", rewrite, 1, frozenset({GraphKind.DECODER}))
    plain.run(memoryview(b""), Machine(threads=4))
    assert handed[-1] == {}
    assert plain.key(Machine(threads=4)) == "plain 1"


def test_each_kind_has_its_passes_in_registry_order() -> None:
    assert len({step.name for step in PASSES}) == len(PASSES)
    assert [step.name for step in passes_for(GraphKind.LANGUAGE_MODEL)] == ["position buckets"]
    assert [step.name for step in passes_for(GraphKind.FRONT)] == [
        "flow mask",
        "attention band",
        "conv lift",
        "minimal filtering",
    ]
    assert [step.name for step in passes_for(GraphKind.DECODER)] == [
        "decoder span",
        "conv lift",
        "minimal filtering",
    ]
    assert not any(Dependency.THREADS in step.depends_on for step in PASSES)
