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


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """Modules a file imports: those that run at import time (module and class bodies), or all of them."""
    found: set[str] = set()
    for node in _walk(ast.parse(path.read_text(encoding="utf-8")), into_functions=not top_level_only):
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
    """The loader's own modules (fwe_cli/loader/*.py: pipeline, loader, documents, doc batches, telemetry, ...) know
    no source kind's notions (a bootstrap's head and tail, parts, origins: those live in their source's module), and
    nothing probes a source or the pipeline for a capability with getattr/hasattr: the Source base declares each."""
    import re

    notions = re.compile(r'head_docs|\.origin\b|"part"|"head"|"tail"')
    probes = re.compile(r"(getattr|hasattr)\((self\.)?(pipeline|source|documents|opened|p\.documents)\b")
    found = [f"{path.name}:{n}: {line.strip()}" for path in sorted(PACKAGE.glob("loader/*.py")) if path.name != "config.py"
             for n, line in enumerate(path.read_text().splitlines(), start=1) if notions.search(line)]
    found += [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}" for path in sorted(PACKAGE.rglob("loader/**/*.py"))
              for n, line in enumerate(path.read_text().splitlines(), start=1) if probes.search(line)]
    assert found == []
