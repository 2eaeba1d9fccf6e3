"""The benchmarks' shared conventions (scripts/bench/harness.py): one meaning of --out (a folder, the result named
`<bench>-<UTC>.json` in it), the result written with its arguments and provenance, interleaved repeats, no
sys.path edits, and every bench command line README.md and the runbooks give parsing as written."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import shlex

import pytest

import scripts.bench
from scripts.bench import harness
from tests.helpers import REPO_ROOT

HELPERS = {"harness", "corpus", "throughput_stages"}  # modules of the package that are not benchmarks
BENCHES = sorted(m.name for m in pkgutil.iter_modules(scripts.bench.__path__) if m.name not in HELPERS)
COMMAND = re.compile(r"python -m scripts\.bench\.([a-z_0-9]+)([^`#\n]*)")  # `<name>` placeholders are not commands
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "runbooks").glob("*.md"))]


def test_every_bench_takes_out_as_a_folder_named_alike():
    """Each benchmark module has NAME = its module name, a parser whose prog is its `python -m` line, --out defaulting
    to the artifacts/bench folder (one meaning of --out across all of them) and JSON-ready arguments."""
    assert len(BENCHES) >= 12, BENCHES
    for name in BENCHES:
        module = importlib.import_module(f"scripts.bench.{name}")
        assert module.NAME == name
        parser = module.parser()
        assert parser.prog == f"python -m scripts.bench.{name}"
        args = parser.parse_args([])
        assert args.out == harness.DEFAULT_OUT == "artifacts/bench"
        json.dumps(vars(args))  # the arguments go into the result as they are: plain JSON values only
        assert f"python -m scripts.bench.{name}" in module.__doc__, f"{name}'s docstring gives no run line"


def test_readme_and_runbook_bench_commands_parse_as_written():
    """Every `python -m scripts.bench.NAME ARGS` in README.md and runbooks/ names a module of the package whose parser
    accepts ARGS as written, and runbooks/benchmarks.md names every benchmark: the docs cannot drift from the code
    silently."""
    seen: dict[str, list[str]] = {}
    for doc in DOCS:
        for match in COMMAND.finditer(doc.read_text(encoding="utf-8")):
            name, args = match.group(1), shlex.split(match.group(2))
            assert name in BENCHES or name in HELPERS, f"{doc.name}: no module scripts.bench.{name}"
            if name in BENCHES:
                importlib.import_module(f"scripts.bench.{name}").parser().parse_args(args)
            seen.setdefault(doc.name, []).append(name)
    assert set(BENCHES) <= set(seen["benchmarks.md"]), set(BENCHES) - set(seen["benchmarks.md"])


def test_result_is_written_into_the_out_folder_with_arguments_and_provenance(tmp_path, capsys):
    """write_result puts `<name>-<UTC>.json` inside --out, with the bench's name, its arguments, the record and the
    provenance block, and prints its path as the one line on stdout."""
    args = harness.parse(harness.bench_parser("demo", "doc"), ["--out", str(tmp_path / "new" / "folder")])
    path = harness.write_result("demo", args, {"figure": 1.5})
    assert capsys.readouterr().out == path + "\n"
    written = tmp_path / "new" / "folder"
    assert [p.name for p in written.iterdir()] == [path.rsplit("/", 1)[1]]
    assert re.fullmatch(r"demo-\d{8}T\d{6}_\d{3}Z\.json", path.rsplit("/", 1)[1])
    record = json.loads(open(path, encoding="utf-8").read())
    assert record["bench"] == "demo" and record["figure"] == 1.5
    assert record["args"] == {"out": str(written)}
    assert {"host", "versions", "fwe_version"} <= set(record)


@pytest.mark.parametrize("out, says", [("result.json", "--out is a folder"), ("a_file", "a_file")])
def test_out_that_is_not_a_folder_is_refused_before_any_work(tmp_path, capsys, monkeypatch, out, says):
    """--out given as a .json file (the old meaning in some benches) or naming an existing file ends the run at once
    with exit 2 and one line naming it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        harness.parse(harness.bench_parser("demo", "doc"), ["--out", out])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert says in last and last.startswith("python -m scripts.bench.demo: error:")
    assert not (tmp_path / "result.json").exists()


def test_interleaved_rotates_the_order_and_keeps_results_in_rep_order():
    """Every contender runs once per rep; the order rotates (each goes first in turn) unless rotate=False; each
    contender's results come back in rep order, and after_rep sees each finished rep."""
    calls, reps_seen = [], []

    def contender(name):
        return lambda rep: calls.append((rep, name)) or f"{name}{rep}"

    results = harness.interleaved(3, {n: contender(n) for n in "abc"}, after_rep=lambda rep, done: reps_seen.append(
        (rep, {k: len(v) for k, v in done.items()})))
    assert [name for _, name in calls] == list("abc" "bca" "cab")
    assert results == {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "c": ["c0", "c1", "c2"]}
    assert reps_seen == [(r, {"a": r + 1, "b": r + 1, "c": r + 1}) for r in range(3)]
    calls.clear()
    harness.interleaved(2, {n: contender(n) for n in "ab"}, rotate=False)
    assert [name for _, name in calls] == list("abab")


def test_medians_ratios_and_spread():
    """median skips missing figures; a ratio with a missing or zero denominator is None, not a crash or infinity;
    spread reports median, range and every value."""
    assert harness.median([3.0, None, 1.0, 2.0]) == 2.0 and harness.median([None]) is None
    assert harness.median([1.23456, 2.0], digits=2) == 1.62
    assert harness.ratio(1.0, 4.0) == 0.25 and harness.ratio(1.0, 0.0) is None and harness.ratio(None, 1.0) is None
    assert harness.spread([2.0, 1.0, 4.0]) == {"median": 2.0, "min": 1.0, "max": 4.0, "relative_spread": 1.5,
                                                "all": [2.0, 1.0, 4.0]}


def test_child_env_hides_the_users_loader_settings(monkeypatch):
    """A measured child process sees none of the shell's NSA_FWE_* settings (a bench measures the settings it names)."""
    monkeypatch.setenv("NSA_FWE_Q", "2")
    env = harness.child_env(EXTRA="1")
    assert "NSA_FWE_Q" not in env and env["EXTRA"] == "1" and env["PATH"]


def test_no_script_edits_sys_path():
    """Nothing under scripts/ edits sys.path: fwe_cli comes from the installed package, scripts.bench and tests.hubsim
    from the repository root as the working directory of `python -m`."""
    offenders = [str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "scripts").rglob("*.py")
                 if "sys.path" in p.read_text(encoding="utf-8")]
    assert offenders == []
