"""The roofline's arithmetic (tools/roofline.py): FLOPs counted from the shapes onnxruntime's
profiler records, on a small graph whose FLOPs are known, and the stage each node belongs to.
No timing is asserted: a profile's durations are whatever this box took."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tools import roofline

T = 50  # frames of the small graph's input
# Conv [1, 4, T] -> [1, 8, T], kernel 3 (fused with its Relu by onnxruntime into a FusedConv).
CONV_FLOPS = 2 * T * 8 * 4 * 3
# ConvTranspose [1, 8, T] -> [1, 16, 2T], stride 2, kernel 4: every input sample meets the weight.
TRANSPOSED_FLOPS = 2 * T * 8 * 16 * 4
# MatMul [1, T, 8] x [8, 6] after a Transpose of the conv's output.
MATMUL_FLOPS = 2 * T * 8 * 6
# Gemm [1, 16] x [16, 5].
GEMM_FLOPS = 2 * 16 * 5


def _small_graph() -> bytes:
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name="/model/flow/conv", pads=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="/model/flow/relu"),
        helper.make_node(
            "ConvTranspose",
            ["r", "w2", "b2"],
            ["up"],
            name="/model/dec/ups.0/ConvTranspose",
            strides=[2],
            pads=[1, 1],
        ),
        helper.make_node("Transpose", ["r"], ["rt"], name="/model/enc_p/t", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["rt", "w3"], ["mm"], name="/model/enc_p/MatMul"),
        helper.make_node("Gemm", ["g", "w4"], ["gemm"], name="/model/sdp/Gemm"),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "T"]),
            helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 16]),
        ],
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
            for name in ("up", "mm", "gemm")
        ],
        [
            weight("w1", 8, 4, 3),
            weight("w2", 8, 16, 4),
            weight("b2", 16),
            weight("w3", 8, 6),
            weight("w4", 16, 5),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return bytes(model.SerializeToString())


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> list[roofline.NodeRun]:
    """The node runs of three runs of the small graph, profiled as the engine's sessions are
    (a file named after the graph: a front's, so that stages come from the node names)."""
    folder = tmp_path_factory.mktemp("profile")
    graph = folder / "small.onnx"
    graph.write_bytes(_small_graph())
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "synthesizer.front")
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    feeds = {
        "x": np.ones((1, 4, T), dtype=np.float32),
        "g": np.ones((1, 16), dtype=np.float32),
    }
    for _ in range(3):
        session.run(None, feeds)
    written = Path(session.end_profiling())
    # onnxruntime pre-packs the ConvTranspose's weight and records its bias alone.
    return list(roofline.profile_runs(written, roofline.graph_weights(graph)))


def test_the_flops_of_a_small_graph_are_counted_from_its_profile(
    profiled: list[roofline.NodeRun],
) -> None:
    counted = sum(roofline.node_flops(run.op, run.inputs, run.outputs) for run in profiled)
    assert counted == 3 * (CONV_FLOPS + TRANSPOSED_FLOPS + MATMUL_FLOPS + GEMM_FLOPS)
    by_op = {run.op: roofline.node_flops(run.op, run.inputs, run.outputs) for run in profiled}
    assert by_op["FusedConv"] == CONV_FLOPS  # onnxruntime fused the Relu: still the Conv's work
    assert by_op["ConvTranspose"] == TRANSPOSED_FLOPS
    assert by_op["FusedMatMul"] == MATMUL_FLOPS  # the Transpose folded into the product


def test_the_stages_of_a_small_graph_come_from_its_node_names(
    profiled: list[roofline.NodeRun],
) -> None:
    found = roofline.stages(profiled)
    assert found["flow"].flops == 3 * CONV_FLOPS
    assert found["decoder 16 ch"].flops == 3 * TRANSPOSED_FLOPS
    assert found["text encoder"].flops == 3 * MATMUL_FLOPS
    assert found["durations, in the front"].flops == 3 * GEMM_FLOPS
    assert all(stage.seconds >= 0 for stage in found.values())
    # Runs before a moment are left out: the warm-ups of a measurement.
    last = max(run.started_ns for run in profiled)
    assert sum(s.nodes for s in roofline.stages(profiled, since_ns=last + 1).values()) == 0
    assert sum(s.nodes for s in found.values()) == len(profiled)


def test_products_count_their_shared_axis_whichever_side_holds_it() -> None:
    # [2, 3, 5, 7] x [2, 3, 7, 9]; the same with A transposed ([.., 7, 5]) or B ([.., 9, 7]).
    expected = 2 * 2 * 3 * 5 * 9 * 7
    out = [[2, 3, 5, 9]]
    assert roofline.node_flops("MatMul", [[2, 3, 5, 7], [2, 3, 7, 9]], out) == expected
    assert roofline.node_flops("FusedMatMul", [[2, 3, 7, 5], [2, 3, 7, 9]], out) == expected
    assert roofline.node_flops("FusedMatMul", [[2, 3, 5, 7], [2, 3, 9, 7]], out) == expected
    # A broadcast B and BERT's int8 products alike.
    assert roofline.node_flops(
        "DynamicQuantizeMatMul", [[1, 40, 1024], [1024, 4096]], [[1, 40, 4096]]
    ) == (2 * 40 * 1024 * 4096)


