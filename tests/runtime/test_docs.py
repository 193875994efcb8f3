"""The papers name only what exists: README.md, docs/*.md and the add-on's docs (addon/*.md).

Read without importing our code (``ast`` over every ``.py`` file of the repository's own folders).

What counts as a code reference: an inline code span (fenced blocks are examples: shell, YAML,
Python sketches; ARCHITECTURE.md's layer listing has its own test below), and a markdown link.

- A path ending in ``.py`` (``onnx/passes/registry.py``, ``translated_errors.py``, a test's
  file): a file of ours whose path is it or ends with ``/`` and it (so ``engine/onnx/sessions.py``
  and ``onnx/sessions.py`` both name custom_components/yomiage/engine/onnx/sessions.py).
- A path whose first part is an entry of the repository's root (``scripts/demo``,
  ``addon/config.yaml``, ``assets/brand/*.svg``): it exists (a glob: something matches), unless
  it lies in a folder .gitignore names: made at run time (``custom_components/yomiage/models/``,
  the downloads), never in the checkout.
- A dotted name whose head is a module of ours (a file's stem, or a package's folder) or a class of
  ours (``decode_speed.DecodeSpeed.expected_s``, ``machine.blocked_kernel_block()``,
  ``Engine.stream``): each next part is defined in what the one before names (in a module at its
  top level or in one of its classes, so ``engine.synthesize`` is its Engine's method; in a class,
  in its body or as a ``self`` attribute). Imports do not count: ``pieces.DecodeSpeed`` is not
  ``pieces``'s. A dotted path into our packages (``tools.bench``, also as a command's word) is a
  module. ``yomiage.X`` is a module of the ``yomiage`` package or a service of services.yaml
  (``yomiage.prepare``).
- Not checked as code: a head that is a Home Assistant integration (``tts.speak``,
  ``assist_satellite.announce``, entity ids: integration/test_docs_entity_ids.py checks the tts
  ids), any other head (onnxruntime's option strings such as ``session.intra_op.allow_spinning``,
  config keys such as ``data.spk2id``, graph names such as ``enc_p.bert_proj``), and a dotted
  word that ends in a file extension (``results.json``).
- A private name (``_first_in_one_turn``), a CamelCase name of two humps or more (``GraphEdit``),
  a call without arguments (``stream()``) and a test's name (``test_...``): defined somewhere in
  our Python.
- An upper-case name with an underscore (``PAUSE_WINDOW_CHARS``, ``YOMIAGE_CACHE_DIR``): a word of
  our code (the folders of our Python and addon/; a constant, an environment variable, a build
  argument of the add-on's Dockerfile).
- A relative link target (``[docs/VOICES.md](docs/VOICES.md)``): exists beside the document.

``FOREIGN`` lists the few names of other projects the docs cite in code spans (their files and
classes), by project: a name there is not ours and not checked.

History: docs/PERFORMANCE.md tells what was tried, kept and removed. A removed name is written
without backticks, or with its commit after the closing backtick: the one it stood in
(``engine/lanes.py`` of 2fcb1c6) or the one that removed it (``engine/lanes.py`` (removed in
259c069)). Then it is history, not checked.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import homeassistant.components
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "addon").glob("*.md")])
# The folders that hold our Python (the engine and integration, the server and CLI, the PyTorch
# tools, the tests, the add-on's run script).
PYTHON_ROOTS = ("custom_components", "yomiage", "tools", "tests", "addon", "scripts")
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
# Where every module must appear in ARCHITECTURE.md's layer listing.
LISTED_PACKAGES = ("custom_components/yomiage", "yomiage")
SERVICES = ROOT / "custom_components" / "yomiage" / "services.yaml"

# Other projects' names the docs cite in code spans. Keep it short: a name of ours never goes here.
FOREIGN = {
    # Style-Bert-VITS2 (its converter, model and runtime: docs/VOICES.md, PERFORMANCE.md)
    "convert_onnx.py",
    "attentions.py",
    "tts_model.py",
    "style_bert_vits2/models/infer_onnx.py",
    "style_bert_vits2/models/models_jp_extra.py",
    "TTSModel",
    # aivmlib and AivisSpeech Engine (docs/VOICES.md)
    "aivmlib/__init__.py",
    "schemas/aivm_manifest.py",
    "style_bert_vits2_tts_engine.py",
    "aivm_infos_repository.py",
    "aivm_manager.py",
    "voicevox_engine/utility/aivishub_client.py",
    # hayakoe's exporter (docs/VOICES.md)
    "dev-tools/cli/export/exporter.py",
    # onnxruntime's NCHWc convolution (snchwc.cpp) and Linux's /proc/<pid>/status
    "TotalWork",
    "FilterSetSize",
    "VmHWM",
}
FILE_EXTENSIONS = {
    "aivm", "aivmx", "bin", "cpp", "flac", "json", "md", "npy", "ogg", "onnx", "png", "safetensors",
    "sh", "svg", "toml", "tsv", "txt", "wav", "yaml", "yml",
}  # fmt: skip
# A code span: within one paragraph (a blank line ends it), across its lines.
_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n\s*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"^{_IDENTIFIER}(?:\.{_IDENTIFIER})+(?:\(\))?$")
_CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z])[A-Za-z0-9]*$")
_CALL = re.compile(rf"^{_IDENTIFIER}\(\)$")
_PRIVATE = re.compile(rf"^_{_IDENTIFIER}(?:\(\))?$")
_TEST = re.compile(r"^test_\w+$")
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_WORD = re.compile(r"\w+")
# A removed name with its commit: `engine/lanes.py` of 2fcb1c6, `engine/lanes.py` (removed in
# 259c069).
_HISTORY = re.compile(r"^ (?:of|\(removed in) [0-9a-f]{7,40}\b")


# -- the documents ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Span:
    doc: Path
    line: int
    text: str
    history: bool  # followed by its commit (_HISTORY)

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}: `{self.text}`"


def prose(text: str) -> str:
    """``text`` with its fenced blocks blanked (lines kept, so line numbers stay)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return "\n".join(lines)


