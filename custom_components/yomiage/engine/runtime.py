"""onnxruntime sessions: device choice, threads, and loading graphs (errors name the file)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort

from .errors import BundleError, DeviceUnavailableError

_LOGGER = logging.getLogger(__name__)

CPU_PROVIDER = "CPUExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"
DEVICES = ("auto", "cpu", "cuda")


def physical_cores() -> int:
    """Physical cores (hyper-threads share the FP units the convolutions need: no help)."""
    cores: set[tuple[str, str]] = set()
    physical_id = core_id = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    physical_id = value.strip()
                elif key == "core id":
                    core_id = value.strip()
                    cores.add((physical_id, core_id))
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(len(cores) or (usable or 1), usable or 1))


def resolve_device(requested: str) -> str:
    """Pick "cpu" or "cuda" for a requested "auto" | "cpu" | "cuda"."""
    if requested not in DEVICES:
        raise DeviceUnavailableError(
            f"unknown device {requested!r}; use one of {', '.join(DEVICES)}"
        )
    if requested == "cpu":
        return "cpu"
    cuda_problem = _cuda_problem()
    if cuda_problem is None:
        return "cuda"
    if requested == "cuda":
        raise DeviceUnavailableError(f"CUDA was requested but cannot be used: {cuda_problem}")
    _LOGGER.info("Using the CPU: %s", cuda_problem)
    return "cpu"


def _cuda_problem() -> str | None:
    """Why CUDA cannot be used, or None when it can."""
    if CUDA_PROVIDER not in ort.get_available_providers():
        return "onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)"
    return None


@dataclass(frozen=True)
class SessionFactory:
    """Creates onnxruntime sessions with one policy for every graph of the engine."""

    device: str = "cpu"
    threads: int | None = None

    @property
    def intra_op_threads(self) -> int:
        return self.threads if self.threads else physical_cores()

    @property
    def providers(self) -> list[str]:
        return [CUDA_PROVIDER, CPU_PROVIDER] if self.device == "cuda" else [CPU_PROVIDER]

    def options(self) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.intra_op_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # onnxruntime's warnings about unused initialisers are noise
        return options

    def create(self, path: Path) -> ort.InferenceSession:
        if not path.is_file():
            raise BundleError(str(path), "file is missing")
        try:
            return ort.InferenceSession(str(path), self.options(), providers=self.providers)
        except Exception as err:  # onnxruntime raises its own exception types for bad graphs
            first_line = (
                str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            )
            raise BundleError(str(path), f"not a loadable ONNX graph ({first_line[:200]})") from err
