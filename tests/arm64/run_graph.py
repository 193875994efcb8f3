"""Prepares a decoder graph with the passes this machine's onnxruntime calls for and runs it
(test_aarch64.py runs it inside the emulated arm64 rootfs, where onnxruntime has no blocked
kernels). Standard input: one .npz holding ``graph`` (the published graph's bytes) and the feeds;
standard output: one .npz holding ``output`` and ``ops`` (the prepared graph's operators).

    python run_graph.py < in.npz > out.npz
"""

from __future__ import annotations

import io
import json
import sys


def main() -> None:
    import numpy as np
    import onnxruntime as ort
    from yomiage_engine.onnx import wire
    from yomiage_engine.onnx.machine import Machine
    from yomiage_engine.onnx.passes.registry import GraphKind, prepared_in_memory
    from yomiage_engine.onnx.passes.vits_decoder_span import SPAN_INPUT

    with np.load(io.BytesIO(sys.stdin.buffer.read())) as packed:
        published = packed["graph"].tobytes()
        feeds = {name: packed[name] for name in packed.files if name != "graph"}
    graph = prepared_in_memory(published, GraphKind.DECODER, Machine(threads=1))
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    if SPAN_INPUT in {value.name for value in session.get_inputs()}:  # the whole window
        frames = max(value.shape[-1] for value in feeds.values())
        feeds[SPAN_INPUT] = np.array([0, frames], dtype=np.int64)
    (output,) = session.run(None, feeds)
    ops = [node.op_type for node in wire.read_graph(memoryview(graph)).nodes.values()]
    out = io.BytesIO()
    np.savez(out, output=output, ops=np.array(json.dumps(ops)))
    sys.stdout.buffer.write(out.getvalue())


if __name__ == "__main__":
    main()