def test_a_blocked_2d_convolution_counts_its_output_positions_times_its_weight() -> None:
    # A lifted decoder convolution [1, 128, 1, 3000], kernel 11, grouped weights alike.
    flops = roofline.node_flops(
        "Conv", [[1, 128, 1, 3000], [128, 128, 1, 11], [128]], [[1, 128, 1, 3000]]
    )
    assert flops == 2 * 3000 * 128 * 128 * 11
    depthwise = roofline.node_flops("Conv", [[2, 64, 1, 10], [64, 1, 1, 1]], [[2, 64, 1, 10]])
    assert depthwise == 2 * 2 * 10 * 64


@pytest.mark.parametrize(
    ("graph", "node", "inputs", "outputs", "stage"),
    [
        ("bert_q8", "/model/encoder/layer.0/MatMul", [[1, 9, 1024]], [[1, 9, 1024]], "BERT"),
        (
            "duration_predictor",
            "/enc_p/encoder/Conv",
            [[1, 192, 9]],
            [[1, 192, 9]],
            "duration pass",
        ),
        ("synthesizer.durations", "/model/sdp/Conv", [[1, 192, 9]], [[1, 192, 9]], "duration pass"),
        (
            "synthesizer.decoder",
            "yomiage/Identity/3",
            [[2, 32, 1, 99]],
            [[2, 32, 1, 99]],
            "decoder 32 ch",
        ),
        # The last convolution writes the audio: it is counted with the width it reads.
        (
            "synthesizer.decoder",
            "/model/dec/conv_post/Conv",
            [[1, 16, 1, 99]],
            [[1, 1, 1, 99]],
            "decoder 16 ch",
        ),
        ("synthesizer.decoder", "yomiage/Gather/5", [[4]], [[]], "decoder, other"),
        ("synthesizer.front", "/model/flow/flows.0/enc/Mul", [[1, 192, 9]], [[1, 192, 9]], "flow"),
        ("synthesizer.front", "/enc_p/encoder/Conv", [[1, 192, 9]], [[1, 192, 9]], "text encoder"),
        (
            "synthesizer.front",
            "/dp/conv_1/Conv",
            [[1, 192, 9]],
            [[1, 256, 9]],
            "durations, in the front",
        ),
        ("synthesizer.front", "Gelu_token_3", [[1, 9, 192]], [[1, 9, 192]], "front, other"),
        # A synthesizer run whole: its decoder's nodes by their scope.
        ("synthesizer", "/dec/resblocks.3/Conv", [[1, 64, 800]], [[1, 64, 800]], "decoder 64 ch"),
    ],
)
def test_each_node_belongs_to_the_stage_of_its_session_and_name(
    graph: str, node: str, inputs: list[list[int]], outputs: list[list[int]], stage: str
) -> None:
    assert roofline.stage_of(graph, node, inputs, outputs) == stage


def test_the_table_gives_each_stage_its_rate_and_the_flow_its_share_of_the_decoder() -> None:
    measured = {
        "text_chars": 10,
        "audio_s": 4.0,
        "reps": 2,
        "threads": 2,
        "streamed_s": [1.0, 1.0],
        "peak_gflops": 100.0,
        "stages": [
            {"name": "flow", "nodes": 20, "flops": 30 * 10**9, "seconds": 0.6},
            {"name": "decoder 128 ch", "nodes": 10, "flops": 200 * 10**9, "seconds": 2.0},
            {"name": "decoder 16 ch", "nodes": 10, "flops": 40 * 10**9, "seconds": 1.0},
            {"name": "BERT", "nodes": 4, "flops": 8 * 10**9, "seconds": 0.4},
        ],
    }
    assert math.isclose(roofline.flow_to_decoder(measured), 0.2)
    table = "\n".join(roofline.markdown(measured))
    # Per stream: 15 GFLOP in 0.3 s = 50 GFLOP/s, half the box's peak.
    assert "| flow | 10 | 15.0 | 0.300 | 15.0% | 50 | 50% |" in table
    assert "| decoder 128 ch | 5 | 100.0 | 1.000 | 50.0% | 100 | 100% |" in table
    assert "| BERT | 2 | 4.0 | 0.200 | 10.0% | 20 (int8 ops) | - |" in table
    assert "Flow / decoder time: 0.200 (target <= 0.16: **not met**)" in table
    rows = [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| BERT", "| flow", "| decoder 128 ch", "| decoder 16 ch"]
