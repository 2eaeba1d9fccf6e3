"""The architecture as the tree shows it: folders are concerns, imports point downward, modules stay small."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "fwe_cli"
MAX_LINES = 300
MAX_TOP_MODULES = 6
# cli -> report -> bootstrap / tokens / measure / train -> loader -> output -> shared (the modules at the top of
# fwe_cli). A layer may import the layers below it, never one beside or above it. bootstrap and tokens (the
# token-shard writer) both build on the loader's reading (and tokenizing: the shard format is the loader's, it reads
# shards) and on output's crash-safe machinery, which the loader uses too (verifying listed files against their
# manifest); report draws what measure wrote, reading its artifacts as measure defines them; train hands the loader's
# batches to the trainers.
LAYER = {"cli": 5, "report": 4, "bootstrap": 3, "tokens": 3, "measure": 3, "train": 3, "loader": 2, "output": 1}
# output sits below everything of fwe's but these shared modules, and needs no third-party package but these.
OUTPUT_SHARED = ("fwe_cli.errors", "fwe_cli.artifacts", "fwe_cli.hostinfo")
OUTPUT_THIRD_PARTY = ("psutil", "orjson")
HEAVY = ("datasets", "pyarrow", "torch", "tokenizers")
# The loader's parts (a folder is one part, a module at its top another), from the bottom up: a part imports only
# the parts below it, type-only imports included. Plumbing (thread tools, the far side, rows), tokenizers, what
# every source shares, the wings of sources (files, the Hub, sources made of sources), the config that names them,
# the state (what a reader saved, how a world continues another), a reader's documents, the producer, the public
# iterator.
LOADER_PARTS = ("documents", "limits", "flow", "remote", "rows", "shard", "tokenization", "sources", "files", "hub",
                "compose", "variables", "config", "state", "stream", "pipeline", "fineweb_loader", "__init__")
MAX_LOADER_PARTS = 20
MAX_SOURCES_MODULES = 14


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `if typing.TYPE_CHECKING:`): a block that never runs, only type checkers read it."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (getattr(test, "id", None) == "TYPE_CHECKING"
                                         or getattr(test, "attr", None) == "TYPE_CHECKING")


def _walk(node: ast.AST, into_functions: bool):
    """Every node below `node` that can run: function bodies only when `into_functions` (they do not run at import
    time), never an `if TYPE_CHECKING:` block."""
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            continue
        yield child
        if into_functions or not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, into_functions)


def _imports(path: Path, top_level_only: bool, type_only: bool = False) -> set[str]:
    """Modules a file imports: those that run at import time (module and class bodies), or all of them (with
    `type_only`, those only type checkers read too)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if type_only else _walk(tree, into_functions=not top_level_only)
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _layer(module: str) -> int:
    if module == "fwe_cli.__main__":  # `python -m fwe_cli`: the entry point sits above everything
        return 6
    parts = module.split(".")
    return LAYER.get(parts[1], 0) if len(parts) > 1 else 0


