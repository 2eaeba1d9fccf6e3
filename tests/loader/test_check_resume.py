"""Resume checked by generated cases (scripts.check_resume): source trees, packings, shuffles, readers, adapters,
cut points, serialisations and changes of world drawn by hypothesis, each held to what an uninterrupted run delivers.
A fixed seed, so every run draws the same cases: the fast subset a small budget, the slow one more (with DataLoader
worker processes); `python -m scripts.check_resume --examples N` runs as many as asked."""

from __future__ import annotations

import orjson
import pytest

pytest.importorskip("torchdata.stateful_dataloader")
pytest.importorskip("grain")

from scripts.check_resume.__main__ import main, run_cases  # noqa: E402
from scripts.check_resume.cases import Case, Leaf  # noqa: E402


def test_generated_cases_resume_exactly_small_budget():
    """25 cases (seed 0, no worker processes): every one resumes byte for byte in its world, once in another."""
    count, failed, error = run_cases(25, 0, workers=False)
    assert failed is None, f"{error}\n{failed.script() if failed else ''}"
    assert count >= 25


def test_generated_cases_resume_exactly_with_worker_processes():
    """150 cases (seed 11), DataLoader worker processes among them."""
    count, failed, error = run_cases(150, 11, workers=True)
    assert failed is None, f"{error}\n{failed.script() if failed else ''}"
    assert count >= 150


def test_a_case_prints_as_the_script_that_runs_it(tmp_path):
    """A case's script names only what differs from the defaults and runs it: the reproduction a failure prints."""
    case = Case(leaves=(Leaf("jsonl", 12), Leaf("txt", 5)), weights=(2, 1), stops=("first_exhausted", "cycle"),
                pack="best-fit", ranks=2, cut=(4, 9), serial="pickle", new_ranks=3)
    script = case.script()
    assert "ranks=2" in script and "seq_len" not in script
    exec(compile(script, "case.py", "exec"), {})  # (raises if the case fails)


def test_the_command_runs_cases_and_writes_its_summary(tmp_path, capsys):
    """`python -m scripts.check_resume --examples 3 --no-workers`: exit 0, one JSON summary on stdout, the same in
    its file; a budget below 1 is a usage error naming it."""
    assert main(["--examples", "3", "--no-workers", "--out", str(tmp_path)]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["ok"] and summary["run"] >= 3 and summary["script"] is None
    assert [orjson.loads(p.read_bytes()) for p in tmp_path.glob("check_resume-*.json")] == [summary]
    with pytest.raises(SystemExit) as exit_info:
        main(["--examples", "0"])
    assert exit_info.value.code == 2 and "--examples must be at least 1, got 0" in capsys.readouterr().err