def code_spans(doc: Path) -> Iterator[Span]:
    text = prose(doc.read_text(encoding="utf-8"))
    for match in _SPAN.finditer(text):
        content = " ".join(match.group(2).split())
        if content:
            line = text.count("\n", 0, match.start()) + 1
            history = bool(_HISTORY.match(text[match.end() :]))
            yield Span(doc, line, content, history)


# -- our Python, read with ast -------------------------------------------------------------------
@dataclass
class Module:
    names: set[str]  # defined at its top level or in one of its top-level classes
    classes: dict[str, set[str]]  # its top-level classes' members


@dataclass
class Definitions:
    modules: dict[str, list[Module]] = field(default_factory=lambda: defaultdict(list))  # by stem
    classes: dict[str, list[set[str]]] = field(default_factory=lambda: defaultdict(list))
    everywhere: set[str] = field(default_factory=set)  # every name defined, at any depth
    files: list[str] = field(default_factory=list)  # every file of ours, relative (posix)


def python_files() -> Iterator[Path]:
    for folder in PYTHON_ROOTS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def _defined(node: ast.AST) -> set[str]:
    """The names ``node`` itself defines: a function, a class, an assignment's targets."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}


def _members(node: ast.ClassDef) -> set[str]:
    """What a class defines: methods, class attributes (fields), ``self.x`` assignments."""
    members = {name for child in node.body for name in _defined(child)}
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.ctx, ast.Store)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "self"
        ):
            members.add(inner.attr)
    return members


@functools.cache
def definitions() -> Definitions:
    found = Definitions()
    for folder in PYTHON_ROOTS:
        found.files += [
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            found.everywhere |= _defined(node)
            if isinstance(node, ast.ClassDef):
                found.classes[node.name].append(_members(node))
        module = Module(names=set(), classes={})
        for node in tree.body:
            module.names |= _defined(node)
            if isinstance(node, ast.ClassDef):
                module.classes[node.name] = _members(node)
                module.names |= module.classes[node.name]
        stem = path.parent.name if path.name == "__init__.py" else path.stem
        found.modules[stem].append(module)
    return found


@functools.cache
def code_words() -> frozenset[str]:
    """Every word of our code: the text files of our Python's folders and addon/ (this file
    aside: it quotes the docs' names)."""
    words: set[str] = set()
    for folder in (*PYTHON_ROOTS, "addon"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix == ".md" or "__pycache__" in path.parts or path == Path(__file__):
                continue
            if path.is_file() and path.stat().st_size < 1_000_000:  # not a graph or an image
                try:
                    words.update(_WORD.findall(path.read_text(encoding="utf-8")))
                except UnicodeDecodeError:
                    continue  # binary
    return frozenset(words)


@functools.cache
def home_assistant_domains() -> frozenset[str]:
    (components,) = homeassistant.components.__path__
    return frozenset(p.name for p in Path(components).iterdir() if p.is_dir())


@functools.cache
def services() -> frozenset[str]:
    return frozenset(yaml.safe_load(SERVICES.read_text(encoding="utf-8")))


@functools.cache
def root_entries() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if p.name != ".git")


