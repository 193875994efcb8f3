"""Export an SBV2 JP-Extra model folder to the speaker part of a Yomiage bundle.

    python -m tools.export MODEL_DIR|FILE.aivm --out BUNDLE_DIR [--name SPEAKER]
                           [--checkpoint FILE] [--form yomiage|hayakoe|sbv2|aivmx]

MODEL_DIR holds SBV2's ``config.json``, one checkpoint (``*.safetensors``, or ``*.pth``) and
``style_vectors.npy``; an ``.aivm`` file (AivisHub) holds all three. Written:
``BUNDLE_DIR/onnx/speakers/<name>/{config.json, style_vectors.npy, synthesizer.onnx}`` and, but
for the sbv2 and aivmx forms, ``duration_predictor.onnx``; the graph contracts are in
docs/ARCHITECTURE.md.

``--form`` writes the graphs as another exporter does, so that the engine is tested on every
dialect users bring (docs/VOICES.md): ``hayakoe`` (its current exporter: the model wrapped as
``net_g``, a second output ``durations``, the layers traced in Style-Bert-VITS2's layout:
``model.attention.sbv2_layout``), ``sbv2`` (Style-Bert-VITS2's ``convert_onnx.py``: the
generator traced as it is in that layout, its ``infer``'s seven outputs, other input names,
0-d scalars, onnxsim, no duration graph) and ``aivmx`` (that graph with the AIVM metadata,
written by aivmlib as ``BUNDLE_DIR/<name>.aivmx``).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from tqdm import tqdm

from .model import ModelConfig, ModelFileError, SynthesizerTrn, load_config, load_model
from .model.attention import sbv2_layout
from .model.config import N_SYMBOLS, STYLE_DIM
from .model.errors import first_line
from .model.synthesizer import SBV2Outputs

OPSET = 17
SPEAKERS_DIR = Path("onnx/speakers")
SYNTHESIZER_FILE = "synthesizer.onnx"
DURATION_FILE = "duration_predictor.onnx"
TEXT_INPUTS = ("x", "x_lengths", "sid", "tone", "language", "bert", "style_vec")
SYNTHESIZER_INPUTS = (*TEXT_INPUTS, "noise_scale", "length_scale", "noise_scale_w", "sdp_ratio")
DURATION_INPUTS = (*TEXT_INPUTS, "length_scale", "noise_scale_w", "sdp_ratio")
DYNAMIC_AXES = {
    "x": {1: "phones"},
    "tone": {1: "phones"},
    "language": {1: "phones"},
    "bert": {2: "phones"},
    "audio": {2: "samples"},
    "durations": {1: "phones"},
}
SCALAR_INPUTS = ("noise_scale", "length_scale", "noise_scale_w", "sdp_ratio")


@dataclass(frozen=True)
class Form:
    """How one exporter writes a voice's synthesizer (facts in ../shared/FACTS.md)."""

    wrapper: str  # the attribute holding the model: the node scopes' first part
    with_durations: bool  # a second output ``durations`` [1, phones]
    sbv2_layers: bool  # attention and feed-forward layers traced as Style-Bert-VITS2's are


# Both write SYNTHESIZER_INPUTS, the output ``audio`` and duration_predictor.onnx beside it.
FORMS = {"yomiage": Form("model", False, False), "hayakoe": Form("net_g", True, True)}
# Style-Bert-VITS2's convert_onnx.py (the JP-Extra branch): its argument order, input names and
# dynamic axes; only the first output is named. It leaves the opset to torch (< 2.4 in its
# requirements: 17, ours) and simplifies the traced graph with onnxsim.
CONVERTER_FORMS = ("sbv2", "aivmx")
CONVERTER_ORDER = (*TEXT_INPUTS, "length_scale", "sdp_ratio", "noise_scale", "noise_scale_w")
CONVERTER_NAMES = {"x": "x_tst", "x_lengths": "x_tst_lengths", "tone": "tones"}
CONVERTER_INPUTS = tuple(CONVERTER_NAMES.get(name, name) for name in CONVERTER_ORDER)
CONVERTER_AUDIO = "output"
CONVERTER_DYNAMIC_AXES = {
    "x_tst": {0: "batch_size", 1: "x_tst_max_length"},
    "x_tst_lengths": {0: "batch_size"},
    "sid": {0: "batch_size"},
    "tones": {0: "batch_size", 1: "x_tst_max_length"},
    "language": {0: "batch_size", 1: "x_tst_max_length"},
    "bert": {0: "batch_size", 2: "x_tst_max_length"},
    "style_vec": {0: "batch_size"},
}
JP_LANGUAGE_ID = 1
JP_TONE_START = 6
TRACE_PHONES = 9  # any length works: every length axis is dynamic; short keeps tracing fast


