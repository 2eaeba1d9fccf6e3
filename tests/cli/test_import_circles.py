"""No import circle among the commands (fwe_cli/cli/) or the measurements (fwe_cli/measure/), even counting the
imports done inside functions (tests/test_layout.py counts the module-level ones for the whole package): two modules
that need each other are one idea in two places."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

import pytest

from tests.test_layout import MODULES, _imports


@pytest.mark.parametrize("package", ["fwe_cli.cli", "fwe_cli.measure"])
def test_no_import_circle_counting_function_level_imports(package):
    """Within the package, the graph of every import (module level and inside functions) has no cycle."""
    mine = {name: path for name, path in MODULES.items() if name.startswith(package + ".")}
    graph = {name: {t for t in _imports(path, top_level_only=False) if t in mine and t != name}
             for name, path in mine.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")
