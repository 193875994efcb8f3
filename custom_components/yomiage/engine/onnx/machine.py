"""What a prepared graph may depend on, read off this machine: the CPU and onnxruntime it was
saved for, onnxruntime's blocked-kernel block size here, and the threads that share each run."""

from __future__ import annotations

import functools
import hashlib
import logging
import platform
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import onnxruntime as ort

from . import device_graphs, wire

_LOGGER = logging.getLogger(__name__)

CPU_PROVIDER = "CPUExecutionProvider"
_BLOCKED_DOMAIN = "com.microsoft.nchwc"  # onnxruntime's blocked-layout operators


class Dependency(StrEnum):
    """What a pass's result may depend on besides its graph (passes/registry.py)."""

    BLOCK = "block"  # floats per block of onnxruntime's NCHWc kernels here (0: it has none)
    THREADS = "threads"  # onnxruntime's threads per run


@dataclass(frozen=True)
class Machine:
    """This machine as graph preparation sees it; ``threads`` as the session factory sets them."""

    threads: int

    def value(self, dependency: Dependency) -> int:
        if dependency is Dependency.BLOCK:
            return blocked_kernel_block()
        return self.threads


def saved_for() -> tuple[str, ...]:
    """What every prepared graph depends on: onnxruntime's saved optimised graph holds kernels
    chosen for this onnxruntime and this CPU (its layout and packing follow the CPU's features)."""
    return (f"ort {ort.__version__}", platform.machine(), _cpu_flags_digest())


_PROBE_CHANNELS = 8


def blocked_probe_graph() -> bytes:
    """One 1x1 convolution with 8 output channels (see ``blocked_kernel_block``)."""
    weight = wire.float_tensor("w", [_PROBE_CHANNELS, 16, 1, 1], [0.0] * _PROBE_CHANNELS * 16)
    conv = wire.node_field("Conv", ["x", "w"], ["y"])
    return device_graphs.model(
        "blocked_probe",
        [conv],
        inputs=[wire.value_info("x", wire.TENSOR_FLOAT, [1, 16, 1, 8])],
        outputs=[wire.value_info("y", wire.TENSOR_FLOAT, [1, _PROBE_CHANNELS, 1, 8])],
        initializers=[weight],
    )


@functools.cache
def blocked_kernel_block() -> int:
    """Floats per block of this onnxruntime's blocked NCHWc convolutions (8 on AVX2, 16 on
    AVX-512), 0 where it has none (x86 builds have them; the aarch64 wheel has not): asked once,
    by optimising ``blocked_probe_graph``: the NCHWc pass makes its convolution a blocked one
    whose reordered weight has its output channels padded to a whole block."""
    graph = blocked_probe_graph()
    with tempfile.TemporaryDirectory(prefix="yomiage-probe-") as scratch:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.optimized_model_filepath = str(Path(scratch) / "optimised.onnx")
        try:
            ort.InferenceSession(graph, options, providers=[CPU_PROVIDER])
            saved = memoryview(Path(scratch, "optimised.onnx").read_bytes())
        except Exception as err:  # onnxruntime's own exception types; only a speed hint is lost
            _LOGGER.debug("Blocked-kernel probe failed: %s", err)
            return 0
    optimised = wire.read_graph(saved)
    blocked = (
        optimised.initializers.get(node.inputs[1])
        for node in optimised.nodes.values()
        if node.op_type == "Conv" and node.domain == _BLOCKED_DOMAIN and len(node.inputs) > 1
    )
    return next((weight.dims[0] for weight in blocked if weight is not None), 0)


def _cpu_flags_digest() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            flags = next((line for line in cpuinfo if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return hashlib.sha256(flags.encode()).hexdigest()[:12]