class SynthesizerGraph(torch.nn.Module):
    """synthesizer.onnx as ``form`` writes it: the text inputs and four scalars -> the audio
    [1, 1, S] (and, in hayakoe's form, the frames per phone [1, P])."""

    def __init__(self, model: SynthesizerTrn, form: Form) -> None:
        super().__init__()
        self.form = form
        self.add_module(form.wrapper, model)  # the wrapper names the node scopes

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        model = getattr(self, self.form.wrapper)
        return model(*inputs, with_frames=self.form.with_durations)


class ConverterGraph(SynthesizerTrn):
    """synthesizer.onnx as Style-Bert-VITS2's converter writes it. It traces the generator
    itself (node scopes ``/dec/...`` with no wrapper) with ``forward`` replaced by ``infer`` in
    its own argument order, so the graph returns the whole of ``infer``'s result."""

    def forward(self, *inputs: torch.Tensor) -> SBV2Outputs:  # type: ignore[override]
        # The converter's argument order, not ``infer``'s.
        return self.infer_with_latents(**dict(zip(CONVERTER_ORDER, inputs, strict=True)))


class DurationGraph(torch.nn.Module):
    """duration_predictor.onnx: ``DURATION_INPUTS`` -> ``durations`` [1, P]."""

    def __init__(self, model: SynthesizerTrn) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model.predict_durations(**dict(zip(DURATION_INPUTS, inputs, strict=True)))


