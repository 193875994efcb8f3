"""A graph prepared for this CPU in a child process, so that the engine's own process never holds
what preparing costs.

Preparing a graph (its load-time passes, onnxruntime's full optimisation and pre-packing, the
optimised graph saved) takes the whole graph and onnxruntime's working copies into the heap: on
the full-size bundle's first start the engine's process peaked at 873 MB of anonymous memory for
one speaker and kept 445 MB, where a start from prepared files holds 119 MB (docs/PERFORMANCE.md,
"First start"); a heap that grew so far is not handed back after the sessions are gone, and a
2 GB Raspberry Pi running Home Assistant has no such room to spare. So each graph is prepared by
a fresh interpreter (``sys.executable``) of its own, which exits when its graph is saved: the
engine's process only ever maps prepared files, and the box needs one graph's preparation at a
time beside it (its weights handed to onnxruntime in a file apart, which it maps: sessions.py).

A fresh interpreter rather than a fork: the engine may live in Home Assistant's process, whose
threads and event loop a fork would copy half-way. The child imports this engine package from its
folder under its standalone name (``yomiage_engine``), not through whatever package holds it
(Home Assistant's ``custom_components.yomiage``, whose ``__init__`` imports Home Assistant), and
it gets the parent's ``sys.path``, which holds the packages Home Assistant installed at run time.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import BundleError
from .passes.registry import GraphKind

_LOGGER = logging.getLogger(__name__)

ENGINE_ROOT = Path(__file__).resolve().parent.parent
STANDALONE_NAME = "yomiage_engine"
# The child's exit status where its graph is no loadable ONNX graph (its problem: the last line
# it wrote to stderr); any other failure is the child's own.
BAD_GRAPH = 3
# What the child runs: this package imported from ENGINE_ROOT under STANDALONE_NAME, then main().
_BOOTSTRAP = """\
import importlib.util, os, sys
root, name = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location(
    name, os.path.join(root, "__init__.py"), submodule_search_locations=[root]
)
package = importlib.util.module_from_spec(spec)
sys.modules[name] = package
spec.loader.exec_module(package)
sys.exit(importlib.import_module(name + ".onnx.prepare").main(sys.argv[3:]))
"""


def child_command(source: Path, saved: Path, kind: GraphKind, threads: int) -> list[str]:
    """The command line of a child that prepares ``source``, a graph of ``kind``, into the
    folder ``saved``."""
    arguments = [str(ENGINE_ROOT), STANDALONE_NAME, str(source), str(saved), kind.value]
    arguments.append(str(threads))
    # -P: the child's working folder (Home Assistant's configuration) is no place to import from.
    return [sys.executable, "-P", "-c", _BOOTSTRAP, *arguments]


def prepare_in_child(
    source: Path, saved: Path, kind: GraphKind, threads: int, shown_as: Path
) -> None:
    """Prepare ``source``, a graph of ``kind``, into ``saved`` (which must not exist yet) in a
    child process.

    BundleError, naming ``shown_as``, where the graph does not load or the child fails (killed,
    crashed, an exception); OSError where no child can be started. Whatever a failed child wrote
    is the caller's to remove (it lies in the caller's scratch folder)."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    finished = subprocess.run(
        child_command(source, saved, kind, threads),
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    said = [line.strip() for line in finished.stderr.splitlines() if line.strip()]
    if finished.returncode == 0:
        for line in said:  # the child's warnings (a rewrite that did not load), passed on
            _LOGGER.warning("Preparing %s: %s", shown_as, line)
        return
    if finished.returncode == BAD_GRAPH and said:
        raise BundleError(str(shown_as), said[-1])
    raise BundleError(
        str(shown_as), f"preparing it for this CPU failed: {_failure(finished, said)}"
    )


def _failure(finished: subprocess.CompletedProcess[str], said: list[str]) -> str:
    """Why a child failed, in a line: its signal or exit status, and its last words."""
    status = finished.returncode
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        # The kernel's out-of-memory killer sends SIGKILL; little else does unasked.
        likely = ", most likely for want of memory" if status == -signal.SIGKILL else ""
        why = f"the child process was killed by {name}{likely}"
    else:
        why = f"the child process exited with status {status}"
    return f"{why} ({said[-1][:200]})" if said else why


def main(argv: Sequence[str]) -> int:
    """The child: prepare one graph (``SOURCE SAVED KIND THREADS``), then exit."""
    from .sessions import SessionFactory  # the child's import; sessions.py starts children

    source, saved, kind, threads = Path(argv[0]), Path(argv[1]), GraphKind(argv[2]), int(argv[3])
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    factory = SessionFactory(device="cpu", threads=threads, use_cache=False)
    try:
        factory.prepare_here(source, saved, kind)
    except BundleError as err:
        print(err.problem, file=sys.stderr)
        return BAD_GRAPH
    return 0
