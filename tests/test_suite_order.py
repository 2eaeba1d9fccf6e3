"""The suite's own schedule: tests/conftest.py's LONGEST_FIRST names modules that exist, and the session's tests run
those modules first, in that order (scripts/test.sh hands modules to the workers in this order); its SLOW names
modules and tests that exist, and exactly those carry the `slow` marker (`bash scripts/test.sh --fast` leaves them
out)."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import LONGEST_FIRST, SLOW, is_slow
from tests.helpers import REPO_ROOT


def test_longest_first_names_existing_test_modules_once():
    """Every LONGEST_FIRST entry is a test module of this tree, named once: a renamed or deleted module cannot leave
    a stale entry behind (its module would silently lose its early start)."""
    missing = [path for path in LONGEST_FIRST if not (REPO_ROOT / path).is_file()]
    assert missing == [], f"tests/conftest.py LONGEST_FIRST names modules that do not exist: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert all(path.startswith("tests/") and path.rsplit("/", 1)[1].startswith("test_") for path in LONGEST_FIRST)


def test_the_session_runs_the_longest_modules_first(request: pytest.FixtureRequest):
    """In the collected session (whatever was selected), the modules of LONGEST_FIRST come before every other module,
    in LONGEST_FIRST's order, and each module's tests stay together."""
    modules = list(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in request.session.items))
    runs = [item.nodeid.split("::", 1)[0] for item in request.session.items]
    assert len([m for i, m in enumerate(runs) if i == 0 or runs[i - 1] != m]) == len(modules), "a module was split"
    listed = [m for m in modules if m in LONGEST_FIRST]
    assert modules[:len(listed)] == sorted(listed, key=LONGEST_FIRST.index)


def test_slow_names_existing_test_modules_and_tests_once():
    """Every SLOW entry is a test module of this tree or a test function defined in one (or one of its parameters),
    named once: a renamed or deleted test cannot leave a stale entry behind (the test itself would silently join the
    fast subset)."""
    stale = []
    for entry in SLOW:
        path, _, name = entry.split("[", 1)[0].partition("::")
        module = REPO_ROOT / path
        if not (module.is_file() and path.startswith("tests/") and module.name.startswith("test_")):
            stale.append(entry)
        elif name and name not in {node.name for node in ast.parse(module.read_text()).body
                                   if isinstance(node, ast.FunctionDef)}:
            stale.append(entry)
    assert stale == [], f"tests/conftest.py SLOW names tests that do not exist: {stale}"
    assert len(set(SLOW)) == len(SLOW)


def test_exactly_the_tests_slow_names_carry_the_slow_marker(request: pytest.FixtureRequest):
    """In the collected session, a test carries the `slow` marker if and only if SLOW names its module or itself."""
    wrong = [item.nodeid for item in request.session.items
             if (item.get_closest_marker("slow") is not None) != is_slow(item.nodeid)]
    assert wrong == []