def example_inputs(
    bert_dim: int, n_phones: int = TRACE_PHONES, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Plausible graph inputs (blank-interleaved JP phones, default scalars) for tracing/tests."""
    generator = torch.Generator().manual_seed(seed)
    phones = torch.randint(1, N_SYMBOLS, (1, n_phones), generator=generator)
    tones = JP_TONE_START + torch.randint(0, 2, (1, n_phones), generator=generator)
    languages = torch.full((1, n_phones), JP_LANGUAGE_ID)
    for values in (phones, tones, languages):
        values[:, ::2] = 0  # add_blank's blanks: phone, tone and language all 0
    return {
        "x": phones,
        "x_lengths": torch.tensor([n_phones]),
        "sid": torch.tensor([0]),
        "tone": tones,
        "language": languages,
        "bert": torch.randn(1, bert_dim, n_phones, generator=generator),
        "style_vec": torch.randn(1, STYLE_DIM, generator=generator),
        "noise_scale": torch.tensor([0.6]),
        "length_scale": torch.tensor([1.0]),
        "noise_scale_w": torch.tensor([0.8]),
        "sdp_ratio": torch.tensor([0.2]),
    }


def export_graph(
    module: torch.nn.Module,
    inputs: dict[str, torch.Tensor],
    input_names: Sequence[str],
    output_names: Sequence[str],
    path: Path,
) -> None:
    """Trace ``module`` to ONNX (opset 17, TorchScript exporter) and check the written file."""
    with warnings.catch_warnings(), torch.no_grad():
        # Tracer chatter (shape-dependent Python values, deprecation of dynamo=False) is noise here:
        # the parity tests check that one graph serves every length.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            tuple(inputs[name] for name in input_names),
            str(path),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes={
                k: DYNAMIC_AXES[k] for k in (*input_names, *output_names) if k in DYNAMIC_AXES
            },
            opset_version=OPSET,
            dynamo=False,
        )
    _declare_output_shapes(path)
    onnx.checker.check_model(str(path), full_check=True)


OUTPUT_SHAPES: dict[str, tuple[int | str, ...]] = {
    "audio": (1, 1, "samples"),
    "durations": (1, "phones"),
}


def _declare_output_shapes(path: Path) -> None:
    """Write the contract's output shapes (the tracer leaves the batch axis as an odd symbol)."""
    graph_model = onnx.load(str(path))
    for output in graph_model.graph.output:
        dims = output.type.tensor_type.shape.dim
        shape = OUTPUT_SHAPES[output.name]
        for dim, size in zip(dims, shape, strict=True):
            if isinstance(size, int):
                dim.dim_value = size
            else:
                dim.dim_param = size
    onnx.save(graph_model, str(path))


@dataclass(frozen=True)
class ModelFolder:
    """The three files of an SBV2 model folder that the exporter reads."""

    config: Path
    checkpoint: Path
    style_vectors: Path

    @classmethod
    def find(cls, folder: Path, checkpoint: Path | None, scratch: Path) -> ModelFolder:
        """The files of a model folder, or of an .aivm file (its config and style vectors
        unpacked into ``scratch``; the file itself is the checkpoint)."""
        if folder.suffix == ".aivm" and folder.is_file():
            from .aivm import AivmFileError, unpack_aivm  # aivmlib: for .aivm files only

            try:
                config, style_vectors = unpack_aivm(folder, scratch)
            except AivmFileError as err:
                raise ModelFileError(folder, str(err).partition(": ")[2]) from None
            return cls(config=config, checkpoint=folder, style_vectors=style_vectors)
        if not folder.is_dir():
            raise ModelFileError(folder, "model folder does not exist")
        return cls(
            config=folder / "config.json",
            checkpoint=checkpoint or _single_checkpoint(folder),
            style_vectors=folder / "style_vectors.npy",
        )


def _single_checkpoint(folder: Path) -> Path:
    candidates = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.pth"))
    if not candidates:
        raise ModelFileError(folder, "no checkpoint (*.safetensors or *.pth) in the model folder")
    if len(candidates) > 1:
        names = ", ".join(p.name for p in candidates)
        raise ModelFileError(folder, f"several checkpoints ({names}); choose one with --checkpoint")
    return candidates[0]


def load_style_vectors(path: Path, config: ModelConfig) -> np.ndarray:
    """float32 [n_styles, 256] with a row for every style of ``data.style2id``."""
    if not path.is_file():
        raise ModelFileError(path, "file is missing")
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ModelFileError(path, f"not a readable .npy file ({first_line(err)})") from None
    if vectors.ndim != 2 or vectors.shape[1] != STYLE_DIM or vectors.dtype.kind != "f":
        raise ModelFileError(
            path, f"expected float [n_styles, {STYLE_DIM}], found {vectors.dtype} {vectors.shape}"
        )
    needed = max(config.style2id.values()) + 1
    if vectors.shape[0] < needed:
        raise ModelFileError(
            path, f"{vectors.shape[0]} rows, but config.json's style2id needs {needed}"
        )
    if not np.isfinite(vectors).all():
        raise ModelFileError(path, "holds NaN or infinite values")
    return vectors.astype(np.float32)


def export_speaker(
    model_dir: str | Path,
    bundle_root: str | Path,
    name: str | None = None,
    checkpoint: str | Path | None = None,
    progress: bool = True,
    form: str = "yomiage",
    about: tuple[str, str] | None = None,
) -> Path:
    """Write ``<bundle_root>/onnx/speakers/<name>/`` in exporter ``form`` (``FORMS``); returns
    that folder (for ``aivmx``: the file ``<bundle_root>/<name>.aivmx``). ``model_dir``: an
    SBV2 model folder, or an .aivm file (AivisHub's checkpoint with its metadata). ``about``:
    an AIVMX's (description, licence) for its manifest (default: none)."""
    model_dir = Path(model_dir)
    with tempfile.TemporaryDirectory(prefix="model-") as scratch:
        files = ModelFolder.find(model_dir, Path(checkpoint) if checkpoint else None, Path(scratch))
        name = name or (model_dir.stem if model_dir.is_file() else model_dir.resolve().name)
        return _export_files(files, Path(bundle_root), name, progress, form, about)


def _export_files(
    files: ModelFolder,
    bundle_root: Path,
    name: str,
    progress: bool,
    form: str,
    about: tuple[str, str] | None,
) -> Path:
    config = load_config(files.config)
    style_vectors = load_style_vectors(files.style_vectors, config)
    model = load_model(config, files.checkpoint)  # every input is checked before writing
    if form == "aivmx":
        return _export_aivmx(model, files, bundle_root, name, about)
    out = bundle_root / SPEAKERS_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(files.config, out / "config.json")
    np.save(out / "style_vectors.npy", style_vectors)
    if form == "sbv2":
        export_converter_graph(model, out / SYNTHESIZER_FILE)
        return out
    chosen = FORMS[form]
    graphs = [
        (SynthesizerGraph(model, chosen), chosen, SYNTHESIZER_FILE),
        (DurationGraph(model), None, DURATION_FILE),
    ]
    with sbv2_layout(model) if chosen.sbv2_layers else contextlib.nullcontext():
        for module, synthesizer_form, file_name in tqdm(
            graphs, desc=f"export {out.name}", unit="graph", disable=not progress
        ):
            _export_one(module, synthesizer_form, config, out / file_name)
    return out


def _export_one(
    module: torch.nn.Module, form: Form | None, config: ModelConfig, path: Path
) -> None:
    """One graph: a synthesizer in ``form``, or (None) the duration predictor."""
    inputs = example_inputs(config.net.bert_dim)
    if form is None:
        export_graph(module, inputs, DURATION_INPUTS, ["durations"], path)
        return
    outputs = ["audio", *(["durations"] if form.with_durations else [])]
    export_graph(module, inputs, SYNTHESIZER_INPUTS, outputs, path)


def export_converter_graph(model: SynthesizerTrn, path: Path) -> None:
    """Write ``model`` as Style-Bert-VITS2's converter does (``ConverterGraph``): traced with
    0-d scalars, seven outputs of which the first is ``output``, then simplified by onnxsim."""
    from onnxsim import simplify  # needed for this form only

    graph = ConverterGraph(model.net).eval()
    graph.load_state_dict(model.state_dict())
    inputs = example_inputs(model.net.bert_dim)
    inputs.update({name: inputs[name].reshape(()) for name in SCALAR_INPUTS})
    with warnings.catch_warnings(), torch.no_grad(), sbv2_layout(graph):
        warnings.simplefilter("ignore")  # tracer chatter, as in export_graph
        torch.onnx.export(
            graph,
            tuple(inputs[name] for name in CONVERTER_ORDER),
            str(path),
            input_names=list(CONVERTER_INPUTS),
            output_names=[CONVERTER_AUDIO],
            dynamic_axes=CONVERTER_DYNAMIC_AXES,
            opset_version=OPSET,
            dynamo=False,
        )
    simplified, _ = simplify(onnx.load(str(path)))  # the converter ignores the check too
    onnx.save(simplified, str(path))
    onnx.checker.check_model(str(path), full_check=True)


def _export_aivmx(
    model: SynthesizerTrn,
    files: ModelFolder,
    out: Path,
    name: str,
    about: tuple[str, str] | None,
) -> Path:
    """``<out>/<name>.aivmx``: the Style-Bert-VITS2 form of the synthesizer with the AIVM
    metadata (manifest, hyper-parameters, style vectors) as aivmlib writes it."""
    from .aivm import write_aivmx  # aivmlib is needed for this form only

    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.aivmx"
    with tempfile.TemporaryDirectory(prefix="aivmx-") as scratch:
        graph = Path(scratch) / "model.onnx"
        export_converter_graph(model, graph)
        write_aivmx(graph, files.config, files.style_vectors, name, target, about)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model_dir", type=Path, help="SBV2 model folder, or an .aivm file")
    parser.add_argument("--out", type=Path, required=True, help="bundle root to write into")
    parser.add_argument("--name", help="speaker folder name (default: the model folder's name)")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file when there are several")
    parser.add_argument(
        "--form",
        choices=sorted([*FORMS, *CONVERTER_FORMS]),
        default="yomiage",
        help="which exporter's dialect",
    )
    args = parser.parse_args(argv)
    torch.set_flush_denormal(True)
    try:
        folder = export_speaker(
            args.model_dir, args.out, args.name, args.checkpoint, form=args.form
        )
    except ModelFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. an output folder that cannot be written
        print(
            f"error: {err.filename or args.out}: {err.strerror or first_line(err)}", file=sys.stderr
        )
        return 2
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
