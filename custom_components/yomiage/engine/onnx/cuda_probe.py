"""Is CUDA usable here? Asked once per process, answered by running a tiny graph on it.

Listing ``CUDAExecutionProvider`` only says that onnxruntime-gpu is installed. When the CUDA or
cuDNN libraries are missing or do not match, onnxruntime logs an error and quietly builds the
session on the CPU instead; a GPU it cannot drive fails at the first run. Both would leave a
"cuda" engine running on the CPU, or failing at the first request, so the probe makes a session,
checks which provider it really got, and runs it with its output in device memory.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnxruntime as ort

from .device_graphs import PROBE_INPUT, PROBE_OUTPUT, probe_graph

CUDA_PROVIDER = "CUDAExecutionProvider"
_PROBE_VALUES = np.array([1.0, -2.0, 3.0], dtype=np.float32)


@functools.cache
def cuda_problem() -> str | None:
    """Why CUDA cannot be used, or None when a test run on it worked. Cached for the process."""
    if CUDA_PROVIDER not in ort.get_available_providers():
        return "onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)"
    try:
        return _probe_run()
    except Exception as err:  # onnxruntime raises its own types; any failure means "not usable"
        return f"CUDAExecutionProvider failed a test run ({_first_line(err)})"


def _probe_run() -> str | None:
    options = ort.SessionOptions()
    options.log_severity_level = 4  # its fallback warnings are replaced by our one message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = ort.InferenceSession(probe_graph(), options, providers=[CUDA_PROVIDER])
    if CUDA_PROVIDER not in session.get_providers():
        return (
            "CUDAExecutionProvider is installed but did not load "
            "(are the CUDA and cuDNN libraries it was built for installed?)"
        )
    binding = session.io_binding()
    binding.bind_cpu_input(PROBE_INPUT, _PROBE_VALUES)
    binding.bind_output(PROBE_OUTPUT, "cuda")
    session.run_with_iobinding(binding)
    (result,) = binding.copy_outputs_to_cpu()
    if not np.array_equal(result, _PROBE_VALUES * _PROBE_VALUES):
        return f"CUDAExecutionProvider computed a wrong result in a test run ({result!r})"
    return None


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__