@functools.cache
def ignored_folders() -> tuple[str, ...]:
    """The folders .gitignore names by their path (``custom_components/yomiage/models/``)."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(
        line.strip().lstrip("/")
        for line in lines
        if line.strip().endswith("/") and not any(c in line for c in "*?[!#")
    )


# -- the rules ----------------------------------------------------------------------------------
def python_path_exists(path: str) -> bool:
    files = definitions().files
    return any(f == path or f.endswith(f"/{path}") for f in files)


def repository_path_exists(path: str) -> bool:
    if any(c in path for c in "*?["):
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


def module_path_exists(dotted: str) -> bool:
    """``tools.bench``: tools/bench.py or tools/bench/; a longer name may go on into it."""
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def dotted_name_exists(name: str) -> bool | None:
    """True or False for a name of ours; None for a name that is not ours (not checked)."""
    head, *rest = name.removesuffix("()").split(".")
    if rest[-1] in FILE_EXTENSIONS:
        return None
    if head == "yomiage":
        return rest[0] in services() or module_path_exists(name.removesuffix("()"))
    if head in home_assistant_domains():
        return None
    if head in ("tools", "tests", "custom_components"):
        return module_path_exists(name.removesuffix("()"))
    found = definitions()
    if head in found.modules:
        return any(_defined_in_module(module, rest) for module in found.modules[head])
    if head in found.classes:
        return any(_defined_in_class(members, rest) for members in found.classes[head])
    return None


def _defined_in_module(module: Module, parts: list[str]) -> bool:
    first, *rest = parts
    if first not in module.names:
        return False
    if rest and first in module.classes:
        return _defined_in_class(module.classes[first], rest)
    return True


def _defined_in_class(members: set[str], parts: list[str]) -> bool:
    return parts[0] in members  # deeper parts (an attribute's attribute) are not followed


def reference_problem(span: Span) -> str | None:
    """Why ``span`` names nothing of ours that exists; None when it does or is not a reference."""
    text = span.text
    if span.history or text in FOREIGN:
        return None
    if " " in text:  # a command or an expression: its script paths and module paths
        for raw in text.split():
            word = raw.strip("\"',;()")
            if word.endswith(".py") and word not in FOREIGN and not python_path_exists(word):
                return f"no file {word}"
            if re.match(r"^(tools|yomiage)\.\w", word) and not module_path_exists(word):
                return f"no module {word}"
        return None
    if any(c in text for c in "<>{}…$:=,"):
        return None  # a pattern (`onnx/speakers/<name>/`), a setting, an expression
    if text.endswith(".py"):
        return None if python_path_exists(text) else "no such file of ours"
    if "/" in text and text.split("/")[0] in root_entries():
        if text.startswith(ignored_folders()) or repository_path_exists(text):
            return None
        return "no such path in the repository"
    if _DOTTED.match(text):
        exists = dotted_name_exists(text)
        return "not defined where it says" if exists is False else None
    if _CONSTANT.match(text):
        return None if text in code_words() else "no such word in our code"
    if _PRIVATE.match(text) or _CAMEL.match(text) or _CALL.match(text) or _TEST.match(text):
        name = text.removesuffix("()")
        return None if name in definitions().everywhere else "defined nowhere in our Python"
    return None


def spans() -> list[Span]:
    return [span for doc in DOCS for span in code_spans(doc)]


# -- the tests -----------------------------------------------------------------------------------
def test_every_code_reference_in_the_docs_names_something_that_exists() -> None:
    problems = [f"{span}: {why}" for span in spans() if (why := reference_problem(span))]
    assert not problems, "\n".join(problems)


def test_every_relative_link_in_the_docs_leads_somewhere() -> None:
    broken = []
    for doc in DOCS:
        for target in _LINK.findall(prose(doc.read_text(encoding="utf-8"))):
            path = target.split("#")[0]
            if path and "://" not in path and not (doc.parent / path).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("engine/lanes.py", True),
        ("engine/onnx/sessions.py", False),
        ("onnx/passes/registry.py", False),
        ("pieces.DecodeSpeed", True),
        ("decode_speed.DecodeSpeed.expected_s", False),
        ("decode_speed.DecodeSpeed.no_such_member", True),
        ("machine.blocked_kernel_block()", False),
        ("Engine.stream", False),
        ("_whole_on_lanes", True),
        ("_first_in_one_turn", False),
        ("GraphEdit", False),
        ("PAUSE_WINDOW_CHARS", False),
        ("REWRITE_VERSION", True),
        ("YOMIAGE_CACHE_DIR", False),
        ("LaneScheduler", True),
        ("tools.bench --peer dialects", False),
        ("tools.no_such_tool --quick", True),
        ("yomiage.prepare", False),
        ("yomiage.no_such_service", True),
        ("scripts/demo", False),
        ("scripts/no-such-script", True),
        ("custom_components/yomiage/models/prepared-graphs/", False),  # made at run time
        # Not ours: Home Assistant's, onnxruntime's, a config key, a file name, another project's.
        ("tts.speak", False),
        ("session.intra_op.allow_spinning", False),
        ("data.spk2id", False),
        ("results.json", False),
        ("convert_onnx.py", False),
    ],
)
def test_the_rules(text: str, problem: bool) -> None:
    span = Span(ROOT / "README.md", 1, text, history=False)
    assert (reference_problem(span) is not None) is problem


def test_a_removed_name_with_its_commit_is_history() -> None:
    doc = ROOT / "docs" / "PERFORMANCE.md"
    assert reference_problem(Span(doc, 1, "engine/lanes.py", history=True)) is None
    text = "`_whole_on_lanes` of 2fcb1c6, `lanes.py` (removed in 259c069) and `_jobs`, later"
    assert [span.history for span in _spans_of(text)] == [True, True, False]


def _spans_of(text: str) -> list[Span]:
    return [
        Span(ROOT, 1, m.group(2), bool(_HISTORY.match(text[m.end() :])))
        for m in _SPAN.finditer(text)
    ]


# -- ARCHITECTURE.md's layer listing -------------------------------------------------------------
# Lines indented this far or more continue a description; names stand left of it.
_DESCRIPTION_COLUMN = 20


def listed_paths() -> set[str]:
    """The paths the listing under "## Layers" names (folders end in /), from its indentation:
    two spaces a level, a line's names up to the first gap of two spaces."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    listed: set[str] = set()
    folders: list[tuple[int, str]] = []  # (indent, path) of the enclosing folders
    for line in block.splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent >= _DESCRIPTION_COLUMN:
            continue
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        for name in re.split(r"\s{2,}", line.strip())[0].split():
            listed.add(parent + name)
            if name.endswith("/"):
                folders.append((indent, parent + name))
    return listed


def test_the_layer_listing_names_what_exists() -> None:
    missing = sorted(p for p in listed_paths() if not (ROOT / p).exists())
    assert not missing, f"ARCHITECTURE.md lists what does not exist: {missing}"


def test_architecture_names_only_python_files_that_exist() -> None:
    """ARCHITECTURE.md describes today's code: every ``.py`` it names, in its fenced blocks too
    (the walk from text to audio, the contracts), is a file of ours."""
    named = set(re.findall(r"[\w./-]+\.py\b", ARCHITECTURE.read_text(encoding="utf-8")))
    assert not sorted(n for n in named if not python_path_exists(n))


def test_the_layer_listing_names_every_module() -> None:
    """Every module of the integration, the engine and the yomiage package; a package's
    ``__init__.py`` is named by its folder's line."""
    listed = listed_paths()
    unlisted = []
    for package in LISTED_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            named = relative in listed or (
                path.name == "__init__.py"
                and f"{path.parent.relative_to(ROOT).as_posix()}/" in listed
            )
            if not named:
                unlisted.append(relative)
    assert not unlisted, f"ARCHITECTURE.md's layer listing leaves out: {unlisted}"