def test_no_module_is_over_the_size_limit():
    """Every module under fwe_cli/ stays within 300 lines, so each can be read in one sitting."""
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_top_of_the_package_holds_only_shared_modules():
    """At most six modules sit at the top of fwe_cli/; everything else lives in its concern's folder."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == {
        "cli", "bootstrap", "measure", "loader", "tokens", "report", "output", "train"}


def test_imports_point_downward():
    """No module imports a layer above its own, or another package of its own layer (function-level imports
    included): bootstrap and tokens share what they share through output, below both."""
    wrong = []
    for name, path in MODULES.items():
        for target in _imports(path, top_level_only=False):
            if target.startswith("fwe_cli.") and target.split(".")[1] in LAYER:
                if _layer(target) > _layer(name) or (_layer(target) == _layer(name)
                                                     and target.split(".")[1] != name.split(".")[1]):
                    wrong.append(f"{name} -> {target}")
    assert wrong == []


def _output_may_import(target: str) -> bool:
    root = target.split(".")[0]
    if root != "fwe_cli":
        return root in sys.stdlib_module_names or root in OUTPUT_THIRD_PARTY or root == "__future__"
    module = target if target in MODULES else target.rpartition(".")[0]  # `from M import x` also yields "M.x"
    return module.startswith("fwe_cli.output") or module in OUTPUT_SHARED


def test_output_imports_only_the_shared_modules_psutil_and_orjson():
    """fwe_cli/output (the crash-safe output machinery, below the loader) imports nothing of fwe's but errors,
    artifacts and hostinfo, and no third-party package but psutil and orjson (function-level imports included)."""
    wrong = sorted(f"{name} -> {target}" for name, path in MODULES.items() if name.startswith("fwe_cli.output")
                   for target in _imports(path, top_level_only=False) if not _output_may_import(target))
    assert wrong == []


def _cycles(top_level_only: bool) -> list[list[str]]:
    """Import circles among fwe_cli's modules: one per import that closes a circle (a depth-first search reports
    every such edge, so no circle goes unreported)."""
    graph = {name: {t for t in _imports(path, top_level_only=top_level_only) if t in MODULES and t != name}
             for name, path in MODULES.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_circle():
    """fwe_cli's import graph has no circle, counting every import statement that can run: those inside functions
    too (they run later, but still tie the two modules together: neither can be understood, moved or tested without
    the other), not those only type checkers read (`if TYPE_CHECKING:`)."""
    assert _cycles(top_level_only=False) == []


def _loader_part(module: str) -> str | None:
    """The loader part a module of fwe_cli.loader belongs to (its folder, or itself at the top), else None."""
    parts = module.split(".")
    if parts[:2] != ["fwe_cli", "loader"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def test_the_loader_is_parts_in_layers():
    """fwe_cli/loader is at most 20 parts (each folder one part, each module at its top one), and each imports only
    the parts below it in LOADER_PARTS, counting every import, type-only ones too: a wing (hub/, files/, compose/)
    builds on what every source shares (sources/) and the plumbing below it, never the other way round."""
    parts = {_loader_part(name) for name in MODULES} - {None}
    assert len(parts) <= MAX_LOADER_PARTS and parts == set(LOADER_PARTS), sorted(parts ^ set(LOADER_PARTS))
    rank = {part: i for i, part in enumerate(LOADER_PARTS)}
    wrong = sorted(f"{name} -> {target}" for name, path in MODULES.items() if _loader_part(name)
                   for target in _imports(path, top_level_only=False, type_only=True)
                   if target in MODULES and _loader_part(target) and _loader_part(target) != _loader_part(name)
                   and rank[_loader_part(target)] > rank[_loader_part(name)])
    assert wrong == []


def test_loader_modules_are_named_by_their_idea():
    """sources/ holds what every source shares, in at most 14 modules; no module repeats its folder's name as a
    prefix (hub/listing.py, not hub/hub_listing.py); each folder's face says in a few lines what lives there."""
    loader = PACKAGE / "loader"
    assert len(list((loader / "sources").glob("*.py"))) <= MAX_SOURCES_MODULES
    repeating = sorted(str(p.relative_to(loader)) for p in loader.rglob("*.py")
                       if p.parent != loader and p.stem.startswith(p.parent.name))
    assert repeating == []
    faces = [p for p in loader.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert faces and all(ast.get_docstring(ast.parse((p / "__init__.py").read_text())) for p in faces)


def test_only_the_cli_imports_typer_or_rich():
    """The core, bootstrap and measure packages never import typer or rich (they are usable as a library)."""
    offenders = sorted(f"{name} -> {target}" for name, path in MODULES.items() if not name.startswith("fwe_cli.cli")
                       for target in _imports(path, top_level_only=False) if target.split(".")[0] in ("typer", "rich"))
    assert offenders == []


def test_help_imports_no_heavy_library():
    """`python -X importtime -m fwe_cli --help` imports none of datasets, pyarrow, torch, tokenizers (a fresh process:
    what a user's shell pays)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "fwe_cli", "--help"], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "fwe_cli.cli.app" in imported  # the probe itself works
    assert sorted(m for m in imported if m.split(".")[0] in HEAVY) == []


def test_importing_the_package_imports_nothing_else():
    """`import fwe_cli` defines __version__ and loads no fwe module, loader or numpy."""
    code = "import sys, fwe_cli; print(fwe_cli.__version__); print(sorted(m for m in sys.modules if m.startswith(('fwe_cli.', 'numpy'))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    version, loaded = proc.stdout.splitlines()
    assert version and version != "0+unknown"
    assert loaded == "[]"


def test_the_core_names_no_source_kind_and_probes_no_capability():
    """The loader's own modules (those outside the sources' wings, config and its variables: the pipeline, loader,
    stream, state, rows, flow, remote, documents, ...) know no source kind's notions (a bootstrap's head and tail, parts, origins:
    those live in their source's module), and nothing probes a source or the pipeline for a capability with
    getattr/hasattr: the Source base declares each."""
    import re

    notions = re.compile(r'head_docs|\.origin\b|"part"|"head"|"tail"')
    probes = re.compile(r"(getattr|hasattr)\((self\.)?(pipeline|source|documents|opened|p\.documents)\b")
    outside_core = ("sources", "files", "hub", "compose", "tokenization", "variables", "config")
    core = [path for name, path in MODULES.items() if _loader_part(name) not in (None, *outside_core)]
    assert len(core) > 20  # the probe reads what it claims to
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}" for path in sorted(core)
             for n, line in enumerate(path.read_text().splitlines(), start=1) if notions.search(line)]
    found += [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}" for path in sorted(PACKAGE.rglob("loader/**/*.py"))
              for n, line in enumerate(path.read_text().splitlines(), start=1) if probes.search(line)]
    assert found == []
