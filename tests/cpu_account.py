"""Opt-in CPU accounting of the suite, to see which tests make it expensive (loaded by tests/conftest.py).

`FWE_TEST_CPU=FILE bash scripts/test.sh` appends one JSON line per test to FILE: its node id, wall seconds, and the
CPU seconds (user + sys) of the pytest process (its threads: the test Hub server included) and of the child processes
it waited for during the test (fwe subprocesses, torchrun jobs, fresh venvs). Every xdist worker appends to the same
file. `python -m tests.cpu_account FILE` sums them per module, the costliest first, and per marker selection.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict

import pytest

LOG_VAR = "FWE_TEST_CPU"


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    log = os.environ.get(LOG_VAR)
    if not log:
        yield
        return
    own0, children0 = _cpu()
    wall0 = time.monotonic()
    yield
    own1, children1 = _cpu()
    line = {"test": item.nodeid, "wall_s": round(time.monotonic() - wall0, 3), "own_cpu_s": round(own1 - own0, 3),
            "child_cpu_s": round(children1 - children0, 3), "slow": item.get_closest_marker("slow") is not None}
    with open(log, "a") as out:
        out.write(json.dumps(line) + "\n")


def summarize(path: str) -> str:
    """Per-module CPU seconds (own + children), the costliest first, then the totals of the slow and fast tests."""
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    totals = {True: 0.0, False: 0.0}
    with open(path) as lines:
        for row in map(json.loads, lines):
            cpu = row["own_cpu_s"] + row["child_cpu_s"]
            module = modules[row["test"].split("::", 1)[0]]
            module[0] += cpu
            module[1] += row["wall_s"]
            module[2] += 1
            totals[row["slow"]] += cpu
    out = [f"{'cpu_s':>8} {'wall_s':>8} {'tests':>5}  module"]
    for name, (cpu, wall, count) in sorted(modules.items(), key=lambda kv: -kv[1][0]):
        out.append(f"{cpu:8.1f} {wall:8.1f} {count:5d}  {name}")
    whole = totals[True] + totals[False]
    out.append(f"total {whole:.1f} CPU-s; not slow {totals[False]:.1f} ({totals[False] / max(whole, 1e-9):.0%})")
    return "\n".join(out)


if __name__ == "__main__":
    print(summarize(sys.argv[1]))
